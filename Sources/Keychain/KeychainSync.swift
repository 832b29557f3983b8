import CloudAccount
import Device
import Foundation
import Sealing
import SecretService

/// Synchronizable Keychain items, mirrored to the cloud account.
///
/// Each synchronizable item is one cloud object `kc-<keyed hash of its primary key>`, sealed under
/// a key derived from the account's cloud key (the account sync key: it exists only while an
/// E2EE-capable lock screen is configured; another device gets it by proving an existing device's
/// passcode — `Device.join`). Conflicts: one rule, `SyncVersion` — the later write wins, the
/// writer's device ID breaking a tie at the same millisecond; a deletion is a write (a tombstone
/// dated when it was made, here by path or by primary key). `…ThisDeviceOnly` items are never
/// synchronizable, so never leave the device.
/// Without E2EE nothing is exchanged and items stay local.
public struct KeychainSync: Sendable {
    /// The cloud account the synchronizable items are exchanged with.
    public let account: CloudAccount
    /// The account's device, whose synchronizable items are exchanged.
    public var device: Device { account.device }

    /// Keychain sync for every app's synchronizable items on `account`'s device.
    public init(account: CloudAccount) { self.account = account }

    /// What one sync did.
    public struct Report: Sendable, Equatable {
        /// Items written to the cloud (new or changed here since the last sync).
        public var uploaded = 0
        /// Items taken from the cloud (new or changed on another device).
        public var downloaded = 0
        /// Deletions exchanged: tombstones written for items deleted here, and items deleted here
        /// for tombstones from the cloud.
        public var deleted = 0
        /// Why nothing was exchanged (signed out, no end-to-end encryption, …); nil when it was.
        public var skipped: String?
    }

    fileprivate struct Local {
        var path: ItemPath
        var record: StoredRecord
    }

