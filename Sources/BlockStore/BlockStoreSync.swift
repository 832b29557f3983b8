import CloudAccount
import Device
import Foundation
import Sealing
import Platform

/// The device side of Block Store's cloud and device-to-device paths, for every app on the device.
///
/// Cloud objects are named `bs-<keyed hash of app id and key>` and sealed under the account's
/// cloud key: the cloud operator learns neither app ids nor keys nor bytes. A cloud copy exists only
/// for entries stored with `shouldBackupToCloud` while end-to-end encryption is available; storing a
/// key with `shouldBackupToCloud` false, or deleting it, removes its cloud copy at the next sync.
public struct BlockStoreSync: Sendable {
    /// The cloud account the entries are synced with and restored from.
    public let account: CloudAccount
    /// The account's device, whose apps' entries are synced, restored or transferred.
    public var device: Device { account.device }

    /// Block Store's cloud and transfer paths for every app on `account`'s device.
    public init(account: CloudAccount) { self.account = account }

    /// What one sync did.
    public struct Report: Sendable, Equatable {
        /// Entries written to the cloud.
        public var uploaded = 0
        /// Cloud copies removed (entries deleted, or no longer backed up).
        public var removed = 0
        /// Why nothing was exchanged, when nothing could be.
        public var skipped: String?
    }

    /// Exchanges with the cloud account now: uploads backed-up entries and deletion markers,
    /// each only where it is later than the cloud's copy by the one conflict rule
    /// (`SyncVersion`). Without E2EE (or signed out, or not joined) nothing is written.
    public func sync() throws(BlockStoreError) -> Report {
        guard account.cloud != nil else { return Report(skipped: "signed out") }
        guard let session = try network({ try account.cloudSession() }) else {
            return Report(
                skipped: try network { try account.keys.whyNoCloudSession() })
        }
        let keys = CloudEntries(session.key)
        var report = Report()
        let listed = Set(session.list())
        let plans = try plans(keys: keys, listed: listed)
        // What the cloud holds for every name about to be written: a write goes up only if it is
        // later than the copy there, whichever device's and whenever that copy arrived.
        let contested = plans.flatMap { $0.uploads.map(\.name) }.filter(listed.contains)
        let held = try network { try session.read(contested) }
        for index in plans.indices {
            var uploads: [(name: String, data: Data)] = []
            for upload in plans[index].uploads {
                if let bytes = held[upload.name] {
                    let (there, _) = try keys.open(bytes, name: upload.name)
                    if there.version >= upload.entry.version { continue }
                }
                uploads.append(
                    (
                        upload.name,
                        keys.seal(upload.entry, appID: plans[index].appID, name: upload.name)
                    ))
                if upload.entry.deleted { report.removed += 1 } else { report.uploaded += 1 }
            }
            try network { try session.write(uploads) }
        }
        try network { try session.commit() }
        // What was synced is recorded only once the account's manifest holds it: a commit that
        // failed leaves the record as it was, so the next sync makes the same comparisons again
        // (a deletion is never forgotten while the cloud may still hold an older copy).
        for plan in plans {
            do { try plan.manifest.write(plan.current, digests: plan.digests) } catch {
                throw BlockStoreError(
                    .internalError,
                    "synced, but this device's record of it could not be written: the next sync makes the same changes again"
                )
            }
        }
        account.syncTimes.note(Self.storeName)
        return report
    }

    /// The store's name in a status and in the device's sync times.
    package static let storeName = "blockstore"

    /// Where Block Store stands (every app's entries on this device; `keepsake status`): local
    /// entries, the cloud's entries as `listing` vouches for them, and what the next sync would
    /// upload or remove.
    public func status() -> StoreStatus { status(account.cloudListing()) }

    package func status(_ listing: CloudListing) -> StoreStatus {
        var local = 0
        for appID in device.appsWithData() {
            guard let app = try? App(id: appID, container: device.directory),
                let layout = try? LocalLayout(device: device, app: app)
            else { continue }
            local += layout.names().count
        }
        var pending: Int?
        if let key = listing.key, let names = listing.names,
            let plans = try? plans(keys: CloudEntries(key), listed: names)
        {
            pending = plans.reduce(0) { $0 + $1.uploads.count }
        }
        let keys = listing.key.map(CloudEntries.init)
        return StoreStatus(
            local: local, cloud: keys.flatMap { keys in listing.count(keys.objects.owns) },
            pending: pending, lastSync: account.syncTimes.last(of: Self.storeName),
            notSyncing: listing.status.notSyncing)
    }

    /// Whether the cloud holds `appID`'s entry `key` (1) or not (0), as `listing` vouches for it;
    /// nil when the cloud was not read.
    package func hasCloudCopy(appID: String, key: String, _ listing: CloudListing) -> Int? {
        guard let accountKey = listing.key, let names = listing.names else { return nil }
        return names.contains(CloudEntries(accountKey).name(appID: appID, key: key)) ? 1 : 0
    }

