import Foundation
import Sealing

/// The kinds of lock screen. pin, pattern and password are knowledge factors: they make the device
/// end-to-end-encryption capable and protect the class keys.
public enum LockScreenKind: String, Sendable, Hashable, CaseIterable, Codable {
    case none, swipe, pin, pattern, password

    public var hasKnowledgeFactor: Bool {
        switch self {
        case .none, .swipe: false
        case .pin, .pattern, .password: true
        }
    }

    /// Checks a passcode's shape for this kind and returns its canonical form.
    ///
    /// pin: at least 4 digits. pattern: at least 4 distinct cells of the 3×3 grid, written 1–9
    /// joined by `-`. password: at least 4 characters. none/swipe take no passcode.
    public func validate(_ passcode: String) throws(DeviceError) -> String {
        switch self {
        case .none, .swipe:
            throw DeviceError(.invalidPasscode, "a \(rawValue) lock screen takes no passcode")
        case .pin:
            guard passcode.count >= 4, passcode.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw DeviceError(.invalidPasscode, "a pin is at least 4 digits")
            }
            return passcode
        case .pattern:
            let cells = passcode.split(separator: "-", omittingEmptySubsequences: false)
            let numbers = cells.compactMap { Int($0) }
            guard numbers.count == cells.count, numbers.count >= 4,
                numbers.allSatisfy({ (1...9).contains($0) }), Set(numbers).count == numbers.count
            else {
                throw DeviceError(
                    .invalidPasscode, "a pattern is at least 4 distinct cells 1–9 joined by '-'")
            }
            return numbers.map(String.init).joined(separator: "-")
        case .password:
            guard passcode.count >= 4 else {
                throw DeviceError(.invalidPasscode, "a password is at least 4 characters")
            }
            return passcode
        }
    }
}

/// The device's lock state: `beforeFirstUnlock` after boot, then `unlocked` ⇄ `locked`.
public enum LockState: String, Sendable, Hashable, Codable {
    case beforeFirstUnlock, unlocked, locked
}

/// Apple's data-protection classes, as the Device knows them: one key each.
public enum ProtectionClass: String, Sendable, Hashable, CaseIterable, Codable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case whenPasscodeSetThisDeviceOnly = "akpu"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"

    /// Keys dropped at lock.
    public var isDroppedAtLock: Bool {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: true
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: false
        }
    }

    /// Exists only while a knowledge factor is set.
    public var requiresPasscode: Bool { self == .whenPasscodeSetThisDeviceOnly }
}

/// How wrong passcodes are slowed down: after n consecutive failures the next attempt waits
/// `base × 2^(n−1)`, capped at `maximum`. Held in the Secret Service, so it survives processes and
/// restarts.
package struct RetryPolicy: Sendable, Hashable {
    package var base: Duration
    package var maximum: Duration
    /// Longest wait an attempt sits through before answering errSecAuthFailed at once.
    package var longestWait: Duration

    package init(
        base: Duration = .seconds(1), maximum: Duration = .seconds(3600),
        longestWait: Duration = .seconds(10)
    ) {
        self.base = base
        self.maximum = maximum
        self.longestWait = longestWait
    }

    package func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let factor = 1 << min(failures - 1, 30)
        return min(base * factor, maximum)
    }
}

/// How expensive a device makes passcode guessing: the Argon2id cost for a newly set passcode and
/// the wrong-passcode delays. `real` is what every shipped device uses; the cheaper tunings the
/// tests need are built by the test support target through this `package` type.
package struct DeviceTuning: Sendable, Hashable {
    package var passcodeCost: Argon2Cost
    package var retryPolicy: RetryPolicy

    package init(passcodeCost: Argon2Cost, retryPolicy: RetryPolicy) {
        self.passcodeCost = passcodeCost
        self.retryPolicy = retryPolicy
    }

    package static let real = DeviceTuning(passcodeCost: .moderate, retryPolicy: RetryPolicy())
}
