import Foundation
import Sealing
import Platform

/// The one error type of the SecretService module.
///
/// Compares by `code`; the GError domain, code and message (and the D-Bus error name when the
/// daemon sent one) are kept for diagnosis. None of them ever contains a secret: libsecret and the
/// daemons put object paths and reasons in their messages, not values.
public struct SecretServiceError: KeepsakeError {
    /// What every store says when the Secret Service's collection is locked, and what to do.
    package static let lockedCollection =
        "the Secret Service collection is locked: unlock it in its provider (log in to gnome-keyring, open the KeePassXC database or the KWallet wallet) and try again"

    /// The module's codes: static members of this `ErrorCode` (`noBus`, `locked`, `timedOut`, …).
    public typealias Code = ErrorCode<SecretServiceError>

    /// What went wrong, as callers tell failures apart.
    public let code: Code
    /// GError domain (e.g. `g-io-error-quark`), or empty for errors raised in Swift.
    public let domain: String
    /// GError code within `domain`.
    public let errorCode: Int32
    /// The D-Bus error name when the peer sent one (`org.freedesktop.Secret.Error.IsLocked`, …).
    public let dbusName: String?
    /// Human-readable detail from GLib, libsecret or the daemon.
    public let message: String

    /// An error of `code`, with GLib's or the daemon's detail when there is one.
    public init(
        _ code: Code, message: String, domain: String = "", errorCode: Int32 = 0,
        dbusName: String? = nil
    ) {
        self.code = code
        self.message = message
        self.domain = domain
        self.errorCode = errorCode
        self.dbusName = dbusName
    }

    /// Always nil: the failure underneath is GLib's or the daemon's, told in `domain`,
    /// `errorCode` and `dbusName`.
    public var underlying: (any Error & Sendable)? { nil }

    /// `Secret Service: <code>: <message>`, and the D-Bus error name in brackets when there is
    /// one.
    public var description: String {
        var text = "Secret Service: \(code): \(message)"
        if let dbusName { text += " [\(dbusName)]" }
        return text
    }

    /// Whether the provider as a whole failed (it did not answer within the bound, went away, or
    /// there is no bus), rather than one call on one of its objects: the codes a connection's
    /// bound yields.
    package var isProviderDown: Bool { [.timedOut, .serviceUnavailable, .noBus].contains(code) }
}

extension ErrorCode<SecretServiceError> {
    /// No D-Bus session bus could be reached (no address, nothing listening).
    public static var noBus: Self { Self("no D-Bus session bus") }
    /// The bus is there but nothing owns `org.freedesktop.secrets`, or it went away.
    public static var serviceUnavailable: Self { Self("no Secret Service on the bus") }
    /// The collection or item is locked.
    public static var locked: Self { Self("collection locked") }
    /// The call did not complete within its bound (a frozen or overloaded daemon).
    public static var timedOut: Self { Self("timed out") }
    /// The daemon asked for a user prompt, which a headless session cannot show.
    public static var promptRequired: Self { Self("a prompt would be needed") }
    /// The item or collection path does not (or no longer) exist.
    public static var noSuchObject: Self { Self("no such object") }
    /// The caller passed something the Secret Service cannot carry (e.g. NUL in a string).
    public static var invalidArgument: Self { Self("invalid argument") }
    /// Anything else; `message` says what.
    public static var failed: Self { Self("failed") }
}
