import Device

extension Accessibility {
    /// The class key that seals an item of this class (the deprecated `Always` classes are
    /// sealed as their `AfterFirstUnlock` counterparts).
    public var protectionClass: ProtectionClass {
        switch self {
        case .always: .afterFirstUnlock
        case .alwaysThisDeviceOnly: .afterFirstUnlockThisDeviceOnly
        default: ProtectionClass(rawValue: rawValue)!
        }
    }
}
