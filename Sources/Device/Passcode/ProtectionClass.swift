import Foundation

/// Apple's data-protection classes, as the Device knows them: one key each.
public enum ProtectionClass: String, Sendable, Hashable, CaseIterable, Codable {
    /// `kSecAttrAccessibleWhenUnlocked`: its key is held only while the device is unlocked.
    case whenUnlocked = "ak"
    /// `kSecAttrAccessibleAfterFirstUnlock`: its key is held from the first unlock until reboot.
    case afterFirstUnlock = "ck"
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: held only while unlocked; the key exists
    /// only while a knowledge factor is set and is destroyed when it is removed.
    case whenPasscodeSetThisDeviceOnly = "akpu"
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`: its key is held only while unlocked.
    case whenUnlockedThisDeviceOnly = "aku"
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: its key is held from the first unlock
    /// until reboot.
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
