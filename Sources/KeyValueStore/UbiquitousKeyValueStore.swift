import CloudAccount
import Device
import Foundation
import Platform
import Sealing
import Synchronization

/// Mirrors `NSUbiquitousKeyValueStoreChangeReasonKey`'s values.
public enum KVChangeReason: Int, Sendable, Hashable {
    /// `NSUbiquitousKeyValueStoreServerChange`: the cloud copy, written by another device, changed
    /// values at `synchronize()`.
    case serverChange = 0
    /// `NSUbiquitousKeyValueStoreInitialSyncChange`: the first `synchronize()` with an account
    /// brought values in.
    case initialSyncChange = 1
    /// `NSUbiquitousKeyValueStoreQuotaViolationChange`: a write over a limit was refused and
    /// changed nothing.
    case quotaViolationChange = 2
    /// `NSUbiquitousKeyValueStoreAccountChange`: `synchronize()` found another account than the one
    /// it last exchanged with.
    case accountChange = 3
}

/// One `NSUbiquitousKeyValueStoreDidChangeExternallyNotification`: why, and which keys.
public struct KVExternalChange: Sendable, Hashable {
    /// Why the values changed (`NSUbiquitousKeyValueStoreChangeReasonKey`).
    public var reason: KVChangeReason
    /// The keys whose values changed, sorted (`NSUbiquitousKeyValueStoreChangedKeysKey`).
    public var changedKeys: [String]

    /// A change for `reason` of `changedKeys`.
    public init(reason: KVChangeReason, changedKeys: [String]) {
        self.reason = reason
        self.changedKeys = changedKeys
    }
}

/// Apple's `NSUbiquitousKeyValueStore` for one app: ≤ 1024 keys, ≤ 1 MB in all, keys ≤ 64 UTF-8
/// bytes; a write over quota changes nothing and posts a quota-violation change.
///
/// Every write lands at once in a local cache in the device directory (outside the app's
/// container, so it survives uninstall; sealed under the device's kvstore key). `synchronize()`
/// exchanges with the signed-in cloud account: per key, the newer write wins (`SyncVersion`: the
/// writer's device ID at the same millisecond) — so a remote change newer than a pending local
/// write wins — and what the remote side changed is posted as an
/// external change (server, or initial sync the first time with an account, or account change when
/// the account is another). Signed out, values stay in the cache and are reconciled at sign-in.
/// Keepsake puts nothing in the cloud in clear: the cloud copy is sealed under the account's cloud
/// key, so it syncs only while end-to-end encryption is available; otherwise it stays local.
///
/// Thread-safe; processes sharing the store see each other's writes at `synchronize()`.
public final class UbiquitousKeyValueStore: Sendable {
    /// Apple's limit of keys per app: 1024.
    public static let maximumKeys = KVQuota.maximumKeys
    /// Apple's limit of keys and values together: 1 MB (1,048,576 bytes).
    public static let maximumTotalBytes = KVQuota.maximumTotalBytes
    /// Apple's limit of a key's length: 64 UTF-8 bytes.
    public static let maximumKeyLength = KVQuota.maximumKeyLength

    /// The app whose values these are.
    public let app: App
    /// The cloud account that holds the cloud copy.
    public let account: CloudAccount
    /// The account's device: its directory holds the local cache.
    public var device: Device { account.device }
    private let onExternalChange: @Sendable (KVExternalChange) -> Void
    private let state = Mutex<KVSnapshot?>(nil)

    /// The store of `app` on `account`'s device, synced with `account`. `onExternalChange` is
    /// called with each change the cloud or a quota violation brings (Apple's
    /// `…DidChangeExternallyNotification`).
    public init(
        app: App, account: CloudAccount,
        onExternalChange: @escaping @Sendable (KVExternalChange) -> Void = { _ in }
    ) {
        self.app = app
        self.account = account
        self.onExternalChange = onExternalChange
    }

    /// The store of `app` on `device`, signed out (local only); see `init(app:account:…)`.
    public convenience init(
        app: App, device: Device,
        onExternalChange: @escaping @Sendable (KVExternalChange) -> Void = { _ in }
    ) {
        self.init(
            app: app, account: CloudAccount(device, cloud: nil), onExternalChange: onExternalChange)
    }

    // MARK: - Values

    /// Mirrors `object(forKey:)`: the value, or nil when the key is absent (or the cache does not
    /// read).
    public func object(forKey key: String) -> KVValue? { (try? load())?.entries[key]?.value ?? nil }
    /// Mirrors `string(forKey:)`: the value when it is a string, else nil.
    public func string(forKey key: String) -> String? {
        if case .string(let s) = object(forKey: key) { return s }
        return nil
    }
    /// Mirrors `data(forKey:)`: the value when it is data, else nil.
    public func data(forKey key: String) -> Data? {
        if case .data(let d) = object(forKey: key) { return d }
        return nil
    }

