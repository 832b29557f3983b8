import Foundation
import Sealing

/// Mirrors `LAPolicy`, Apple's raw values.
public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithWatch = 3
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
}

/// Mirrors `LACredentialType`.
public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
}

/// Mirrors `LABiometryType`: a Linux machine has no biometric hardware Keepsake uses.
public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// Mirrors `LAError`, Apple's codes (`LAErrorDomain`).
public struct LAError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case notInteractive = -1004
    }
    public static let errorDomain = "com.apple.LocalAuthentication"

    public let code: Code
    public let message: String
    public init(_ code: Code, _ message: String = "") {
        self.code = code
        self.message = message
    }
    public var description: String { "LAError \(code.rawValue): \(message)" }

    public static let authenticationFailed = Code.authenticationFailed
    public static let userCancel = Code.userCancel
    public static let passcodeNotSet = Code.passcodeNotSet
    public static let biometryNotAvailable = Code.biometryNotAvailable
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

    public var localizedReason: String = ""
    public var localizedFallbackTitle: String?
    public var localizedCancelTitle: String?
    /// When true, nothing may ask the user: evaluation fails `notInteractive` at once.
    public var interactionNotAllowed = false
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval = 0
    public var biometryType: LABiometryType { .none }

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
    public static func == (a: LAContext, b: LAContext) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// `error.localizedDescription` is the same sentence `description` and the command line give
/// (never a secret), not Foundation's "The operation could not be completed".
extension LAError: LocalizedError {
    public var errorDescription: String? { description }
}
