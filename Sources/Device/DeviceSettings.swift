import Foundation

/// Device settings a user toggles in the system's settings app. Not secret; kept in the device
/// directory.
public struct DeviceSettings: Codable, Sendable, Hashable {
    /// Block Store exists on this device (a phone without Play services has none).
    public var blockStoreAvailable = true
    /// The device's backup setting: app data outside the container survives uninstall only while
    /// it is on.
    public var backupEnabled = true

    /// Settings with the given values; both default to on, as a device starts.
    public init(blockStoreAvailable: Bool = true, backupEnabled: Bool = true) {
        self.blockStoreAvailable = blockStoreAvailable
        self.backupEnabled = backupEnabled
    }
}