    /// Mirrors `dictionaryRepresentation`: every key's value.
    public var dictionaryRepresentation: [String: KVValue] {
        ((try? load())?.entries ?? [:]).compactMapValues(\.value)
    }

    /// Mirrors `set(_:forKey:)`. Over a limit, nothing changes and a quota-violation change is
    /// posted; `nil` removes. Like Apple's, it reports nothing: `write(_:forKey:)` is the checked
    /// form.
    public func set(_ value: KVValue?, forKey key: String) { try? write(value, forKey: key) }

    /// Mirrors `set(_:forKey:)` for a string.
    public func set(_ string: String, forKey key: String) { set(.string(string), forKey: key) }

    /// Mirrors `removeObject(forKey:)`.
    public func removeObject(forKey key: String) { set(nil, forKey: key) }

    /// This device as the writer of its values (`SyncVersion.writer`; "" when it cannot say).
    private var writer: String { (try? account.device.deviceID()) ?? "" }

    /// The checked write underneath `set` and `removeObject` (`nil` removes): throws
    /// `.quotaViolation` (and posts the quota-violation change) when over a limit, `.notPersisted`
    /// when the local cache could not be written; either way the stored values stay as they were.
    public func write(_ value: KVValue?, forKey key: String) throws(KeyValueStoreError) {
        var violated = false
        try mutate { snapshot in
            guard let value else {
                guard snapshot.entries[key]?.value != nil else { return false }
                snapshot.entries[key] = KVEntry(value: nil, modified: Self.now(), writer: writer)
                snapshot.unsynced = (snapshot.unsynced ?? []).union([key])
                return true
            }
            var candidate = snapshot.entries
            candidate[key] = KVEntry(value: value, modified: Self.now(), writer: writer)
            if !KVQuota.allows(key: key) || !KVQuota.allows(candidate) {
                violated = true
                return false
            }
            snapshot.entries = candidate
            snapshot.unsynced = (snapshot.unsynced ?? []).union([key])
            return true
        }
        if violated {
            onExternalChange(KVExternalChange(reason: .quotaViolationChange, changedKeys: [key]))
            throw KeyValueStoreError(
                .quotaViolation, "over the key-value store's limits; nothing changed")
        }
    }

    // MARK: - Synchronize

    /// Mirrors `synchronize()`: exchanges with the cloud account now. false when it could not
    /// (signed out, no end-to-end encryption, the account key not held, the cloud unreachable);
    /// the local cache keeps every value either way. `checkedSynchronize()` says why.
    @discardableResult
    public func synchronize() -> Bool {
        do { try checkedSynchronize() } catch { return false }
        return true
    }

    /// Keys written on this device since the last synchronize that reached the cloud, sorted:
    /// what a synchronize that could not reach it leaves pending (a Keepsake addition).
    public var pendingKeys: [String] { ((try? load())?.unsynced ?? []).sorted() }

    /// The checked `synchronize()`: where `synchronize()` answers false, throws
    /// `.noCloudAccount` (nothing to exchange with) or `.notSynchronized` with the cloud's own
    /// error underneath.
    public func checkedSynchronize() throws(KeyValueStoreError) {
        // Other processes' writes to the device's cache are read again first (every write of
        // this one is in the cache already), signed in or not, as Apple's synchronize reconciles
        // memory with disk.
        state.withLock { $0 = nil }
        let session: CloudSession?
        do { session = try account.cloudSession() } catch {
            throw KeyValueStoreError(
                .notSynchronized, "the cloud account: \(error.message)", underlying: error)
        }
        guard let cloud = session else {
            throw KeyValueStoreError(
                .noCloudAccount,
                "signed out, no end-to-end encryption, or this device holds no key of the account")
        }
        let keys = CloudNames(cloudKey: cloud.key, appID: app.id)
        let remote: [String: KVEntry]
        do {
            if let bytes = try cloud.read(keys.name) {
                remote = try keys.open(bytes)
            } else {
                remote = [:]
            }
        } catch {
            throw KeyValueStoreError(
                .notSynchronized, "the cloud copy: \(error)", underlying: error)
        }
        var change: KVExternalChange?
        var merged: [String: KVEntry] = [:]
        // A cache that cannot be written throws `.notPersisted`: nothing changed.
        try mutate { snapshot in
            let reason: KVChangeReason =
                snapshot.account == nil
                ? .initialSyncChange
                : constantTimeEquals(snapshot.account!, keys.account)
                    ? .serverChange : .accountChange
            var changed: [String] = []
            merged = snapshot.entries
            for (key, theirs) in remote {
                let ours = merged[key]
                // The one conflict rule: the later write, the writer at the same millisecond.
                if ours == nil || theirs.version > ours!.version {
                    if ours?.value != theirs.value { changed.append(key) }
                    merged[key] = theirs
                }
            }
            // A merge that would break the quota keeps the local values.
            if !KVQuota.allows(merged) { merged = snapshot.entries }
            snapshot.entries = merged
            snapshot.account = keys.account
            if !changed.isEmpty {
                change = KVExternalChange(reason: reason, changedKeys: changed.sorted())
            }
            return true
        }
        do {
            // Only a copy that differs goes up (a quiet synchronize writes nothing).
            if merged != remote { try cloud.write(keys.name, keys.seal(merged)) }
            try cloud.commit()
        } catch {
            throw KeyValueStoreError(
                .notSynchronized, "the cloud account: \(error.message)", underlying: error)
        }
        // What was uploaded is no longer pending (a write since, by another process, stays).
        let uploaded = merged
        try? mutate { snapshot in
            guard let unsynced = snapshot.unsynced, !unsynced.isEmpty else { return false }
            snapshot.unsynced = unsynced.filter { snapshot.entries[$0] != uploaded[$0] }
            return true
        }
        account.syncTimes.note(storeName)
        if let change { onExternalChange(change) }
    }

