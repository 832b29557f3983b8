import Foundation
import Platform
import Sealing

/// `async` forms of the device's blocking calls: each runs the blocking call on a thread of its
/// own (`offThePool`), never on one of Swift concurrency's cooperative threads — from a server's
/// request handler, `try await device.unlock(passcode: p)`.
extension Device {
    /// The async form of `unlock(passcode:)`: runs the blocking unlock off the caller's thread.
    @discardableResult
    public func unlock(passcode: SecureBytes) async throws(DeviceError) -> WrongPasscodes? {
        try await offThePool { () throws(DeviceError) in try self.unlock(passcode: passcode) }
    }

    /// The async form of `setLockScreen(_:passcode:currentPasscode:)`: runs the blocking change
    /// off the caller's thread.
    @discardableResult
    public func setLockScreen(
        _ kind: LockScreenKind, passcode: SecureBytes?, currentPasscode: SecureBytes?
    ) async throws(DeviceError) -> LockScreenChange {
        try await offThePool { () throws(DeviceError) in
            try self.setLockScreen(kind, passcode: passcode, currentPasscode: currentPasscode)
        }
    }
}
