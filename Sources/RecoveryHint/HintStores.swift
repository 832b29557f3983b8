import BlockStore
import CloudAccount
import Device
import Foundation
import KeyValueStore
import Keychain
import Preferences

/// One place the hint is kept. Each platform store is wrapped by one of these; the service writes
/// two and reads either.
public protocol HintStore: Sendable {
    /// Short name used in reports and logs (`keychain`, `blockstore`, …).
    var name: String { get }
    /// The stored hint, or nil when there is none.
    func read() throws -> RecoveryHint?
    /// Stores `hint` in place of what was there.
    func write(_ hint: RecoveryHint) throws
    /// Removes the hint; no hint is not an error.
    func clear() throws
}

extension RecoveryHint {
    /// What the hint is named under in every store: the Keychain item's service, the Block Store
    /// key and the key-value store's key.
    package static let storageName = "com.keepsake.recovery-hint"
}

/// The hint as a generic-password Keychain item (`com.keepsake.recovery-hint` / `hint`),
/// accessible after first unlock — readable at launch after a reboot once the user has unlocked.
public struct KeychainHintStore: HintStore {
    /// The item's service: `com.keepsake.recovery-hint`.
    public static let service = RecoveryHint.storageName
    /// The item's account: `hint`.
    public static let account = "hint"
    /// The app's Keychain.
    public let keychain: Keychain
    /// Whether the item syncs with the cloud account (the apple profile's fallback does).
    public let synchronizable: Bool
    /// `keychain`, or `keychain (synchronizable)`.
    public var name: String { synchronizable ? "keychain (synchronizable)" : "keychain" }

    /// The hint in `keychain`, as a synchronizable item or not.
    public init(keychain: Keychain, synchronizable: Bool = false) {
        self.keychain = keychain
        self.synchronizable = synchronizable
    }

    private var query: GenericPasswordQuery {
        GenericPasswordQuery(
            service: Self.service, account: Self.account,
            synchronizable: synchronizable ? .yes : .no)
    }

    /// The item's hint, or nil when there is no item.
    public func read() throws -> RecoveryHint? {
        try keychain.dataIfPresent(matching: query).map { data throws in
            try RecoveryHint.decode(json: data)
        }
    }

    /// Adds the item, or replaces its data when it exists.
    public func write(_ hint: RecoveryHint) throws {
        do {
            try keychain.add(
                GenericPasswordAttributes(
                    service: Self.service, account: Self.account, synchronizable: synchronizable,
                    accessible: .afterFirstUnlock, label: "Recovery hint"),
                data: hint.json())
        } catch  where error.status == KeychainStatus.duplicateItem {
            try keychain.update(matching: query, with: GenericPasswordChanges(data: hint.json()))
        }
    }

    /// Deletes the item; no item is not an error.
    public func clear() throws {
        do { try keychain.delete(matching: query) } catch
            where error.status == KeychainStatus.itemNotFound
        {}
    }
}

/// The hint as a Block Store entry (`com.keepsake.recovery-hint`), backed up to the cloud exactly
/// when end-to-end encryption is available (Google's recommendation for the recovery hint).
public struct BlockStoreHintStore: HintStore {
    /// The entry's key: `com.keepsake.recovery-hint`.
    public static let key = RecoveryHint.storageName
    /// The app's Block Store.
    public let client: BlockStoreClient
    /// `blockstore`.
    public var name: String { "blockstore" }

    /// The hint in `client`'s Block Store.
    public init(client: BlockStoreClient) { self.client = client }

    /// The entry's hint, or nil when there is no entry.
    public func read() throws -> RecoveryHint? {
        try client.retrieveBytes(RetrieveBytesRequest(keys: [Self.key]))[Self.key].map {
            data throws in
            try RecoveryHint.decode(json: data)
        }
    }

    /// Stores the entry, backed up to the cloud exactly when end-to-end encryption is available.
    public func write(_ hint: RecoveryHint) throws {
        let backup = try client.isEndToEndEncryptionAvailable()
        try client.storeBytes(
            StoreBytesData(bytes: hint.json(), key: Self.key, shouldBackupToCloud: backup))
    }