    /// The store's name in a status and in the device's sync times: one per app.
    private var storeName: String { "kvstore \(app.id)" }

    /// Where this app's values stand (`keepsake status`): how many keys this device holds,
    /// whether the cloud holds the app's copy (1) or not (0) as the account's manifest vouches for
    /// it, and how many keys written here have not gone up yet.
    public func status() -> StoreStatus { status(account.cloudListing()) }

    package func status(_ listing: CloudListing) -> StoreStatus {
        let snapshot = try? load()
        return StoreStatus(
            local: snapshot?.entries.values.filter { $0.value != nil }.count ?? 0,
            cloud: listing.key.flatMap { key in
                listing.count { $0 == CloudNames(cloudKey: key, appID: app.id).name }
            },
            pending: snapshot.map { $0.unsynced?.count ?? 0 },
            lastSync: account.syncTimes.last(of: storeName),
            notSyncing: listing.status.notSyncing)
    }

    // MARK: - Local cache

    private var cacheFile: URL {
        device.appDataDirectory(app, store: "kvstore").appendingPathComponent("cache")
    }

    private func associatedData() -> Data { Data("keepsake.kvstore.local.v1\0\(app.id)".utf8) }

    private func load() throws -> KVSnapshot {
        if let known = state.withLock({ $0 }) { return known }
        let snapshot = try read()
        state.withLock { $0 = snapshot }
        return snapshot
    }

    private func read() throws -> KVSnapshot {
        guard let bytes = try Files.read(cacheFile) else { return KVSnapshot() }
        return try Envelope.open(
            bytes, key: try device.dataKey("kvstore"), associatedData: associatedData()
        ) {
            try KVSnapshot.decode(Data($0))
        }
    }

    /// Re-reads the cache (another process may have written), applies `change`, writes it back
    /// atomically when `change` says so, under the store's file lock. A cache that does not open
    /// (tampered, or another device's) starts over empty; a write that fails throws and leaves
    /// both the file and this instance's view as they were.
    private func mutate(_ change: (inout KVSnapshot) -> Bool) throws(KeyValueStoreError) {
        // Without the lock (it could not be opened) the write still happens, unserialized.
        let lock = try? FileLock(
            cacheFile.deletingLastPathComponent().appendingPathComponent(".lock"))
        defer { withExtendedLifetime(lock) {} }
        var snapshot = (try? read()) ?? KVSnapshot()
        if change(&snapshot) {
            do {
                let key = try device.dataKey("kvstore")
                try Files.writeAtomically(
                    Envelope.seal(snapshot.encoded(), key: key, associatedData: associatedData()),
                    to: cacheFile)
            } catch {
                state.withLock { $0 = nil }  // re-read what is really stored
                throw KeyValueStoreError(.notPersisted, "the local cache could not be written")
            }
        }
        state.withLock { $0 = snapshot }
    }

    static func now() -> Int64 { SyncClock.now() }
}

/// The app's cloud object (`CloudObjects`' rule): one per app, named by its app id.
struct CloudNames {
    static let kind = CloudObjects.kind("kv-")
    let name: String
    /// Which account this is, as the local cache remembers it to tell an account change. Its own
    /// derivation, not the account's public check value: nothing sealed is also in the cloud in
    /// clear.
    let account: Data
    private let objects: CloudObjects

    init(cloudKey: SecureBytes, appID: String) {
        objects = CloudObjects(cloudKey: cloudKey, kind: Self.kind)
        name = objects.name(appID)
        account = CloudObjects.accountIdentity(cloudKey, context: "keepsake.kvstore.account.v1")
    }

    func seal(_ entries: [String: KVEntry]) -> Data {
        objects.seal(KVEntry.encode(entries), name: name)
    }

    func open(_ bytes: Data) throws -> [String: KVEntry] {
        try objects.open(bytes, name: name) { try KVEntry.decode($0) }
    }
}
