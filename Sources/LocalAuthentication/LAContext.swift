import Foundation
import Sealing
import Platform

/// Mirrors `LAPolicy`, Apple's raw values.
public enum LAPolicy: Int, Sendable {
    /// Biometry alone. Unavailable on Linux: `biometryNotAvailable`.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// Biometry, a companion watch or the device passcode. No system dialog on Linux:
    /// `notInteractive` (an app asks for the passcode and calls `setDevicePasscode(_:)`).
    case deviceOwnerAuthentication = 2
    /// A paired Apple Watch alone. Unavailable on Linux: `biometryNotAvailable`.
    case deviceOwnerAuthenticationWithWatch = 3
    /// Biometry or a paired Apple Watch. Unavailable on Linux: `biometryNotAvailable`.
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
}

/// Mirrors `LACredentialType`.
public enum LACredentialType: Int, Sendable {
    /// A password the app supplies, for items with the `applicationPassword` access constraint.
    case applicationPassword = 0
}

/// Mirrors `LABiometryType`: a Linux machine has no biometric hardware Keepsake uses.
public enum LABiometryType: Int, Sendable {
    /// No biometry: what `biometryType` always answers on Linux.
    case none = 0
    /// Touch ID (fingerprint). Never answered on Linux.
    case touchID = 1
    /// Face ID. Never answered on Linux.
    case faceID = 2
    /// Optic ID (iris). Never answered on Linux.
    case opticID = 4
}

/// Mirrors `LAError`, Apple's codes (`LAErrorDomain`), in the shape every Keepsake error has
/// (`KeepsakeError`: a code, a message, what failed underneath; compares by code).
public struct LAError: KeepsakeError {
    /// Apple's `LAError.Code` values (`LAErrorDomain`). Keepsake's `LAContext` fails with
    /// `biometryNotAvailable` and `notInteractive` only; the others are here so that Apple code
    /// naming them builds.
    public enum Code: Int, Sendable, CustomStringConvertible {
        /// The user did not give valid credentials.
        case authenticationFailed = -1
        /// The user canceled the authentication dialog.
        case userCancel = -2
        /// The user chose the fallback button (entering a password) in the dialog.
        case userFallback = -3
        /// The system canceled authentication (another app came to the foreground).
        case systemCancel = -4
        /// No passcode is set on the device.
        case passcodeNotSet = -5
        /// Biometry is not available on the device: every biometric or watch policy on Linux.
        case biometryNotAvailable = -6
        /// The user has no biometric identity enrolled.
        case biometryNotEnrolled = -7
        /// Biometry is locked after too many failed attempts.
        case biometryLockout = -8
        /// The app canceled authentication (`invalidate()`).
        case appCancel = -9
        /// The context was invalidated before use.
        case invalidContext = -10
        /// The authentication dialog would have to be shown and cannot be:
        /// `deviceOwnerAuthentication` on Linux, which has no system dialog.
        case notInteractive = -1004

        /// Apple's name and number: `notInteractive (-1004)`.
        public var description: String {
            let name =
                switch self {
                case .authenticationFailed: "authenticationFailed"
                case .userCancel: "userCancel"
                case .userFallback: "userFallback"
                case .systemCancel: "systemCancel"
                case .passcodeNotSet: "passcodeNotSet"
                case .biometryNotAvailable: "biometryNotAvailable"
                case .biometryNotEnrolled: "biometryNotEnrolled"
                case .biometryLockout: "biometryLockout"
                case .appCancel: "appCancel"
                case .invalidContext: "invalidContext"
                case .notInteractive: "notInteractive"
                }
            return "\(name) (\(rawValue))"
        }
    }
    /// `LAErrorDomain`: the domain of the `NSError`s `canEvaluatePolicy(_:error:)` fills in.
    public static let errorDomain = "com.apple.LocalAuthentication"

    /// Which failure, with Apple's number.
    public let code: Code
    /// Why, in words (`no biometric hardware`); never a secret.
    public let message: String
    /// The failure underneath: none (`LAContext` decides its answers itself).
    public var underlying: (any Error & Sendable)? { nil }
    /// An error of `code`, with what happened in words.
    public init(_ code: Code, _ message: String = "") {
        self.code = code
        self.message = message
    }
    /// `LAError <code>: <message>`.
    public var description: String { "LAError \(code.rawValue): \(message)" }

    /// `LAError.authenticationFailed`, as Apple code writes it.
    public static let authenticationFailed = Code.authenticationFailed
    /// `LAError.userCancel`, as Apple code writes it.
    public static let userCancel = Code.userCancel
    /// `LAError.passcodeNotSet`, as Apple code writes it.
    public static let passcodeNotSet = Code.passcodeNotSet
    /// `LAError.biometryNotAvailable`, as Apple code writes it.
    public static let biometryNotAvailable = Code.biometryNotAvailable
    /// `LAError.notInteractive`, as Apple code writes it.
    public static let notInteractive = Code.notInteractive
}