    /// Exchanges now; false-y report (`skipped`) when it cannot.
    public func sync() throws(KeychainError) -> Report {
        guard account.cloud != nil else { return Report(skipped: "signed out") }
        let cloud: CloudSession
        do {
            guard let session = try account.cloudSession() else {
                return Report(skipped: try account.keys.whyNoCloudSession())
            }
            cloud = session
        } catch {
            throw KeychainError(error)
        }
        let names = Names(cloud.key)
        var report = Report()

        let local = try localItems(names)
        let secretService = device.secretService
        let me: String
        do { me = try device.deviceID() } catch { throw KeychainError(error) }

        // What this device synced last time, to tell deletions from items never seen.
        let manifestFile = SyncManifest(
            device.directory.appendingPathComponent("keychain-sync/manifest"))
        let lastSynced = manifestFile.readDigests()
        let deletionTimes = DeletionTimes(device: device)
        let deletions = deletionTimes.read()
        let manifest = Set(lastSynced.keys)

        let remoteNames = Set(cloud.list().filter(names.objects.owns))
        let now = SyncClock.now()
        // Each name's item as this sync leaves it here (nil: none), for the record that lets the
        // next sync skip what neither side changed.
        var kept: [String: (modified: Int64, path: ItemPath)?] = [:]
        // Which copy of each name the manifest listed when this sync compared it: a copy another
        // writer's manifest brings in at the commit (merged) was never compared, and is not
        // recorded as synced.
        var compared: [String: String] = [:]
        for name in remoteNames.union(local.keys).union(manifest) {
            let mine = local[name]
            let mineModified = mine.map { Self.milliseconds($0.record.attributes.modificationDate) }
            // Neither side changed since the last sync: nothing to read or write.
            let mineKept = mine.map { (modified: mineModified!, path: $0.path) }
            compared[name] = cloud.digest(of: name)
            let last = lastSynced[name].flatMap(SyncedState.init)
            if let copy = cloud.digest(of: name), last == SyncedState(copy: copy, kept: mineKept) {
                kept[name] = .some(mineKept)
                continue
            }
            let remote: SyncedItem? =
                try remoteNames.contains(name)
                ? names.open(try cloudRead(cloud, name), name: name) : nil
            kept[name] = .some(mineKept)
            /// This device's item goes up as the copy of `name`, dated `modified`, written here.
            func upload(_ item: StoredRecord, modified: Int64) throws(KeychainError) {
                try cloudWrite(
                    cloud, name,
                    names.seal(SyncedItem(item: item, modified: modified, writer: me), name: name))
                report.uploaded += 1
            }
            switch (mine, remote) {
            case (let mine?, nil):
                try upload(mine.record, modified: mineModified!)
            case (nil, let remote?) where remote.deleted:
                continue
            case (nil, let remote?):
                // Deleted here: dated when it was (by the item's path when this device held it at
                // its last sync, else now; by its primary key even when it never synced it), and
                // a tombstone only when that deletion is the later write (`SyncVersion`): an
                // update another device made after it wins. A name this device saw only as a
                // tombstone, written again elsewhere since, is downloaded.
                let heldAtLastSync = last.map { $0.modified != nil } ?? manifest.contains(name)
                let byPath = heldAtLastSync ? (last?.path.flatMap { deletions[$0] } ?? now) : nil
                let byKey = DeletionTimes.deletedByKey(deletions, remote.key)
                if let deleted = [byPath, byKey].compactMap({ $0 }).max(),
                    SyncVersion(modified: deleted, writer: me) > remote.version
                {
                    try cloudWrite(
                        cloud, name,
                        names.seal(
                            SyncedItem(tombstoneFor: remote, modified: deleted, writer: me),
                            name: name))
                    report.deleted += 1
                } else {
                    let path = try store(remote)
                    kept[name] = .some(path.map { (Self.milliseconds(remote.modified), $0) })
                    report.downloaded += 1
                }
            case (let mine?, let remote?):
                // A local copy changed here since the last sync is this device's write; one
                // unchanged is an earlier write the cloud has moved past (a device uploads only
                // over an older version), whose writer this device does not keep: "", below any.
                let changedHere = last?.modified != mineModified
                let mineVersion = SyncVersion(
                    modified: mineModified!, writer: changedHere ? me : "")
                if remote.modified == mineModified!, try remote.holds(mine.record) {
                    // The same write on both sides (downloaded here by a sync whose record of it
                    // was lost): nothing to exchange, whichever writer it names.
                    continue
                }
                if remote.version > mineVersion {
                    if remote.deleted {
                        // Dated at the remote deletion, before the item goes: a sync that dies
                        // after this, its record of it unwritten, finds the item gone at its
                        // next run and must not take that for a deletion made then (a tombstone
                        // dated now would beat every write made since, elsewhere).
                        deletionTimes.note([mine.path], at: remote.modified)
                        do { try secretService.deleteItem(at: mine.path) } catch {
                            throw KeychainError(error)
                        }
                        kept[name] = .some(nil)
                        report.deleted += 1
                    } else {
                        let path = try store(remote, replacing: mine)
                        kept[name] = .some(path.map { (Self.milliseconds(remote.modified), $0) })
                        report.downloaded += 1
                    }
                } else if remote.version < mineVersion {
                    try upload(mine.record, modified: mineModified!)
                }
            case (nil, nil):
                continue
            }
        }
        do { try cloud.commit() } catch { throw KeychainError(error) }
        // What was synced is recorded only once the account's manifest holds it: a record
        // written before a commit that never came would read an upload that never happened as
        // an item on both sides, and tombstone another device's item of that name.
        var present = Set(local.keys)
        present.formUnion(remoteNames)
        var states: [String: String] = [:]
        for name in present {
            guard let copy = cloud.digest(of: name), let item = kept[name],
                copy == compared[name] || cloud.wrote(name)
            else { continue }
            states[name] = SyncedState(copy: copy, kept: item).text
        }
        // Deletion times a later sync may still need: those of items the record names.
        deletionTimes.keep(only: Set(states.values.compactMap { SyncedState($0)?.path }))
        do { try manifestFile.write(present, digests: states) } catch {
            throw KeychainError(
                KeychainStatus.notAvailable,
                "synced, but this device's record of it could not be written: the next sync compares again"
            )
        }
        account.syncTimes.note(Self.storeName)
        return report
    }

