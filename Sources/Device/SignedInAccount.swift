import Foundation
import Sealing

/// The account a device is signed in to (the cloud account: the `CloudAccount` module), as the
/// lock screen sees it. The lock screen tells it of every new passcode and every unlock, with the
/// passcode at hand, after the guess lock is released: a slow or hostile cloud never holds up the
/// lock screen or another process's unlock, and never undoes a change. The device knows nothing
/// else of it; the stores reach the account through the module that provides it.
package protocol SignedInAccount: AnyObject, Sendable {
    /// After a new passcode was set (`passcodeChanged`: it replaced another) or the device
    /// unlocked with it (`record`: the device record as that change or unlock stored it): the
    /// account looks after itself (makes, joins, re-registers or rotates its key). Returns the
    /// recovery key it made, if it made the account (even when something failed after), and what
    /// stopped it, for the caller to say (the lock screen change or unlock stands all the same).
    func passcodeDidUnlock(
        _ device: Device, record: DeviceRecord, passcode: SecureBytes, passcodeChanged: Bool
    ) -> (recoveryKey: SecureBytes?, problem: String?)

    /// Why the last unlock could not keep the account up to date (it unlocked all the same);
    /// nil when it could or had nothing to do.
    var lastProblem: String? { get set }
}
