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

    /// Exchanges with the cloud account now: uploads backed-up entries, removes cloud copies of
    /// entries that are no longer backed up. Without E2EE (or signed out, or not joined) nothing
    /// is written to the cloud.
    public func sync() throws(BlockStoreError) -> Report {
        guard account.cloud != nil else { return Report(skipped: "signed out") }
        guard let session = try network({ try account.cloudSession() }) else {
            return Report(
                skipped: try network { try account.keys.whyNoCloudSession() })
        }
        let keys = CloudEntries(session.key)
        var report = Report()
        let plans = try plans(keys: keys, listed: Set(session.list()))
        for plan in plans {
            let uploads = plan.uploads.map { upload in
                (upload.name, keys.seal(upload.entry, appID: plan.appID, name: upload.name))
            }
            try network { try session.write(uploads) }
            report.uploaded += uploads.count
            for name in plan.removals { session.delete(name) }
            report.removed += plan.removals.count
        }
        try network { try session.commit() }
        // What was synced is recorded only once the account's manifest holds it: a commit that
        // failed leaves the record as it was, so the next sync makes the same uploads and
        // removals again (a deletion is never forgotten while the cloud still lists its entry).
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
            // Removals of copies the manifest no longer lists change nothing: not pending.
            pending = plans.reduce(0) {
                $0 + $1.uploads.count + $1.removals.filter(names.contains).count
            }
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

    /// What one app's sync does: the entries to upload (changed since this device's last upload,
    /// or not in the cloud), the cloud copies to remove (no longer backed up, or deleted), and
    /// the record of what was uploaded to keep afterwards.
    struct Plan {
        var appID: String
        var manifest: SyncManifest
        var uploads: [(name: String, entry: BlockStoreEntry)] = []
        var removals: [String] = []
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
            let uploadedBefore = plan.manifest.readDigests()
            for name in layout.names() {
                guard let entry = try layout.read(name) else { continue }
                let cloudName = keys.name(appID: appID, key: entry.key)
                if entry.shouldBackupToCloud {
                    // Only what changed since this device's last upload goes up again (the
                    // account manifest still listing it, and it vouches for the bytes).
                    let digest = keys.digest(entry, appID: appID, name: cloudName)
                    if uploadedBefore[cloudName] != digest || !listed.contains(cloudName) {
                        plan.uploads.append((cloudName, entry))
                    }
                    plan.current.insert(cloudName)
                    plan.digests[cloudName] = digest
                } else if listed.contains(cloudName) {
                    plan.removals.append(cloudName)
                }
            }
            plan.removals += Set(uploadedBefore.keys).subtracting(plan.current)
                .subtracting(plan.removals).sorted()
            plans.append(plan)
        }
        return plans
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

    /// Restores the cloud's backed-up entries into the local copy (existing local entries win).
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
            guard let app = try? App(id: appID, container: device.directory) else {
                throw BlockStoreError(.internalError, "a cloud entry names an invalid app")
            }
            let client = BlockStoreClient(app: app, device: device)
            if try client.retrieveBytes(RetrieveBytesRequest(keys: [entry.key]))[entry.key] != nil {
                continue
            }
            do {
                try client.storeBytes(
                    StoreBytesData(bytes: entry.bytes, key: entry.key, shouldBackupToCloud: true))
                restored += 1
            } catch  where error.code == .tooManyEntries {
                continue
            }
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
