/// The one error type of the Keychain: an Apple `OSStatus` (an `Int32`), exactly as Apple numbers it, with what
/// happened underneath. Compares by status.
public struct KeychainError: Error, Sendable, Hashable, CustomStringConvertible {
    public let status: Int32
    /// What went wrong, in words; never a secret.
    public let message: String
    /// The failure underneath, when there was one (a `SecretServiceError`, a `DeviceError`).
    public let underlying: (any Error & Sendable)?

    public init(_ status: Int32, _ message: String = "", underlying: (any Error & Sendable)? = nil)
    {
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

}