/// Mirrors `LAContext` as far as it means something on Linux: there is no biometric hardware and
/// no system authentication dialog, so biometric policies are unavailable (as on a Mac without
/// Touch ID) and evaluating `deviceOwnerAuthentication` fails `notInteractive` — an app asks for
/// the passcode itself and hands it to the context with `setDevicePasscode(_:)` (Keepsake's
/// addition, standing in for the system dialog); the keychain proves it at each use of an item
/// that needs it (`kSecUseAuthenticationContext`), counted by the lock screen's guess limit.
/// `setCredential(_:type:)` keeps an application password for the context's lifetime. Both are
/// copied into owned memory, wiped when replaced, invalidated or freed.
///
/// Not thread-safe on its own, like Apple's (one context per authentication); `@unchecked
/// Sendable` so it can be captured by the reply closures Apple's API uses, its state behind a lock.
public final class LAContext: @unchecked Sendable {
    private let lock = NSLock()
    private var credential: SecureBytes?
    private var passcode: SecureBytes?

    /// Apple: the reason shown in the authentication dialog. Kept and unused: there is no dialog.
    public var localizedReason: String = ""
    /// Apple: the title of the dialog's fallback button. Kept and unused: there is no dialog.
    public var localizedFallbackTitle: String?
    /// Apple: the title of the dialog's cancel button. Kept and unused: there is no dialog.
    public var localizedCancelTitle: String?
    /// Apple: when true, nothing may ask the user. Kept and unused: nothing here ever asks, so
    /// evaluation answers the same either way.
    public var interactionNotAllowed = false
    /// Apple: how long a device unlock counts as a biometric match. Kept and unused: no biometry.
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval = 0
    /// The device's biometry: always `none` (Keepsake uses no biometric hardware).
    public var biometryType: LABiometryType { .none }

    /// A context holding no credential.
    public init() {}

    /// Mirrors `canEvaluatePolicy(_:error:)`: biometric policies answer
    /// `biometryNotAvailable`; `deviceOwnerAuthentication` answers `notInteractive` (no system
    /// dialog on Linux).
    public func canEvaluatePolicy(_ policy: LAPolicy, error: UnsafeMutablePointer<NSError?>?)
        -> Bool
    {
        let failure = Self.failure(for: policy)
        error?.pointee = failure.map {
            NSError(
                domain: LAError.errorDomain, code: $0.code.rawValue,
                userInfo: [NSLocalizedDescriptionKey: $0.message])
        }
        return failure == nil
    }

    /// Mirrors `evaluatePolicy(_:localizedReason:reply:)`: replies on another queue, as Apple's.
    public func evaluatePolicy(
        _ policy: LAPolicy, localizedReason: String,
        reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        let failure = Self.failure(for: policy)
        DispatchQueue.global().async { reply(failure == nil, failure) }
    }

    /// Mirrors the async `evaluatePolicy(_:localizedReason:)`.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        if let failure = Self.failure(for: policy) { throw failure }
        return true
    }

    /// Mirrors `setCredential(_:type:)`: the application password for items protected with
    /// `.applicationPassword`. nil clears it.
    @discardableResult
    public func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        let owned = credential.map { SecureBytes(copying: $0) }
        lock.withLock { self.credential = owned }
        return true
    }

    /// Mirrors `isCredentialSet(_:)`.
    public func isCredentialSet(_ type: LACredentialType) -> Bool {
        lock.withLock { credential != nil }
    }

    /// Keepsake's stand-in for the system passcode dialog: the device passcode (UTF-8) that
    /// uses of `.devicePasscode` / `.userPresence` items with this context present. nil clears it.
    public func setDevicePasscode(_ passcode: SecureBytes?) {
        lock.withLock { self.passcode = passcode }
    }

    /// `setDevicePasscode` from a string.
    public func setDevicePasscode(_ passcode: String) {
        setDevicePasscode(SecureBytes(copying: Array(passcode.utf8)))
    }

    /// Mirrors `invalidate()`: forgets the credentials.
    public func invalidate() {
        lock.withLock {
            credential = nil
            passcode = nil
        }
    }

    /// What the last proof of this context's passcode reported (an item read with it, counted
    /// as an unlock): "N wrong passcodes since your last unlock, …" — tell the owner. nil when
    /// it reported none.
    public var wrongPasscodesNotice: String? { lock.withLock { notice } }
    private var notice: String?

    /// The keychain notes what a proof of the passcode reported.
    package func noteWrongPasscodes(_ notice: String?) { lock.withLock { self.notice = notice } }

    /// What the keychain reads from a context.
    package var applicationPassword: SecureBytes? { lock.withLock { credential } }
    package var devicePasscode: SecureBytes? { lock.withLock { passcode } }

    private static func failure(for policy: LAPolicy) -> LAError? {
        switch policy {
        case .deviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthenticationWithWatch,
            .deviceOwnerAuthenticationWithBiometricsOrWatch:
            LAError(.biometryNotAvailable, "no biometric hardware")
        case .deviceOwnerAuthentication:
            LAError(.notInteractive, "no system authentication dialog on Linux")
        }
    }
}

/// Equal only to itself, as an `NSObject` is by default (Apple's `LAContext` is one), and so
/// Hashable: Apple code keeps a context in a `[String: AnyHashable]` query (Valet does).
extension LAContext: Hashable {
    /// Identity: a context equals only itself.
    public static func == (a: LAContext, b: LAContext) -> Bool { a === b }
    /// Hashes the context's identity, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
