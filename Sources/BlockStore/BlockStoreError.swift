import Device
import Foundation
import Sealing
import SecretService

/// The one error type of the Block Store, with Google's status codes exactly
/// (`BlockstoreStatusCodes`, and `CommonStatusCodes` for the general ones). Compares by code.
public struct BlockStoreError: KeepsakeError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public let name: String
        private init(_ rawValue: Int, _ name: String) {
            self.rawValue = rawValue
            self.name = name
        }
        /// Key and bytes together exceed 4096 bytes.
        public static let maxSizeExceeded = Code(40000, "MAX_SIZE_EXCEEDED")
        /// A 17th key for this app.
        public static let tooManyEntries = Code(40001, "TOO_MANY_ENTRIES")
        /// Block Store is not available on this device.
        public static let featureNotSupported = Code(40002, "FEATURE_NOT_SUPPORTED")
        /// A request that contradicts itself (keys and all together) — CommonStatusCodes.DEVELOPER_ERROR.
        public static let invalidArgument = Code(10, "DEVELOPER_ERROR")
        /// Stored data that does not decode or authenticate, or storage that failed — CommonStatusCodes.INTERNAL_ERROR.
        public static let internalError = Code(8, "INTERNAL_ERROR")
        /// The cloud account could not be reached — CommonStatusCodes.NETWORK_ERROR.
        public static let networkError = Code(7, "NETWORK_ERROR")
        /// The device's storage is not reachable (no session bus, no Secret Service, or it did
        /// not answer in time) — CommonStatusCodes.API_NOT_CONNECTED; the Keychain's
        /// `errSecNotAvailable`.
        public static let apiNotConnected = Code(17, "API_NOT_CONNECTED")
        /// The user must act first: the Secret Service collection or the device is locked —
        /// CommonStatusCodes.RESOLUTION_REQUIRED; the Keychain's `errSecInteractionNotAllowed`.
        public static let resolutionRequired = Code(6, "RESOLUTION_REQUIRED")
        public var description: String { "\(name) (\(rawValue))" }
        public static func == (l: Code, r: Code) -> Bool { l.rawValue == r.rawValue }
        public func hash(into h: inout Hasher) { h.combine(rawValue) }
    }

    public let code: Code
    public let message: String
    /// The failure underneath, when there was one (a `DeviceError` for a wrong passcode at
    /// join, …).
    public let underlying: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

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
