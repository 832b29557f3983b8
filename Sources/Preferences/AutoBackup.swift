import CloudAccount
import Device
import Foundation
import Platform
import Sealing

/// Android's Auto Backup for one app: the files its rules take from its container, kept where an
/// uninstall does not reach, and restored at reinstall before first launch.
///
/// Where the backup goes: a device-local copy in the device directory (sealed under the device's
/// `autobackup` key) — the "backup transport" a reinstall on this device restores from — and, at
/// sync, a cloud copy (sealed under the account's cloud key, named by a keyed hash of the app id)
/// only while end-to-end encryption is available: Keepsake puts nothing in the cloud in clear.
/// A backup over 25 MB is refused whole. Device-to-device transfer uses the `device-transfer`
/// rules and works with cloud backup off.
public struct AutoBackup: Sendable {
    /// The largest backup, 25 MB (Android's Auto Backup quota): a backup over it is refused whole.
    public static let quota = 25 * 1024 * 1024

    /// The app whose container is backed up and restored.
    public let app: App
    /// The cloud account that holds the cloud copy.
    public let account: CloudAccount
    /// The account's device: its directory holds the local backup.
    public var device: Device { account.device }
    /// The app's backup rules: which files a backup or a transfer takes.
    public let configuration: BackupConfiguration

    /// Auto Backup for `app` on `account`'s device, backed up to `account`, taking the files
    /// `configuration` selects.
    public init(app: App, account: CloudAccount, configuration: BackupConfiguration) {
        self.app = app
        self.account = account
        self.configuration = configuration
    }

    /// Auto Backup for `app` on `device`, signed out (the local backup only).
    public init(app: App, device: Device, configuration: BackupConfiguration) {
        self.init(
            app: app, account: CloudAccount(device, cloud: nil), configuration: configuration)
    }

    private var localBackup: URL {
        device.appDataDirectory(app, store: "autobackup").appendingPathComponent("backup")
    }

    /// Every regular file of the container, container-relative.
    func containerFiles() -> [String] {
        let root = app.container.standardizedFileURL.path
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        return walker.compactMap { $0 as? String }.filter { relative in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(
                atPath: root + "/" + relative, isDirectory: &isDirectory)
                && !isDirectory.boolValue
                && !relative.split(separator: "/").contains(where: { $0.hasPrefix(".") })
        }.sorted()
    }

    /// The files a backup (or a transfer) takes, with their bytes.
    public func snapshot(forTransfer: Bool) throws(PreferencesError) -> [String: Data] {
        let e2ee = (try? device.isEndToEndEncryptionAvailable()) ?? false
        var files: [String: Data] = [:]
        var total = 0
        for path in configuration.select(
            containerFiles(), forTransfer: forTransfer, endToEndEncryption: e2ee)
        {
            guard let bytes = try? Data(contentsOf: app.container.appendingPathComponent(path))
            else { continue }
            total += bytes.count
            if total > Self.quota {
                throw PreferencesError(
                    .overQuota, "the backup is over the 25 MB quota; nothing was backed up")
            }
            files[path] = bytes
        }
        return files
    }

    /// What one backup did.
    public struct Report: Sendable, Equatable {
        /// The container-relative paths backed up, sorted.
        public var files: [String]
        /// Whether a cloud copy was written: false without a cloud session (signed out, no
        /// end-to-end encryption) or when the rules took nothing.
        public var cloud: Bool
    }

    /// Backs the app up now: the local copy always (when the rules take anything), the cloud copy
    /// only with E2EE and the account key.
    @discardableResult
    public func backup() throws(PreferencesError) -> Report {
        let files = try snapshot(forTransfer: false)
        let bundle = BackupBundle.encode(files)
        let key = try call { try device.dataKey("autobackup") }
        do {
            if files.isEmpty {
                try Files.remove(localBackup)
            } else {
                try Files.writeAtomically(
                    Envelope.seal(bundle, key: key, associatedData: associatedData), to: localBackup
                )
            }
        } catch {
            throw PreferencesError(
                .notAvailable, "the backup could not be written: \(error)", underlying: error)
        }
        var cloudWritten = false
        if let cloud = try? account.cloudSession() {
            let objects = CloudObjects(cloudKey: cloud.key, kind: Self.cloudKind)
            let name = objects.name(app.id)
            do {
                if files.isEmpty {
                    cloud.delete(name)
                } else {
                    try cloud.write(name, objects.seal(bundle, name: name))
                    cloudWritten = true
                }
                try cloud.commit()
            } catch {
                throw PreferencesError(
                    .notAvailable, "the cloud account could not be reached: \(error)",
                    underlying: error)
            }
            account.syncTimes.note(storeName)
        }
        return Report(files: files.keys.sorted(), cloud: cloudWritten)
    }

