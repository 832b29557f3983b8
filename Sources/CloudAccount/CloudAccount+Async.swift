import Device
import Foundation
import Platform
import Sealing

/// `async` forms of the unlock and the joins, as `Device+Async.swift` has them for the device:
/// each runs the blocking call on a thread of its own.
extension CloudAccount {
    /// The async form of `unlock(passcode:)`: runs the blocking unlock off the caller's thread.
    @discardableResult
    public func unlock(passcode: SecureBytes) async throws(DeviceError) -> SecureBytes? {
        try await offThePool { () throws(DeviceError) in try self.unlock(passcode: passcode) }
    }

    /// The async form of `join(passcode:)`: runs the blocking join off the caller's thread.
    @discardableResult
    public func join(passcode: SecureBytes) async throws(DeviceError) -> JoinVouching {
        try await offThePool { () throws(DeviceError) in try self.join(passcode: passcode) }
    }

    /// The async form of `join(recoveryKey:)`: runs the blocking join off the caller's thread.
    @discardableResult
    public func join(recoveryKey: SecureBytes) async throws(DeviceError) -> JoinVouching {
        try await offThePool { () throws(DeviceError) in try self.join(recoveryKey: recoveryKey) }
    }
}
