import Foundation
import Sealing
import SecretService

/// The one error type of the Device module. Compares by code; never carries a passcode or key.
public struct DeviceError: KeepsakeError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidAppID, invalidPasscode, authFailed, interactionNotAllowed, notAvailable
            case corrupt, disabled
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        public static let invalidAppID = Code(.invalidAppID)
        /// A passcode that does not fit its kind (a 3-digit pin, a pattern reusing a cell, …).
        public static let invalidPasscode = Code(.invalidPasscode)
        /// A wrong passcode, one given too soon after failures, or a class that needs a passcode
        /// on a device without one (Apple's errSecAuthFailed).
        public static let authFailed = Code(.authFailed)
        /// The class key is not available in the current lock state (errSecInteractionNotAllowed).
        public static let interactionNotAllowed = Code(.interactionNotAllowed)
        /// The Secret Service failed underneath (see `underlying`).
        public static let notAvailable = Code(.notAvailable)
        /// The device's stored state does not decode or authenticate.
        public static let corrupt = Code(.corrupt)
        /// Too many wrong passcodes in a row on a TPM device: the TPM no longer releases the
        /// passcode slot; only erasing the device (``Device/wipe()``) recovers it (errSecAuthFailed).
        public static let disabled = Code(.disabled)
        public var description: String {
            switch value {
            case .invalidAppID: "invalid app id"
            case .invalidPasscode: "invalid passcode"
            case .authFailed: "authentication failed"
            case .interactionNotAllowed: "not available in this lock state"
            case .notAvailable: "Secret Service unavailable"
            case .corrupt: "device state corrupt"
            case .disabled: "device disabled"
            }
        }
    }

    public let code: Code
    public let message: String
    /// The failure underneath, when there was one (a `SecretServiceError`, a file error).
    public let underlying: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public static let invalidAppID = DeviceError(
        .invalidAppID, "the app id must be reverse-DNS (e.g. com.example.wallet)")

}

extension DeviceError {
    /// The exclusive lock on `file` in the device directory (both checked as
    /// `checkOwnedByUser`: another user's lock file could be held forever, or swapped), named
    /// `what` when it cannot be taken. Held until the value is released.
    static func lock(_ file: URL, _ what: String) throws(DeviceError) -> FileLock {
        try checkOwnedByUser([file.deletingLastPathComponent(), file])
        do { return try FileLock(file) } catch {
            throw DeviceError(.notAvailable, "\(what): \(error)", underlying: error)
        }
    }

    /// `Files.checkOwnedByUser` for each of `places` (a device directory and a file in it), its
    /// refusal as `.notAvailable`.
    static func checkOwnedByUser(_ places: [URL]) throws(DeviceError) {
        do {
            for place in places { try Files.checkOwnedByUser(place) }
        } catch {
            throw DeviceError(
                .notAvailable, "the device directory: \(error.localizedDescription)",
                underlying: error)
        }
    }
}