    /// What one app's sync does: the writes to make (entries and deletion markers changed since
    /// this device's last sync, or not in the cloud) and the record of what was synced to keep
    /// afterwards.
    struct Plan {
        var appID: String
        var manifest: SyncManifest
        var uploads: [(name: String, entry: BlockStoreEntry)] = []
        var current = Set<String>()
        var digests: [String: String] = [:]
    }

    private func plans(keys: CloudEntries, listed: Set<String>) throws(BlockStoreError) -> [Plan] {
        var plans: [Plan] = []
        for appID in device.appsWithData() {
            guard let app = try? App(id: appID, container: device.directory) else { continue }
            let layout = try LocalLayout(device: device, app: app)
            var plan = Plan(
                appID: appID,
                manifest: SyncManifest(layout.directory.appendingPathComponent("cloud-manifest")))
            let syncedBefore = plan.manifest.readDigests()
            for write in try Self.writes(layout, keys: keys, appID: appID, listed: listed) {
                // Only what changed since this device's last sync is compared again (the account
                // manifest still listing it, and it vouches for the bytes).
                let digest = keys.digest(write.entry, appID: appID, name: write.name)
                if syncedBefore[write.name] != digest || !listed.contains(write.name) {
                    plan.uploads.append(write)
                }
                plan.current.insert(write.name)
                plan.digests[write.name] = digest
            }
            plans.append(plan)
        }
        return plans
    }

    /// What this device holds for the cloud, per cloud name: a backed-up entry as it is; a
    /// deleted key as its deletion marker; an entry no longer backed up as a marker dated at
    /// its store, where the cloud has a copy to supersede.
    private static func writes(
        _ layout: LocalLayout, keys: CloudEntries, appID: String, listed: Set<String>
    ) throws(BlockStoreError) -> [(name: String, entry: BlockStoreEntry)] {
        var newest: [String: BlockStoreEntry] = [:]
        for name in layout.names() + layout.tombstoneNames() {
            // An entry and its marker side by side (a process stopped between the two files):
            // the later of the two is what this device holds.
            let candidates = [try layout.read(name), try layout.readTombstone(name)].compactMap {
                $0
            }
            guard let entry = candidates.max(by: { $0.version < $1.version }) else { continue }
            newest[name] = entry
        }
        var writes: [(name: String, entry: BlockStoreEntry)] = []
        for entry in newest.values {
            let cloudName = keys.name(appID: appID, key: entry.key)
            if entry.deleted || entry.shouldBackupToCloud {
                writes.append((cloudName, entry))
            } else if listed.contains(cloudName) {
                writes.append(
                    (cloudName, entry.tombstone(modified: entry.modified, writer: entry.writer)))
            }
        }
        return writes.sorted { $0.name < $1.name }
    }

    /// A new device: proves the passcode of a device of the account (`Device.join`), then restores
    /// every backed-up entry into the local copy. A wrong passcode restores nothing.
    @discardableResult
    public func join(passcode: SecureBytes) throws(BlockStoreError) -> Int {
        do { try account.join(passcode: passcode) } catch {
            // A wrong passcode, and an account refused (rolled back, planted), are no network
            // trouble: trying again does not help.
            let code: BlockStoreError.Code =
                [.authFailed, .invalidPasscode, .corrupt].contains(error.code)
                ? .internalError : .networkError
            throw BlockStoreError(code, error.message, underlying: error)
        }
        return try restore()
    }

    /// Restores the cloud's backed-up entries into the local copy (existing local entries win, and
    /// so does a deletion here later than the cloud's copy).
    public func restore() throws(BlockStoreError) -> Int {
        guard let cloud = try network({ try account.cloudSession(forUpload: false) })
        else {
            return 0
        }
        let keys = CloudEntries(cloud.key)
        var restored = 0
        let owned = cloud.list().filter { keys.objects.owns($0) }
        let fetched = try network { try cloud.read(owned) }
        for name in owned {
            guard let bytes = fetched[name] else { continue }
            let (entry, appID) = try keys.open(bytes, name: name)
            if entry.deleted { continue }  // a deletion marker: nothing to restore
            guard let app = try? App(id: appID, container: device.directory) else {
                throw BlockStoreError(.internalError, "a cloud entry names an invalid app")
            }
            if try BlockStoreClient(app: app, device: device).restore(entry) { restored += 1 }
        }
        return restored
    }

    // MARK: - Device-to-device transfer

