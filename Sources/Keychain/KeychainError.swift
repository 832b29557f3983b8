import Foundation
import Sealing
import Platform

/// The one error type of the Keychain: an Apple status (``KeychainStatus``, exactly as Apple
/// numbers it) with what happened underneath. Compares by status.
///
/// Like every Keepsake error it has a `code`, a `message` and an `underlying` error; `status` is
/// Apple's word for its code.
public struct KeychainError: KeepsakeError {
    /// Apple's status for what went wrong.
    public let code: KeychainStatus
    /// What went wrong, in words; never a secret.
    public let message: String
    /// The failure underneath, when there was one (a `SecretServiceError`, a `DeviceError`).
    public let underlying: (any Error & Sendable)?

    /// An error with Apple's status `code`, what happened in words, and the failure underneath.
    public init(
        _ code: KeychainStatus, _ message: String = "", underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// The `OSStatus`, Apple's name for the code.
    public var status: KeychainStatus { code }

    /// `errSecItemNotFound (-25300)`, as the command line prints it.
    public var statusName: String { code.description }

    /// `errSecItemNotFound (-25300): <message>`, or the status alone when there is no message.
    public var description: String {
        message.isEmpty ? statusName : "\(statusName): \(message)"
    }
}
