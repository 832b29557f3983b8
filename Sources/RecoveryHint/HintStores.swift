import BlockStore
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
    public static let service = RecoveryHint.storageName
    public static let account = "hint"
    public let keychain: Keychain
    public let synchronizable: Bool
    public var name: String { synchronizable ? "keychain (synchronizable)" : "keychain" }

    public init(keychain: Keychain, synchronizable: Bool = false) {
        self.keychain = keychain
        self.synchronizable = synchronizable
    }

    private var query: GenericPasswordQuery {
        GenericPasswordQuery(
            service: Self.service, account: Self.account,
            synchronizable: synchronizable ? .yes : .no)
    }

    public func read() throws -> RecoveryHint? {
        try keychain.dataIfPresent(matching: query).map { data throws in
            try RecoveryHint.decode(json: data)
        }
    }

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

    public func clear() throws {
        do { try keychain.delete(matching: query) } catch
            where error.status == KeychainStatus.itemNotFound
        {}
    }
}

/// The hint as a Block Store entry (`com.keepsake.recovery-hint`), backed up to the cloud exactly
/// when end-to-end encryption is available (Google's recommendation for the recovery hint).
public struct BlockStoreHintStore: HintStore {
    public static let key = RecoveryHint.storageName
    public let client: BlockStoreClient
    public var name: String { "blockstore" }

    public init(client: BlockStoreClient) { self.client = client }

    public func read() throws -> RecoveryHint? {
        try client.retrieveBytes(RetrieveBytesRequest(keys: [Self.key]))[Self.key].map {
            data throws in
            try RecoveryHint.decode(json: data)
        }
    }

    public func write(_ hint: RecoveryHint) throws {
        let backup = try client.isEndToEndEncryptionAvailable()
        try client.storeBytes(
            StoreBytesData(bytes: hint.json(), key: Self.key, shouldBackupToCloud: backup))
    }

    public func clear() throws {
        _ = try client.deleteBytes(DeleteBytesRequest(keys: [Self.key]))
    }
}

/// The hint as a key-value store value (`com.keepsake.recovery-hint`, a JSON string), synchronized
/// after each write when the cloud account allows.
public struct KeyValueHintStore: HintStore {
    public static let key = RecoveryHint.storageName
    public let store: UbiquitousKeyValueStore
    public var name: String { "kvstore" }

    public init(store: UbiquitousKeyValueStore) { self.store = store }

    public func read() throws -> RecoveryHint? {
        store.synchronize()  // as an app does at launch; false (signed out, no E2EE) is fine
        return try store.string(forKey: Self.key).map { string throws in
            try RecoveryHint.decode(json: Data(string.utf8))
        }
    }

    public func write(_ hint: RecoveryHint) throws {
        try store.write(.string(String(decoding: hint.json(), as: UTF8.self)), forKey: Self.key)
        store.synchronize()
    }

    public func clear() throws {
        try store.write(nil, forKey: Self.key)
        store.synchronize()
    }
}

/// The hint in SharedPreferences (`shared_prefs/recovery_hint.xml`, key `hint`) with Auto Backup:
/// the file is gone at uninstall, and its backup is restored at reinstall before the first read.
public struct PreferencesHintStore: HintStore {
    public static let file = "recovery_hint"
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

    public let app: App
    public let backup: AutoBackup
    public var name: String { "preferences" }

    public init(app: App, device: Device) throws {
        self.app = app
        backup = AutoBackup(
            app: app, device: device,
            configuration: try BackupConfiguration.parse(Data(Self.rules.utf8)))
    }

    public func read() throws -> RecoveryHint? {
        try backup.restoreIfNeeded()
        return try SharedPreferences(app: app, name: Self.file).string(forKey: Self.key).map {
            json throws in
            try RecoveryHint.decode(json: Data(json.utf8))
        }
    }

    public func write(_ hint: RecoveryHint) throws {
        try backup.restoreIfNeeded()
        var prefs = try SharedPreferences(app: app, name: Self.file)
        prefs.putString(String(decoding: hint.json(), as: UTF8.self), forKey: Self.key)
        try prefs.commit()
        try backup.backup()
    }

    public func clear() throws {
        var prefs = try SharedPreferences(app: app, name: Self.file)
        prefs.remove(Self.key)
        try prefs.commit()
        try backup.backup()
    }
}
