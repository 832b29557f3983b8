import Foundation

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
