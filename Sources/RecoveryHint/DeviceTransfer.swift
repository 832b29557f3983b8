import BlockStore
import CloudAccount
import Device
import Foundation
import Preferences
import Sealing

/// Device-to-device transfer without the cloud: one bundle sealed under a one-time key carries
/// the device's Block Store entries and the app's device-transfer preferences (its Auto Backup
/// rules decide which; cloud backup need not be on). The key is shown on the old device and typed
/// on the new one; the bundle alone opens nothing.
///
/// Bundle format: TLV `KDT1` with field 1 = the Block Store part (`BlockStoreSync.transferOut`),
/// field 2 = the preferences payload sealed under the same key, bound to the app id.
public struct DeviceTransfer: Sendable {
    /// The app whose device-transfer preferences travel in the bundle.
    public let app: App
    /// The device whose Block Store entries travel in the bundle, and that imports one.
    public let device: Device

    /// A transfer of `app`'s preferences and `device`'s Block Store entries.
    public init(app: App, device: Device) {
        self.app = app
        self.device = device
    }

    private static let magic = Data("KDT1".utf8)
    private var preferencesAssociatedData: Data {
        Data("keepsake.transfer.preferences.v1\0\(app.id)".utf8)
    }

    /// Seals a new bundle and returns it with its one-time key (64 hex digits).
    public func transferOut() throws -> (bundle: Data, key: String) {
        let key = SecureBytes(randomCount: Envelope.keyLength)
        let preferences = try PreferencesHintStore(app: app, device: device).backup
        var bundle = TLV(magic: Self.magic)
        bundle.append(
            1, try BlockStoreSync(account: CloudAccount(device, cloud: nil)).transferOut(key: key))
        bundle.append(
            2,
            Envelope.seal(
                try preferences.transferOut(), key: key,
                associatedData: preferencesAssociatedData))
        return (bundle.bytes, key.unsafeData().hexString)
    }

    /// Imports a bundle with its one-time key: both parts must open before anything is written.
    /// Returns the number of Block Store entries imported (0 on a device without Block Store,
    /// which takes the preferences alone).
    ///
    /// - Throws: `BlockStoreError` `.invalidArgument` for a malformed key, `.internalError` for a
    ///   bundle that is not one or does not open (wrong key, tampered, corrupt).
    @discardableResult
    public func transferIn(_ bundle: Data, key hexKey: String) throws -> Int {
        guard let keyBytes = Data(hexString: hexKey), keyBytes.count == Envelope.keyLength else {
            throw BlockStoreError(.invalidArgument, "the transfer key is 64 hex digits")
        }
        let key = SecureBytes(copying: keyBytes)
        let fields: TLV.Fields
        do {
            fields = try TLV.fields(bundle, magic: Self.magic, known: 1...2)
        } catch {
            throw BlockStoreError(.internalError, "not a transfer file")
        }
        let payload: Data
        do {
            payload = try Envelope.open(
                try fields.required(2), key: key, associatedData: preferencesAssociatedData
            ) { Data($0) }
        } catch {
            throw BlockStoreError(
                .internalError, "the transfer file does not open (wrong key, tampered or corrupt)")
        }
        let preferences = try PreferencesHintStore(app: app, device: device).backup
        let count =
            try device.settings().blockStoreAvailable
            ? try BlockStoreSync(account: CloudAccount(device, cloud: nil)).transferIn(
                try fields.required(1), key: key) : 0
        try preferences.transferIn(payload)
        return count
    }
}
