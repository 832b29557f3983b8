import Foundation

/// How a slot's wrong claims are spent: what a right claim does not give back, how fast spent
/// tries come back, and how long a slot waits before it takes the next claim.
///
/// - **Spent, not refunded.** A right claim takes back only its own count. Wrong claims made
///   around the owner (straight at the service, between the owner's unlocks) stay spent: an
///   attacker cannot wait for the owner's next unlock to get a fresh allowance.
/// - **One back a day.** One spent try comes back each `recovery` (24 hours) — so a slot's owner
///   who mistypes now and then over months is never disabled by the sum, and an attacker who
///   spent `limit − 1` gets one more guess a day: at most `limit − 1 + days` in all, ~374 in a
///   year for a limit of 10 (a 4-digit pin: ~13 years on average to hit; 6 digits: ~1,300).
/// - **Delays that no unlock hides**, as Apple's: none for the first 4 spent tries, then 1 min
///   (5), 5 min (6), 15 min (7 and 8), 1 hour (9), counted from the last wrong claim. A claim
///   too soon is refused with the time it is taken again, and not counted.
package struct ClaimPolicy: Sendable, Hashable {
    /// How long one spent try takes to come back.
    package var recovery: TimeInterval
    /// The wait before a claim, by the tries spent (the last entry for every count above).
    package var delays: [TimeInterval]

    package init(recovery: TimeInterval, delays: [TimeInterval]) {
        self.recovery = recovery
        self.delays = delays
    }

    package static let real = ClaimPolicy(
        recovery: 24 * 3600, delays: [0, 0, 0, 0, 0, 60, 300, 900, 900, 3600])

    /// The wait before the next claim with `spent` tries spent.
    package func delay(spent: Int64) -> TimeInterval {
        guard !delays.isEmpty, spent > 0 else { return 0 }
        return delays[min(Int(spent), delays.count - 1)]
    }
}