    /// The store's name in a status and in the device's sync times.
    static let storeName = "keychain"

    /// A local item's modification time as the sync compares it (ms since 1970).
    private static func milliseconds(_ date: Date?) -> Int64 {
        Int64((date?.timeIntervalSince1970 ?? 0) * 1000)
    }

    /// A synced item's modification time as it reads back once stored here.
    private static func milliseconds(_ modified: Int64) -> Int64 {
        milliseconds(Date(timeIntervalSince1970: Double(modified) / 1000))
    }

    /// How a name stood when it was last synced, as the sync manifest keeps it: which copy the
    /// account's manifest listed and the local item's modification time ("-": none here).
    private struct SyncedState: Equatable {
        var copy: String
        var modified: Int64?
        /// The local item's Secret Service path: what its deletion time is noted under.
        var path: String?
        var text: String {
            "\(copy) \(modified.map(String.init) ?? "-") \(path ?? "-")"
        }

        init(copy: String, kept: (modified: Int64, path: ItemPath)?) {
            self.copy = copy
            modified = kept?.modified
            path = kept?.path.rawValue
        }

        init?(_ text: String) {
            let parts = text.split(separator: " ").map(String.init)
            guard parts.count == 3 else { return nil }
            copy = parts[0]
            modified = parts[1] == "-" ? nil : Int64(parts[1])
            path = parts[2] == "-" ? nil : parts[2]
        }
    }

    /// Where synchronizable items stand (`keepsake status`): how many this device holds, how
    /// many the cloud holds as the account's manifest vouches for them, and how many were added
    /// or changed here since they last went up (told only while the device is unlocked).
    public func status() -> StoreStatus { status(account.cloudListing()) }

    package func status(_ listing: CloudListing) -> StoreStatus {
        var local = 0
        for itemClass in ItemClass.allCases {
            local +=
                (try? device.secretService.search([
                    SecretServiceSchema.schema: SecretServiceSchema.schemaName(itemClass),
                    SecretServiceSchema.synchronizable: "true",
                ]))?.unlocked.count ?? 0
        }
        let lastSync = account.syncTimes.last(of: Self.storeName)
        var pending: Int?
        var cloud: Int?
        if let key = listing.key, let remote = listing.names {
            let names = Names(key)
            cloud = remote.filter(names.objects.owns).count
            if let items = try? localItems(names) {
                pending =
                    items.filter { name, item in
                        !remote.contains(name)
                            || (item.record.attributes.modificationDate ?? .distantFuture)
                                > (lastSync ?? .distantPast)
                    }.count
            }
        }
        return StoreStatus(
            local: local, cloud: cloud, pending: pending, lastSync: lastSync,
            notSyncing: listing.status.notSyncing)
    }

    /// The synchronizable items on this device, by cloud name (duplicates: the first created).
    private func localItems(_ names: Names) throws(KeychainError) -> [String: Local] {
        let secretService = device.secretService
        var unlocked: [ItemPath] = []
        for itemClass in ItemClass.allCases {
            let found: SearchResult
            do {
                found = try secretService.search([
                    SecretServiceSchema.schema: SecretServiceSchema.schemaName(itemClass),
                    SecretServiceSchema.synchronizable: "true",
                ])
            } catch {
                throw KeychainError(error)
            }
            if found.collectionLocked { throw Keychain.locked }
            unlocked += found.unlocked
        }
        var read: Device.KeyedRead
        do { read = try device.read(unlocked) } catch { throw KeychainError(error) }
        var local: [String: Local] = [:]
        for path in unlocked {
            guard let bytes = read.secrets[path] else { continue }
            let sealed = try SealedItem.parse(bytes)
            let protection = sealed.protectionClass
            if read.classKeys[protection] == nil {
                do { read.classKeys[protection] = try device.classKey(protection) } catch {
                    throw KeychainError(error)
                }
            }
            let record = try sealed.open(key: read.classKeys[protection]!)
            let name = names.name(record.key)
            // Duplicates: the Keychain's own rule (the first created wins).
            if let existing = local[name], !Keychain.createdBefore(record, existing.record) {
                continue
            }
            local[name] = Local(path: path, record: record)
        }

        return local
    }

