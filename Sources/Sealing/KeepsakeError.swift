import Foundation

/// The shape every Keepsake error shares: a code of its module's own (Apple's `OSStatus`,
/// Google's status codes, Keepsake's), a message that never holds a secret, and the failure
/// underneath when there was one. Errors compare and hash by code; `localizedDescription` is the
/// sentence `description` and the command line give, not Foundation's "The operation could not be
/// completed". Each module's error type declares its codes and fields; the rest is here, once.
public protocol KeepsakeError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    associatedtype Code: Hashable, Sendable, CustomStringConvertible
    /// What went wrong, as its module's callers tell failures apart.
    var code: Code { get }
    /// Why, in words: never a secret, a passcode or key material.
    var message: String { get }
    /// The failure underneath, when there was one.
    var underlying: (any Error & Sendable)? { get }
}

extension KeepsakeError {
    public static func == (l: Self, r: Self) -> Bool { l.code == r.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    /// `code: message` (the code alone when there is no message).
    public var description: String { message.isEmpty ? "\(code)" : "\(code): \(message)" }
    public var errorDescription: String? { description }
}
