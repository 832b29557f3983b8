import Device
import SecretService

/// The one error type of the Keychain: an Apple `OSStatus` (an `Int32`), exactly as Apple numbers it, with what
/// happened underneath. Compares by status.
public struct KeychainError: Error, Sendable, Hashable, CustomStringConvertible {
    public let status: Int32
    /// What went wrong, in words; never a secret.
    public let message: String
    /// The Secret Service failure underneath, when there was one.
    public let underlying: SecretServiceError?

    public init(_ status: Int32, _ message: String = "", underlying: SecretServiceError? = nil) {
        self.status = status
        self.message = message
        self.underlying = underlying
    }

    public static func == (l: Self, r: Self) -> Bool { l.status == r.status }
    public func hash(into hasher: inout Hasher) { hasher.combine(status) }

    /// `errSecItemNotFound (-25300)`, as the command line prints it.
    public var statusName: String { "\(KeychainError.name(of: status)) (\(status))" }

    public var description: String {
        message.isEmpty ? statusName : "\(statusName): \(message)"
    }

    // Apple's numbers, exactly.
    public static let success: Int32 = 0
    public static let unimplemented: Int32 = -4
    public static let param: Int32 = -50
    public static let userCanceled: Int32 = -128
    public static let notAvailable: Int32 = -25291
    public static let authFailed: Int32 = -25293
    public static let duplicateItem: Int32 = -25299
    public static let itemNotFound: Int32 = -25300
    public static let interactionNotAllowed: Int32 = -25308
    public static let decode: Int32 = -26275
    public static let missingEntitlement: Int32 = -34018

    /// The Apple constant's name for a status (`errSecDuplicateItem`).
    public static func name(of status: Int32) -> String {
        switch status {
        case success: "errSecSuccess"
        case unimplemented: "errSecUnimplemented"
        case param: "errSecParam"
        case userCanceled: "errSecUserCanceled"
        case notAvailable: "errSecNotAvailable"
        case authFailed: "errSecAuthFailed"
        case duplicateItem: "errSecDuplicateItem"
        case itemNotFound: "errSecItemNotFound"
        case interactionNotAllowed: "errSecInteractionNotAllowed"
        case decode: "errSecDecode"
        case missingEntitlement: "errSecMissingEntitlement"
        default: "Int32"
        }
    }

    /// How a Device failure looks to a keychain caller (and on the command line).
    public init(_ error: DeviceError) {
        let status: Int32 =
            switch error.code {
            case .authFailed: KeychainError.authFailed
            case .interactionNotAllowed: KeychainError.interactionNotAllowed
            case .invalidPasscode: KeychainError.param
            case .corrupt: KeychainError.decode
            default: KeychainError.notAvailable
            }
        self.init(status, error.message, underlying: error.underlying)
    }

    /// How a Secret Service failure looks to a keychain caller.
    init(_ error: SecretServiceError) {
        let status: Int32 =
            switch error.code {
            case .locked, .promptRequired: KeychainError.interactionNotAllowed
            case .invalidArgument: KeychainError.param
            case .noSuchObject: KeychainError.itemNotFound
            default: KeychainError.notAvailable
            }
        self.init(status, "\(error.code): \(error.message)", underlying: error)
    }
}
