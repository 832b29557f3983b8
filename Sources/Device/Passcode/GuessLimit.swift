import Escrow
import Foundation
import Sealing
import TPM

/// What a passcode's guesses are counted in: the record that keeps the count and the slot.
package protocol CountedRecord {
    /// Wrong passcodes in a row, and the time before which no attempt is taken (ms since 1970).
    var failures: Int { get set }
    var notBefore: Int64 { get set }
    var passcode: PasscodeSlot { get set }
    /// The device secret the software verifier and every key-encryption key are keyed by.
    var deviceSecret: Data { get }
}

/// Where passcode guesses are counted, and how fast they may come.
///
/// Every attempt (unlock, a lock-screen change proving the current passcode) runs holding the
/// device's lock (`DeviceRecordStore.exclusively`, a `flock` every process of the user takes)
/// around check-and-record: the earned delay is sat out (or the attempt refused at once when it is
/// long), the failure is **recorded before** the slow derivation, and cleared only after the
/// passcode proved right. So N parallel wrong guesses leave N counted, and a guess racing a
/// passcode change cannot write the old record back (they are serialized, and every write of the
/// record is made holding that lock by a writer that read the record under it).
///
/// What counts the guesses depends on the device:
/// - **Guess counter service** (`counter`): the service releases the secret the
///   key-encryption key needs only after a proof of the passcode, and counts every claim where no
///   process of the user reaches it — a hard limit of ``GuessLimit/hardLimit`` wrong passcodes in
///   a row. The delays here come on top.
/// - **TPM** (a direct slot, held by the TPM itself: records may hold one, new lock screens never
///   make one, `TPMConfiguration`): the TPM releases the secret only to the right authorization,
///   while its counter allows it.
/// - **Software**: the count and the delays live in the device record in the Secret Service: they
///   slow down guessing through Keepsake, but whoever can edit the login keyring can reset them,
///   and whoever can read it can guess offline at the Argon2id cost (SECURITY.md).
package struct GuessLimit: Sendable {
    /// Wrong passcodes in a row after which a counted (or TPM) device is disabled.
    package static let hardLimit: UInt64 = 10

    let policy: RetryPolicy
    let clock: GuessClock
    /// The Argon2id cost of a newly set passcode.
    let cost: Argon2Cost
    /// The TPM of a direct TPM slot (a passcode slot held by the TPM itself), when the device has
    /// one.
    package let tpm: TPMConfiguration?
    /// The guess counter service that holds the device's passcode slot, when it uses one.
    package let counter: EscrowConfiguration?

    /// The guess limit of a device tuned by `tuning`, with its TPM and guess counter.
    package init(tuning: DeviceTuning, tpm: TPMConfiguration?, counter: EscrowConfiguration?) {
        policy = tuning.retryPolicy
        clock = tuning.clock
        cost = tuning.passcodeCost
        self.tpm = tpm
        self.counter = counter
    }

    /// Checks `passcode` against `record`'s slot, counted first: the delay earned is sat out (or
    /// the attempt refused at once), the failure counted and stored (`store`) before the slow
    /// derivation, and cleared and stored again only after the passcode proved right. On the TPM
    /// path a right passcode rebases the slot; the old one is destroyed once the new one is
    /// stored. Returns the key-encryption key and, on the counted path, the secret the counter
    /// released. Call holding the device's lock (`DeviceRecordStore.exclusively`): the one way a device's own passcode is checked (a
    /// join's claim at the account's escrow is counted by the escrow).
    package func prove<Record: CountedRecord>(
        _ passcode: SecureBytes, _ record: inout Record,
        store: (Record) throws(DeviceError) -> Void
    ) throws(DeviceError) -> (
        kek: SecureBytes, counterSecret: SecureBytes?, wrongPasscodes: WrongPasscodes?,
        claim: CounterClaim?
    ) {
        try LockScreenKind.checkGuess(passcode)
        try admit(notBefore: record.notBefore)
        var (failures, notBefore) = (record.failures, record.notBefore)
        countAttempt(failures: &failures, notBefore: &notBefore)
        (record.failures, record.notBefore) = (failures, notBefore)
        try store(record)
        let slotBefore = record.passcode
        let wrongBefore = failures - 1
        let (kek, released) = try keyEncryptionKey(
            passcode, slot: &record.passcode,
            deviceSecret: SecureBytes(copying: record.deviceSecret))
        record.failures = 0
        record.notBefore = 0
        try store(record)
        remove(slotBefore, keeping: record.passcode, secret: nil)
        // What the owner is told: the counter's report (every wrong claim on this slot and the
        // slots it succeeded, through Keepsake or around it), or on the other paths the
        // record's. The caller acknowledges it (`CounterClaim.acknowledge`) once its route
        // succeeded whole and hands the report on; a route that fails after this point, or a
        // process that dies, leaves it to be reported again at the next right claim.
        let claim = released.flatMap { released in
            slotBefore.counterSlot.map {
                CounterClaim(slot: $0, pin: slotBefore.counterPin, released: released)
            }
        }
        let wrong =
            released.map {
                WrongPasscodes(count: $0.wrongSinceRight, last: $0.lastWrong, since: $0.firstWrong)
            }
            ?? WrongPasscodes(count: wrongBefore, last: nil)
        return (kek, released?.secret, wrong.count > 0 ? wrong : nil, claim)
    }

    /// Sits out the delay earned by earlier wrong passcodes (until `notBefore`, ms since 1970),
    /// or refuses at once when it is long.
    func admit(notBefore: Int64) throws(DeviceError) {
        let now = clock.now()
        guard notBefore > now else { return }
        if Duration.milliseconds(notBefore - now) > policy.longestWait {
            throw DeviceError(
                .authFailed, "too many wrong passcodes; try again in \(notBefore - now) ms")
        }
        clock.sleep(notBefore - now)
    }

    /// Counts one attempt as failed (before it is checked): the next one waits longer.
    func countAttempt(failures: inout Int, notBefore: inout Int64) {
        failures += 1
        notBefore = clock.now() + Self.milliseconds(policy.delay(afterFailures: failures))
    }

    package static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000
            + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

/// A right claim at the guess counter: the slot it was made on and its report, which the route
/// that made it acknowledges once it has succeeded (the tries the report showed come back), and
/// which a new slot registered in the same route names as its predecessor.
package struct CounterClaim: Sendable {
    package var slot: Data
    package var pin: CounterPin?
    package var released: EscrowClient.Released

    /// The new slot's predecessor, proven by this claim's report.
    package var succession: (slot: Data, report: Data)? {
        released.report.map { (slot, $0) }
    }
}

/// How wrong passcodes are slowed down: after n consecutive failures the next attempt waits
/// `base × 2^(n−1)`, capped at `maximum`. The count and the time it earns are kept by the
/// caller's `CountedRecord` (the device record, in the Secret Service), so they survive processes
/// and restarts.
package struct RetryPolicy: Sendable, Hashable {
    package var base: Duration
    package var maximum: Duration
    /// Longest wait an attempt sits through before answering errSecAuthFailed at once.
    package var longestWait: Duration

    package init(
        base: Duration = .seconds(1), maximum: Duration = .seconds(3600),
        longestWait: Duration = .seconds(10)
    ) {
        self.base = base
        self.maximum = maximum
        self.longestWait = longestWait
    }

    package func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let factor = 1 << min(failures - 1, 30)
        return min(base * factor, maximum)
    }
}

