import Foundation
import Sealing

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
/// - **Guess counter service** (`Device.counter`): the service releases the secret the
///   key-encryption key needs only after a proof of the passcode, and counts every claim where no
///   process of the user reaches it — a hard limit of ``GuessLimit/hardLimit`` wrong passcodes in
///   a row. The delays here come on top.
/// - **TPM** (a slot made before the direct path was retired, `TPMConfiguration`): the TPM
///   releases the secret only to the right authorization, while its counter allows it.
/// - **Software**: the count and the delays live in the device record in the Secret Service: they
///   slow down guessing through Keepsake, but whoever can edit the login keyring can reset them,
///   and whoever can read it can guess offline at the Argon2id cost (SECURITY.md).
package struct GuessLimit {
    /// Wrong passcodes in a row after which a counted (or TPM) device is disabled.
    package static let hardLimit: UInt64 = 10

    let lockFile: URL
    let policy: RetryPolicy
    let clock: GuessClock

    init(directory: URL, policy: RetryPolicy, clock: GuessClock) {
        lockFile = directory.appendingPathComponent("lockscreen.lock")
        self.policy = policy
        self.clock = clock
    }

    /// Runs `body` holding the device's guess lock (every process of the user takes the same).
    package func exclusively<R>(_ body: () throws(DeviceError) -> R) throws(DeviceError) -> R {
        let lock = try DeviceError.lock(lockFile, "the lock-screen lock")
        defer { withExtendedLifetime(lock) {} }
        return try body()
    }

    /// Sits out the delay earned by earlier wrong passcodes, or refuses at once when it is long.
    func admit(_ record: DeviceRecord) throws(DeviceError) {
        let now = clock.now()
        guard record.notBefore > now else { return }
        if Duration.milliseconds(record.notBefore - now) > policy.longestWait {
            throw DeviceError(
                .authFailed, "too many wrong passcodes; try again in \(record.notBefore - now) ms")
        }
        clock.sleep(record.notBefore - now)
    }

    /// Counts one attempt as failed (before it is checked): the next one waits longer.
    func countAttempt(_ record: inout DeviceRecord) {
        record.failures += 1
        record.notBefore =
            clock.now() + Self.milliseconds(policy.delay(afterFailures: record.failures))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000
            + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
