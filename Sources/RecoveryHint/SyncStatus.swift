import BlockStore
import CloudAccount
import Device
import Foundation
import KeyValueStore
import Keychain
import Preferences

/// Where an app's data stands between this device and the cloud account, store by store
/// (`keepsake status`): Keychain sync, Block Store, the key-value store, Auto Backup and the
/// recovery hint — what is here, what the cloud holds as the account's manifest vouches for it,
/// the last sync, what is pending and, when nothing goes up, why. The cloud is read once, without
/// changing anything on either side.
public struct SyncStatus: Sendable {
    /// The cloud account: signed in, end-to-end encryption, joined, and why nothing goes up when
    /// nothing does.
    public var account: CloudAccountStatus
    /// Synchronizable Keychain items (every app's on this device).
    public var keychainSync: StoreStatus
    /// Block Store entries (every app's on this device).
    public var blockStore: StoreStatus
    /// This app's key-value store.
    public var keyValueStore: StoreStatus
    /// This app's Auto Backup, under the recovery hint's backup rules.
    public var autoBackup: StoreStatus
    /// The recovery hint of `profile`: `local` counts the profile's stores holding it; `cloud`
    /// is 1 when its cloud-backed store's copy (Block Store for linux and android, the key-value
    /// store for apple) is in the cloud account, 0 when it is not.
    public var hint: StoreStatus

    /// Reads every store's status for `app` on `account`'s device.
    public static func read(app: App, account: CloudAccount, profile: HintProfile = .linux)
        -> SyncStatus
    {
        let device = account.device
        let listing = account.cloudListing()
        let blockStore = BlockStoreSync(account: account)
        let keyValueStore = UbiquitousKeyValueStore(app: app, account: account)
        let preferences = try? PreferencesHintStore(app: app, account: account)
        let empty = StoreStatus(
            local: 0, cloud: nil, pending: nil, lastSync: nil,
            notSyncing: listing.status.notSyncing)
        let keyValue = keyValueStore.status(listing)
        let blockStoreStatus = blockStore.status(listing)
        // The hint's cloud copy: its Block Store entry, or (apple) the app's key-value copy once
        // the hint's key went up with it.
        let hintInCloud =
            profile == .apple
            ? keyValue.cloud.map {
                $0 == 1 && !keyValueStore.pendingKeys.contains(KeyValueHintStore.key) ? 1 : 0
            }
            : blockStore.hasCloudCopy(appID: app.id, key: BlockStoreHintStore.key, listing)
        return SyncStatus(
            account: listing.status, keychainSync: KeychainSync(account: account).status(listing),
            blockStore: blockStoreStatus, keyValueStore: keyValue,
            autoBackup: preferences.map { $0.backup.status(listing) } ?? empty,
            hint: hintStatus(
                profile, app: app, device: device, keyValueStore: keyValueStore,
                preferences: preferences, inCloud: hintInCloud,
                lastSync: profile == .apple ? keyValue.lastSync : blockStoreStatus.lastSync,
                notSyncing: listing.status.notSyncing))
    }

    private static func hintStatus(
        _ profile: HintProfile, app: App, device: Device,
        keyValueStore: UbiquitousKeyValueStore, preferences: PreferencesHintStore?, inCloud: Int?,
        lastSync: Date?, notSyncing: String?
    ) -> StoreStatus {
        // Each store read as it is, without a restore or a synchronize: a status changes nothing.
        let keychain = Keychain(app: app, device: device)
        let blockStore = BlockStoreHintStore(client: BlockStoreClient(app: app, device: device))
        let held: [Bool]
        switch profile {
        case .linux:
            held = [
                (try? KeychainHintStore(keychain: keychain).read()) != nil,
                (try? blockStore.read()) != nil,
            ]
        case .apple:
            held = [
                keyValueStore.string(forKey: KeyValueHintStore.key) != nil,
                (try? KeychainHintStore(keychain: keychain, synchronizable: true).read()) != nil,
            ]
        case .android:
            let prefs = preferences.flatMap {
                try? SharedPreferences(app: $0.app, name: PreferencesHintStore.file)
            }
            held = [
                (try? blockStore.read()) != nil,
                prefs?.string(forKey: PreferencesHintStore.key) != nil,
            ]
        }
        let local = held.filter { $0 }.count
        let pending = inCloud.map { local > 0 && $0 == 0 && notSyncing == nil ? 1 : 0 }
        return StoreStatus(
            local: local, cloud: inCloud, pending: pending, lastSync: lastSync,
            notSyncing: notSyncing)
    }
}