/// The time the wrong-passcode delays are measured and sat out in: the wall clock (`system`) on
/// every shipped device. Tests pass a clock of their own that advances instead of sleeping, so a
/// delay is checked without waiting for it.
package struct GuessClock: Sendable, Hashable {
    /// Milliseconds since 1970 (delays are kept in the device record, across processes).
    package let now: @Sendable () -> Int64
    /// Waits `milliseconds`.
    package let sleep: @Sendable (_ milliseconds: Int64) -> Void
    private let identity: UUID

    package init(
        now: @escaping @Sendable () -> Int64, sleep: @escaping @Sendable (Int64) -> Void
    ) {
        self.now = now
        self.sleep = sleep
        identity = UUID()
    }

    package static let system = GuessClock(
        now: { Int64(Date().timeIntervalSince1970 * 1000) },
        sleep: { Thread.sleep(forTimeInterval: Double($0) / 1000) })

    package static func == (a: Self, b: Self) -> Bool { a.identity == b.identity }
    package func hash(into hasher: inout Hasher) { hasher.combine(identity) }
}

/// How expensive a device makes passcode guessing: the Argon2id cost for a newly set passcode and
/// the wrong-passcode delays (and the clock they run on). `real` is what every shipped device
/// uses; the cheaper tunings the tests need are built by the test support target through this
/// `package` type.
package struct DeviceTuning: Sendable, Hashable {
    package var passcodeCost: Argon2Cost
    package var retryPolicy: RetryPolicy
    package var clock: GuessClock

    package init(passcodeCost: Argon2Cost, retryPolicy: RetryPolicy, clock: GuessClock = .system) {
        self.passcodeCost = passcodeCost
        self.retryPolicy = retryPolicy
        self.clock = clock
    }

    package static let real = DeviceTuning(passcodeCost: .moderate, retryPolicy: RetryPolicy())
}
