import Foundation

/// How a caller's wrong claims are spent and how fast they may come.
///
/// - **The budget is the caller's.** Wrong claims are counted against whoever asks — a local
///   user by the uid `SO_PEERCRED` gives (the device's guess counter), an account by the budget
///   its first slot was registered into (the account's escrow) — never against one slot: a new
///   slot, a re-registration or an edited device record inherits what was spent (`CallerBudget`).
/// - **No refunds by time.** A spent try comes back only when a right claim's report was
///   acknowledged by its claimer (it told the owner: "N wrong passcodes since …"), and then only
///   the tries that report showed.
/// - **Delays that no unlock hides**, as Apple's: none for the first 4 spent tries, then 1 min
///   (5), 5 min (6), 15 min (7 and 8), 1 hour (9), counted from the last wrong claim on a clock
///   no one moves during a boot (`CLOCK_BOOTTIME`); after a reboot by the wall clock, never
///   longer than the delay itself. A claim too soon is refused with the time it is taken again,
///   and not counted.
package struct ClaimPolicy: Sendable, Hashable {
    /// The wait before a claim, by the tries spent (the last entry for every count above).
    package var delays: [TimeInterval]

    package init(delays: [TimeInterval]) {
        self.delays = delays
    }

    package static let real = ClaimPolicy(delays: [0, 0, 0, 0, 0, 60, 300, 900, 900, 3600])

    /// The wait before the next claim with `spent` tries spent.
    package func delay(spent: Int64) -> TimeInterval {
        guard !delays.isEmpty, spent > 0 else { return 0 }
        return delays[min(Int(spent), delays.count - 1)]
    }
}