    /// A transfer bundle of every app's local entries, sealed under a one-time key that is
    /// returned (hex) to be given to the receiving device out of band. No cloud involved.
    public func transferOut() throws(BlockStoreError) -> (bundle: Data, key: String) {
        let key = SecureBytes(randomCount: Envelope.keyLength)
        return (try transferOut(key: key), hex(key.unsafeData()))
    }

    /// The same bundle, sealed under a key the caller chose (to seal other stores' parts of one
    /// device-to-device transfer under the same one-time key).
    package func transferOut(key: SecureBytes) throws(BlockStoreError) -> Data {
        var out = TLV(magic: Data("KTB1".utf8))
        var all: [(BlockStoreEntry, String)] = []
        for appID in device.appsWithData() {
            guard let app = try? App(id: appID, container: device.directory) else { continue }
            for entry in try BlockStoreClient(app: app, device: device).entries() {
                all.append((entry, appID))
            }
        }
        let payload = BlockStoreEntry.encodeTransfer(all)
        out.append(
            1, Envelope.seal(payload, key: key, associatedData: Data("keepsake.transfer.v1".utf8)))
        return out.bytes
    }

    /// Imports a transfer bundle with its one-time key: each entry lands in its app's local copy.
    @discardableResult
    public func transferIn(_ bundle: Data, key hexKey: String) throws(BlockStoreError) -> Int {
        guard let keyBytes = Data(hexString: hexKey), keyBytes.count == Envelope.keyLength else {
            throw BlockStoreError(.invalidArgument, "the transfer key is 64 hex digits")
        }
        return try transferIn(bundle, key: SecureBytes(copying: keyBytes))
    }

    /// Imports a bundle sealed under `key`.
    @discardableResult
    package func transferIn(_ bundle: Data, key: SecureBytes) throws(BlockStoreError) -> Int {
        let entries: [(BlockStoreEntry, String)]
        do {
            let fields = try TLV.fields(bundle, magic: Data("KTB1".utf8), known: 1...1)
            entries = try Envelope.open(
                try fields.required(1), key: key, associatedData: Data("keepsake.transfer.v1".utf8)
            ) { plaintext in
                try BlockStoreEntry.decodeTransfer(Data(plaintext))
            }
        } catch {
            throw BlockStoreError(
                .internalError, "the transfer bundle does not open (wrong key, tampered or corrupt)"
            )
        }
        for (entry, appID) in entries {
            guard let app = try? App(id: appID, container: device.directory) else {
                throw BlockStoreError(.internalError, "the transfer bundle names an invalid app")
            }
            try BlockStoreClient(app: app, device: device).storeBytes(
                StoreBytesData(
                    bytes: entry.bytes, key: entry.key,
                    shouldBackupToCloud: entry.shouldBackupToCloud))
        }
        return entries.count
    }

    private func network<R>(_ body: () throws -> R) throws(BlockStoreError) -> R {
        do { return try body() } catch let error as DeviceError where error.code == .corrupt {
            // The account's manifest refused what the cloud holds (rolled back, dropped, planted).
            throw BlockStoreError(.internalError, "cloud account: \(error)", underlying: error)
        } catch {
            throw BlockStoreError(.networkError, "cloud account: \(error)", underlying: error)
        }
    }

}

/// The Block Store's cloud objects: one per app and key (`CloudObjects`' rule, with the labels the
/// fixtures pin).
struct CloudEntries {
    static let kind = CloudObjects.blockStore
    let objects: CloudObjects

    let key: SecureBytes

    init(_ cloudKey: SecureBytes) {
        objects = CloudObjects(cloudKey: cloudKey, kind: Self.kind)
        key = cloudKey
    }

    func name(appID: String, key: String) -> String { objects.name(appID, key) }

    func seal(_ entry: BlockStoreEntry, appID: String, name: String) -> Data {
        objects.seal(entry.encoded(appID: appID), name: name)
    }

    /// What an entry's upload is remembered by on this device: a keyed hash (under the account
    /// key) of its name and encoding, so the file says nothing about the entry.
    func digest(_ entry: BlockStoreEntry, appID: String, name: String) -> String {
        KeyDerivation.keyedHash(
            key: key, context: "keepsake.blockstore.uploaded.v1",
            Data(name.utf8) + entry.encoded(appID: appID)
        ).unsafeData().hexString
    }

    func open(_ bytes: Data, name: String) throws(BlockStoreError) -> (BlockStoreEntry, String) {
        let opened: (BlockStoreEntry, String?)
        do { opened = try objects.open(bytes, name: name) { try BlockStoreEntry.decode($0) } } catch
        {
            throw BlockStoreError(
                .internalError, "a cloud entry does not open (tampered or corrupt)")
        }
        guard let appID = opened.1, self.name(appID: appID, key: opened.0.key) == name else {
            throw BlockStoreError(.internalError, "a cloud entry is stored under another name")
        }
        return (opened.0, appID)
    }
}
