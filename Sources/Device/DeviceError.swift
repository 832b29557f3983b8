import Escrow
import Foundation
import Platform
import Sealing
import TPM

/// Whose codes `DeviceError`'s are.
public enum DeviceErrorDomain {}

/// The one error type of the Device module. Compares by code; never carries a passcode or key.
/// The failure underneath, when there was one, is a `SecretServiceError`, an `EscrowError`, a
/// `TPMError` or a file error.
public typealias DeviceError = CodedError<DeviceErrorDomain>

extension ErrorCode<DeviceErrorDomain> {
    /// An app id that is not reverse-DNS (`App.isValidID`).
    public static var invalidAppID: Self { Self("invalid app id") }
    /// A passcode that does not fit its kind (a 3-digit pin, a pattern reusing a cell, …).
    public static var invalidPasscode: Self { Self("invalid passcode") }
    /// A wrong passcode, one given too soon after failures, or a class that needs a passcode
    /// on a device without one (Apple's errSecAuthFailed).
    public static var authFailed: Self { Self("authentication failed") }
    /// The class key is not available in the current lock state (errSecInteractionNotAllowed).
    public static var interactionNotAllowed: Self { Self("not available in this lock state") }
    /// The Secret Service, the TPM, the guess counter or escrow, or the device directory failed
    /// underneath (see `underlying`).
    public static var notAvailable: Self { Self("not available") }
    /// The device's stored state does not decode or authenticate.
    public static var corrupt: Self { Self("device state corrupt") }
    /// Too many wrong passcodes in a row on a device whose guesses a guess counter service or a
    /// TPM counts: the passcode slot is no longer released; only erasing the device (`Device.wipe()`) recovers it (errSecAuthFailed).
    public static var disabled: Self { Self("device disabled") }
}

extension DeviceError {
    /// The `.invalidAppID` error `App.init` throws, saying the id must be reverse-DNS.
    public static var invalidAppID: Self {
        Self(.invalidAppID, "the app id must be reverse-DNS (e.g. com.example.wallet)")
    }
}

extension DeviceError {
    /// The exclusive lock on `file` in the device directory (both checked as
    /// `checkOwnedByUser`: another user's lock file could be held forever, or swapped), named
    /// `what` when it cannot be taken. Held until the value is released.
    package static func lock(_ file: URL, _ what: String) throws(DeviceError) -> FileLock {
        try checkOwnedByUser([file.deletingLastPathComponent(), file])
        do { return try FileLock(file) } catch {
            throw DeviceError(.notAvailable, "\(what): \(error)", underlying: error)
        }
    }

    /// `Files.checkOwnedByUser` for each of `places` (a device directory and a file in it), its
    /// refusal as `.notAvailable`.
    package static func checkOwnedByUser(_ places: [URL]) throws(DeviceError) {
        do {
            for place in places { try Files.checkOwnedByUser(place) }
        } catch {
            throw DeviceError(
                .notAvailable, "the device directory: \(error.localizedDescription)",
                underlying: error)
        }
    }
}

extension DeviceError {
    /// An escrow's or guess counter's failure as the device says it (the one place it is
    /// translated): a wrong passcode `.authFailed` ("wrong passcode for the cloud account"), a
    /// claim refused until a delay passes `.authFailed` with the service's words, a destroyed or
    /// missing record and an unreachable service `.notAvailable`.
    package init(escrow error: EscrowError) {
        switch error.code {
        case .authFailed:
            self.init(.authFailed, "wrong passcode for the cloud account", underlying: error)
        case .wait:
            self.init(
                .authFailed,
                "\(error.message); meanwhile join by approval of an existing device (device join --approval) or with the recovery key (device join --recovery-key)",
                underlying: error)
        case .destroyed:
            self.init(
                .notAvailable,
                "\(EscrowProtocol.maximumLimit) wrong passcodes: the escrow record is destroyed; join by approval or with the recovery key",
                underlying: error)
        case .notFound:
            self.init(
                .notAvailable,
                "the escrow holds no record for this account (none registered, or removed): join by approval or with the recovery key",
                underlying: error)
        default:
            self.init(.notAvailable, error.message, underlying: error)
        }
    }

    /// A TPM failure as the device says it: `.notAvailable`, "the TPM: …".
    package init(tpm error: TPMError) {
        self.init(.notAvailable, "the TPM: \(error)", underlying: error)
    }
}
