import Device
import Foundation
import Sealing
import SecretService
import Platform

/// Whose codes `BlockStoreError`'s are.
public enum BlockStoreErrorDomain {}

/// The one error type of the Block Store, with Google's status codes exactly
/// (`BlockstoreStatusCodes`, and `CommonStatusCodes` for the general ones): each code's `name`
/// and `rawValue` are Google's. Compares by code. The failure underneath, when there was one, is
/// a `DeviceError` (a wrong passcode at join, …) or a `SecretServiceError`.
public typealias BlockStoreError = CodedError<BlockStoreErrorDomain>

extension ErrorCode<BlockStoreErrorDomain> {
    /// Key and bytes together exceed 4096 bytes.
    public static var maxSizeExceeded: Self { Self("MAX_SIZE_EXCEEDED", rawValue: 40000) }
    /// A 17th key for this app.
    public static var tooManyEntries: Self { Self("TOO_MANY_ENTRIES", rawValue: 40001) }
    /// Block Store is not available on this device.
    public static var featureNotSupported: Self { Self("FEATURE_NOT_SUPPORTED", rawValue: 40002) }
    /// A request that contradicts itself (keys and all together) — CommonStatusCodes.DEVELOPER_ERROR.
    public static var invalidArgument: Self { Self("DEVELOPER_ERROR", rawValue: 10) }
    /// Stored data that does not decode or authenticate, or storage that failed — CommonStatusCodes.INTERNAL_ERROR.
    public static var internalError: Self { Self("INTERNAL_ERROR", rawValue: 8) }
    /// The cloud account could not be reached — CommonStatusCodes.NETWORK_ERROR.
    public static var networkError: Self { Self("NETWORK_ERROR", rawValue: 7) }
    /// The device's storage is not reachable (no session bus, no Secret Service, or it did
    /// not answer in time) — CommonStatusCodes.API_NOT_CONNECTED; the Keychain's
    /// `errSecNotAvailable`.
    public static var apiNotConnected: Self { Self("API_NOT_CONNECTED", rawValue: 17) }
    /// The user must act first: the Secret Service collection or the device is locked —
    /// CommonStatusCodes.RESOLUTION_REQUIRED; the Keychain's `errSecInteractionNotAllowed`.
    public static var resolutionRequired: Self { Self("RESOLUTION_REQUIRED", rawValue: 6) }
}

extension BlockStoreError {
    /// How a device failure looks to a Block Store caller, told apart as the Keychain tells them:
    /// storage not reachable, locked (the user must unlock), or an internal failure.
    package init(_ error: DeviceError) {
        let code: Code =
            switch error.code {
            // The Secret Service not reachable; a device directory that cannot be used is not that.
            case .notAvailable where error.underlying is SecretServiceError: .apiNotConnected
            case .interactionNotAllowed: .resolutionRequired
            default: .internalError
            }
        self.init(code, error.message, underlying: error)
    }
}