    /// Writes a remote item locally (over `replacing` when given), sealed under this device's key
    /// for its class, keeping its creation and modification dates; returns where (nil: a remote
    /// item that holds nothing to store).
    private func store(_ remote: SyncedItem, replacing old: Local? = nil) throws(KeychainError)
        -> ItemPath?
    {
        guard var record = try remote.storedRecord() else { return nil }
        record.id = old?.record.id ?? UUID().uuidString
        let classKey: SecureBytes
        do {
            classKey = try device.classKey(record.attributes.accessible.protectionClass)
        } catch {
            throw KeychainError(error)
        }
        do {
            let secret = SealedItem.seal(record, key: classKey)
            if let old, old.record.secretServiceAttributes == record.secretServiceAttributes {
                try device.secretService.rewrite(
                    at: old.path, from: old.record, to: record, secret: secret)
                return old.path
            }
            if let old {
                // Noted just before the remote write, before the old copy goes: a sync killed
                // between the two never takes the gap for a deletion made at its next run (one
                // dated then would beat the very write being downloaded).
                DeletionTimes(device: device).note([old.path], at: remote.modified - 1)
                try device.secretService.deleteItem(at: old.path)
            }
            return try device.secretService.createItem(
                label: record.secretServiceLabel, attributes: record.secretServiceAttributes,
                secret: secret)
        } catch {
            throw KeychainError(error)
        }
    }

    private func cloudRead(_ cloud: CloudSession, _ name: String) throws(KeychainError) -> Data {
        let found: Data?
        do { found = try cloud.read(name) } catch { throw KeychainError(error) }
        guard let bytes = found else {
            throw KeychainError(KeychainStatus.notAvailable, "a cloud object vanished")
        }
        return bytes
    }

    private func cloudWrite(_ cloud: CloudSession, _ name: String, _ bytes: Data)
        throws(KeychainError)
    {
        do { try cloud.write(name, bytes) } catch { throw KeychainError(error) }
    }

    /// Synchronizable items in the cloud account (`CloudObjects`' rule): one object per primary
    /// key.
    private struct Names {
        static let kind = CloudObjects.kind("kc-")
        let objects: CloudObjects

        init(_ cloudKey: SecureBytes) {
            objects = CloudObjects(cloudKey: cloudKey, kind: Self.kind)
        }

        func name(_ key: PrimaryKey) -> String {
            guard let internet = key.internet else {
                return objects.name(key.accessGroup, key.service, key.account)
            }
            return objects.name(
                key.accessGroup, key.account, "internet", internet.server, String(internet.port),
                internet.path, internet.internetProtocol, internet.authenticationType,
                internet.securityDomain)
        }

        func seal(_ remote: SyncedItem, name: String) -> Data {
            objects.seal(remote.encoded(), name: name)
        }

        func open(_ bytes: Data, name: String) throws(KeychainError) -> SyncedItem {
            let remote: SyncedItem
            do {
                remote = try objects.open(bytes, name: name) { try SyncedItem.decode($0) }
            } catch {
                throw KeychainError(
                    KeychainStatus.decode, "a synced item does not open (tampered or corrupt)")
            }
            guard self.name(remote.key) == name else {
                throw KeychainError(
                    KeychainStatus.decode, "a synced item is stored under another name")
            }
            return remote
        }
    }
}
