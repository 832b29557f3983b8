import Foundation
import Sealing
import TPM

/// Where passcode guesses are counted, and how fast they may come.
///
/// Every attempt (unlock, a lock-screen change proving the current passcode) runs inside one
/// cross-process lock (`flock` on `lockscreen.lock` in the device directory) around
/// check-and-record: the earned delay is sat out (or the attempt refused at once when it is
/// long), the failure is **recorded before** the slow derivation, and cleared only after the
/// passcode proved right. So N parallel wrong guesses leave N counted, and a guess racing a
/// passcode change cannot write the old record back (they are serialized, and every write
/// re-checks the record's generation).
///
/// What counts the guesses depends on the device:
/// - **Guess counter service** (`counter`): the service releases the secret the
///   key-encryption key needs only after a proof of the passcode, and counts every claim where no
///   process of the user reaches it — a hard limit of ``GuessLimit/hardLimit`` wrong passcodes in
///   a row. The delays here come on top.
/// - **TPM** (a slot made before the direct path was retired, `TPMConfiguration`): the TPM
///   releases the secret only to the right authorization, while its counter allows it.
/// - **Software**: the count and the delays live in the device record in the Secret Service: they
///   slow down guessing through Keepsake, but whoever can edit the login keyring can reset them,
///   and whoever can read it can guess offline at the Argon2id cost (SECURITY.md).
/// What a passcode's guesses are counted in: the record that keeps the count and the slot.
package protocol CountedRecord {
    /// Wrong passcodes in a row, and the time before which no attempt is taken (ms since 1970).
    var failures: Int { get set }
    var notBefore: Int64 { get set }
    var passcode: PasscodeSlot { get set }
    /// The device secret the software verifier and every key-encryption key are keyed by.
    var deviceSecret: Data { get }
}

package struct GuessLimit: Sendable {
    /// Wrong passcodes in a row after which a counted (or TPM) device is disabled.
    package static let hardLimit: UInt64 = 10

    let lockFile: URL
    let policy: RetryPolicy
    let clock: GuessClock
    /// The Argon2id cost of a newly set passcode.
    let cost: Argon2Cost
    /// The TPM of a slot made before the direct TPM path was retired, when the device has one.
    package let tpm: TPMConfiguration?
    /// The guess counter service that holds the device's passcode slot, when it uses one.
    package let counter: EscrowConfiguration?

    /// The guess limit of the device whose directory is `directory`.
    package init(
        directory: URL, tuning: DeviceTuning, tpm: TPMConfiguration?,
        counter: EscrowConfiguration?
    ) {
        lockFile = directory.appendingPathComponent("lockscreen.lock")
        policy = tuning.retryPolicy
        clock = tuning.clock
        cost = tuning.passcodeCost
        self.tpm = tpm
        self.counter = counter
    }

    /// Runs `body` holding the device's guess lock (every process of the user takes the same).
    package func exclusively<R>(_ body: () throws(DeviceError) -> R) throws(DeviceError) -> R {
        let lock = try DeviceError.lock(lockFile, "the lock-screen lock")
        defer { withExtendedLifetime(lock) {} }
        return try body()
    }

    /// Checks `passcode` against `record`'s slot, counted first: the delay earned is sat out (or
    /// the attempt refused at once), the failure counted and stored (`store`) before the slow
    /// derivation, and cleared and stored again only after the passcode proved right. On the TPM
    /// path a right passcode rebases the slot; the old one is destroyed once the new one is
    /// stored. Returns the key-encryption key and, on the counted path, the secret the counter
    /// released. Call inside `exclusively`; the one way this package checks a passcode.
    package func prove<Record: CountedRecord>(
        _ passcode: SecureBytes, _ record: inout Record,
        store: (Record) throws(DeviceError) -> Void
    ) throws(DeviceError) -> (kek: SecureBytes, counterSecret: SecureBytes?) {
        try LockScreenKind.checkGuess(passcode)
        try admit(notBefore: record.notBefore)
        var (failures, notBefore) = (record.failures, record.notBefore)
        countAttempt(failures: &failures, notBefore: &notBefore)
        (record.failures, record.notBefore) = (failures, notBefore)
        try store(record)
        let slotBefore = record.passcode
        let (kek, counterSecret) = try keyEncryptionKey(
            passcode, slot: &record.passcode,
            deviceSecret: SecureBytes(copying: record.deviceSecret))
        record.failures = 0
        record.notBefore = 0
        try store(record)
        remove(slotBefore, keeping: record.passcode, secret: nil)
        return (kek, counterSecret)
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