    /// Deletes the entry; no entry is not an error.
    public func clear() throws {
        _ = try client.deleteBytes(DeleteBytesRequest(keys: [Self.key]))
    }
}

/// The hint as a key-value store value (`com.keepsake.recovery-hint`, a JSON string), synchronized
/// after each write when the cloud account allows.
public struct KeyValueHintStore: HintStore {
    /// The value's key: `com.keepsake.recovery-hint`.
    public static let key = RecoveryHint.storageName
    /// The app's key-value store.
    public let store: UbiquitousKeyValueStore
    /// `kvstore`.
    public var name: String { "kvstore" }

    /// The hint in `store`.
    public init(store: UbiquitousKeyValueStore) { self.store = store }

    /// Synchronizes first, as an app does at launch, then reads the value's hint; nil when there is
    /// none.
    public func read() throws -> RecoveryHint? {
        store.synchronize()  // as an app does at launch; false (signed out, no E2EE) is fine
        return try store.string(forKey: Self.key).map { string throws in
            try RecoveryHint.decode(json: Data(string.utf8))
        }
    }

    /// Writes the value (over quota or not persisted: throws), then synchronizes.
    public func write(_ hint: RecoveryHint) throws {
        try store.write(.string(String(decoding: hint.json(), as: UTF8.self)), forKey: Self.key)
        store.synchronize()
    }

    /// Removes the value, then synchronizes.
    public func clear() throws {
        try store.write(nil, forKey: Self.key)
        store.synchronize()
    }
}

/// The hint in SharedPreferences (`shared_prefs/recovery_hint.xml`, key `hint`) with Auto Backup:
/// the file is gone at uninstall, and its backup is restored at reinstall before the first read.
public struct PreferencesHintStore: HintStore {
    /// The preferences' name: the file `shared_prefs/recovery_hint.xml`.
    public static let file = "recovery_hint"
    /// The preference's key: `hint`.
    public static let key = "hint"
    /// The backup rules the original Android app ships: only the hint's prefs file, to the cloud
    /// only with client-side encryption, and in device-to-device transfers
    /// (`Fixtures/backup-rules/data_extraction_rules.xml`).
    public static let rules = """
        <?xml version="1.0" encoding="utf-8"?>
        <data-extraction-rules>
            <cloud-backup disableIfNoEncryptionCapabilities="true">
                <include domain="sharedpref" path="recovery_hint.xml" />
            </cloud-backup>
            <device-transfer>
                <include domain="sharedpref" path="recovery_hint.xml" />
            </device-transfer>
        </data-extraction-rules>
        """

    /// The app whose container holds the preferences.
    public let app: App
    /// The app's Auto Backup, under `rules`.
    public let backup: AutoBackup
    /// `preferences`.
    public var name: String { "preferences" }

    /// The hint in `app`'s preferences, backed up to `account`; throws only if `rules` does not
    /// parse.
    public init(app: App, account: CloudAccount) throws {
        self.app = app
        backup = AutoBackup(
            app: app, account: account,
            configuration: try BackupConfiguration.parse(Data(Self.rules.utf8)))
    }

    /// The hint in `app`'s preferences on `device`, signed out (backed up on the device only).
    public init(app: App, device: Device) throws {
        try self.init(app: app, account: CloudAccount(device, cloud: nil))
    }

    /// Restores the backup when the container is empty (a reinstall), then reads the preference's
    /// hint; nil when there is none.
    public func read() throws -> RecoveryHint? {
        try backup.restoreIfNeeded()
        return try SharedPreferences(app: app, name: Self.file).string(forKey: Self.key).map {
            json throws in
            try RecoveryHint.decode(json: Data(json.utf8))
        }
    }

    /// Restores the backup when needed, writes the preference, then backs the app up.
    public func write(_ hint: RecoveryHint) throws {
        try backup.restoreIfNeeded()
        var prefs = try SharedPreferences(app: app, name: Self.file)
        prefs.putString(String(decoding: hint.json(), as: UTF8.self), forKey: Self.key)
        try prefs.commit()
        try backup.backup()
    }

    /// Removes the preference, then backs the app up.
    public func clear() throws {
        var prefs = try SharedPreferences(app: app, name: Self.file)
        prefs.remove(Self.key)
        try prefs.commit()
        try backup.backup()
    }
}