    /// The store's name in a status and in the device's sync times: one per app.
    private var storeName: String { "autobackup \(app.id)" }

    /// Where this app's backup stands (`keepsake status`): how many files the local backup
    /// holds, whether the cloud holds the app's backup (1) or not (0) as the account's manifest
    /// vouches for it, and how many files changed in the container since the last backup (all of
    /// them when the cloud, read, lacks a backup the device has).
    public func status() -> StoreStatus { status(account.cloudListing()) }

    package func status(_ listing: CloudListing) -> StoreStatus {
        let backedUp = try? localBackupFiles()
        let local = backedUp?.count ?? 0
        let cloud = listing.key.flatMap { key in
            listing.count { $0 == CloudObjects(cloudKey: key, kind: Self.cloudKind).name(app.id) }
        }
        var pending: Int?
        if let current = try? snapshot(forTransfer: false) {
            let before = backedUp ?? [:]
            pending =
                Set(current.keys).union(before.keys).filter { current[$0] != before[$0] }
                .count
            if cloud == 0 && local > 0 { pending = max(pending!, local) }
        }
        return StoreStatus(
            local: local, cloud: cloud, pending: pending,
            lastSync: account.syncTimes.last(of: storeName),
            notSyncing: listing.status.notSyncing)
    }

    /// The files this device's local backup holds; nil when it has none.
    ///
    /// - Throws: `.corrupt` for a backup that does not open (tampered or corrupt).
    private func localBackupFiles() throws(PreferencesError) -> [String: Data]? {
        guard let sealed = try? Files.read(localBackup) else { return nil }
        let key = try call { try device.dataKey("autobackup") }
        return try open {
            try Envelope.open(sealed, key: key, associatedData: associatedData) {
                try BackupBundle.decode(Data($0))
            }
        }
    }

    /// The cloud account to restore from: nil when it cannot be reached or this device is not
    /// in it (nothing to restore then); an account whose manifest refuses it is an error.
    private func cloudSessionForRestore() throws(PreferencesError) -> CloudSession? {
        do { return try account.cloudSession(forUpload: false) } catch {
            if error.code == .corrupt {
                throw PreferencesError(.corrupt, error.message, underlying: error)
            }
            return nil
        }
    }

    /// At (re)install, before first launch: when the container is missing or empty, puts the
    /// backed-up files back — from this device's local backup, else from the cloud account.
    /// Returns the restored paths.
    @discardableResult
    public func restoreIfNeeded() throws(PreferencesError) -> [String] {
        guard containerFiles().isEmpty else { return [] }
        var files = try localBackupFiles()
        if files == nil, let cloud = try cloudSessionForRestore() {
            let objects = CloudObjects(cloudKey: cloud.key, kind: Self.cloudKind)
            let name = objects.name(app.id)
            if let sealed = try call({ try cloud.read(name) }) {
                files = try open {
                    try objects.open(sealed, name: name) { try BackupBundle.decode($0) }
                }
            }
        }
        try write(files ?? [:])
        return (files ?? [:]).keys.sorted()
    }

    // MARK: - Device-to-device transfer

    /// The app's `device-transfer` files, for a transfer bundle.
    public func transferOut() throws(PreferencesError) -> Data {
        BackupBundle.encode(try snapshot(forTransfer: true))
    }

    /// Puts a transfer payload's files into the container.
    public func transferIn(_ payload: Data) throws(PreferencesError) {
        try write(try BackupBundle.decode(payload))
    }

    // MARK: - Encoding

    private var associatedData: Data { Data("keepsake.autobackup.local.v1\0\(app.id)".utf8) }

    private func write(_ files: [String: Data]) throws(PreferencesError) {
        for (path, bytes) in files {
            guard !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
                throw PreferencesError(.corrupt, "a backed-up path leaves the container")
            }
            do {
                try Files.writeAtomically(bytes, to: app.container.appendingPathComponent(path))
            } catch {
                throw PreferencesError(
                    .notAvailable, "a restored file could not be written: \(error)",
                    underlying: error)
            }
        }
    }

    private func open(_ body: () throws -> [String: Data]) throws(PreferencesError) -> [String:
        Data]
    {
        do { return try body() } catch {
            throw PreferencesError(.corrupt, "the backup does not open (tampered or corrupt)")
        }
    }

    /// The app's backup in the cloud account (`CloudObjects`' rule): one object per app.
    static let cloudKind = CloudObjects.kind("ab-")

    private func call<R>(_ body: () throws -> R) throws(PreferencesError) -> R {
        do { return try body() } catch {
            throw PreferencesError(.notAvailable, "device: \(error)", underlying: error)
        }
    }
}
