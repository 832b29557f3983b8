import Foundation

/// The shape every Keepsake error shares: a code of its module's own (Apple's `OSStatus`,
/// Google's status codes, Keepsake's), a message that never holds a secret, and the failure
/// underneath when there was one. Errors compare and hash by code; `localizedDescription` is the
/// sentence `description` and the command line give, not Foundation's "The operation could not be
/// completed". Each module's error type declares its codes and fields; the rest is here, once.
public protocol KeepsakeError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// The module's codes: Apple's `KeychainStatus` for the Keychain, an `ErrorCode` of the
    /// module's domain for the others.
    associatedtype Code: Hashable, Sendable, CustomStringConvertible
    /// What went wrong, as its module's callers tell failures apart.
    var code: Code { get }
    /// Why, in words: never a secret, a passcode or key material.
    var message: String { get }
    /// The failure underneath, when there was one.
    var underlying: (any Error & Sendable)? { get }
}

extension KeepsakeError {
    /// Equal when the codes are: the message and the failure underneath do not count.
    public static func == (l: Self, r: Self) -> Bool { l.code == r.code }
    /// Hashes the code alone, as `==` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    /// `code: message` (the code alone when there is no message).
    public var description: String { message.isEmpty ? "\(code)" : "\(code): \(message)" }
    /// The same sentence as `description`, so that `localizedDescription` gives it.
    public var errorDescription: String? { description }
}

/// One code of a module's errors. `Domain` says whose: codes of two modules never compare, even
/// under one name. A module declares its codes as static members of `ErrorCode<ItsDomain>`
/// (`DeviceError.Code.authFailed`); a code compares by its name (and its number, for codes that
/// carry one, as Google's status codes do).
public struct ErrorCode<Domain>: Hashable, Sendable, CustomStringConvertible {
    /// The code's name, as `description` and the command line print it (`authentication failed`,
    /// `MAX_SIZE_EXCEEDED`).
    public let name: String
    /// The number the code's API gives it, for the codes that have one (Google's status codes).
    public let rawValue: Int?

    package init(_ name: String, rawValue: Int? = nil) {
        self.name = name
        self.rawValue = rawValue
    }

    /// The name, with the number after it when there is one: `MAX_SIZE_EXCEEDED (40000)`.
    public var description: String { rawValue.map { "\(name) (\($0))" } ?? name }
}

/// The error type of the modules whose errors are a code, a message and what failed underneath
/// (`DeviceError`, `SealingError`, `HintError`, …: each a `CodedError` of its module's domain).
/// One implementation, so that every module's error compares, prints and bridges to
/// `LocalizedError` alike.
public struct CodedError<Domain>: KeepsakeError {
    /// The module's codes: static members of `ErrorCode<Domain>`.
    public typealias Code = ErrorCode<Domain>
    /// What went wrong, as the module's callers tell failures apart.
    public let code: Code
    /// Why, in words: never a secret, a passcode or key material.
    public let message: String
    /// The failure underneath, when there was one (a `SecretServiceError`, a file error, another
    /// module's error).
    public let underlying: (any Error & Sendable)?

    /// An error of `code`, with what happened in words and the failure underneath, if any.
    public init(_ code: Code, _ message: String = "", underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }
}
