import Device
import Foundation
import Platform
import Sealing

/// `account-manifest`: what the cloud account holds, sealed under the account key — a version
/// that only goes up, the key's epoch, a MAC of every store object, and the account's devices.
///
/// Whoever holds the cloud cannot forge it (no account key), and each device remembers the
/// highest version it has seen (`SeenManifest`), so an older manifest (a rollback), an object it
/// lists that is gone (a deletion) or one whose bytes differ (an old copy) is refused with a clear
/// error; an object it does not list (planted, or a deleted object put back) is never read.
///
/// The manifest is the one switch from one state of the account to the next: each copy of an
/// object is stored under a name of its own (its name and the first bytes of its MAC,
/// `storedName(of:)`), so writing a new copy never touches the one the manifest lists, and a
/// writer that dies before its commit leaves only copies no manifest names.
struct AccountManifest: Codable {
    var version: UInt64
    var epoch: Int
    /// Each store object's name (as bytes) and the MAC of its bytes.
    var objects: [Data: Data]
    /// The account's devices: id → X25519 public key (a rotation seals the new key to each).
    var devices: [String: Data]
    /// Where copies are stored: `Self.layout` (a name per copy); nil for an account written
    /// before 0.4.0, whose objects were written over in place under their names alone (an
    /// upload moves them once: `Device.cloudSession`).
    var layout: Int?

    /// The layout this version writes.
    static let layout = 2

    /// The cloud name the listed copy of `name` is stored under; nil when the manifest does not
    /// list it.
    func storedName(of name: String) -> String? {
        objects[Data(name.utf8)].map { Self.storedName(name, mac: $0, layout: layout) }
    }

    static func storedName(_ name: String, mac: Data, layout: Int?) -> String {
        (layout ?? 1) >= 2 ? "\(name)_\(mac.prefix(12).hexString)" : name
    }

    /// The object a stored copy is of: its cloud name less the MAC's bytes (object names are a
    /// prefix and hex digits, with no `_`).
    static func objectName(ofStored stored: String) -> String {
        String(stored.prefix { $0 != "_" })
    }

    /// The cloud names of every copy the manifest lists.
    var storedNames: Set<String> {
        Set(
            objects.map {
                Self.storedName(
                    String(decoding: $0.key, as: UTF8.self), mac: $0.value, layout: layout)
            })
    }

    static let name = "account-manifest"
    private static let associatedData = Data("keepsake.account.manifest.v1".utf8)

    private static func key(_ accountKey: SecureBytes, _ context: String) -> SecureBytes {
        KeyDerivation.keyedHash(key: AccountKey.epochKey(accountKey), context: context)
    }

    func sealed(under accountKey: SecureBytes) -> Data {
        Envelope.seal(
            try! JSONEncoder().encode(self),
            key: Self.key(accountKey, "keepsake.cloud.manifest.v1"),
            associatedData: Self.associatedData)
    }

    static func open(_ bytes: Data, under accountKey: SecureBytes) throws(DeviceError) -> Self {
        do {
            return try Envelope.open(
                bytes, key: key(accountKey, "keepsake.cloud.manifest.v1"),
                associatedData: associatedData
            ) { try JSONDecoder().decode(Self.self, from: Data($0)) }
        } catch {
            throw DeviceError(
                .corrupt,
                "the cloud account's manifest does not open (replaced, or sealed under a key this device does not hold)"
            )
        }
    }

    /// The MAC of an object's bytes under its name.
    static func mac(_ bytes: Data, name: String, under accountKey: SecureBytes) -> Data {
        KeyDerivation.keyedHash(
            key: key(accountKey, "keepsake.cloud.object-mac.v1"), context: name, bytes
        ).unsafeData()
    }

    /// The store objects it lists.
    var names: Set<String> { Set(objects.keys.map { String(decoding: $0, as: UTF8.self) }) }
}

/// The highest manifest version this device has seen of its account, in the device directory:
/// `<account identity> <epoch> <version>`.
struct SeenManifest {
    let file: URL

    /// How the file names the account: a value of the name key, which rotations keep.
    static func account(_ key: SecureBytes) -> String {
        CloudObjects.accountIdentity(key, context: "keepsake.cloud.seen.v1").hexString
    }

    func read(account: String) -> (epoch: Int, version: UInt64)? {
        guard let bytes = (try? Files.read(file, limit: 4096)) ?? nil else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard parts.count == 3, parts[0] == account, let epoch = Int(parts[1]),
            let version = UInt64(parts[2])
        else { return nil }
        return (epoch, version)
    }

    /// Refuses `manifest` when it is older than the highest this device saw of `account`
    /// (a rollback); returns that highest (nil: none seen yet).
    func refuseOlder(_ manifest: AccountManifest, account: String) throws(DeviceError) -> (
        epoch: Int, version: UInt64
    )? {
        let highest = read(account: account)
        if let highest, (manifest.epoch, manifest.version) < (highest.epoch, highest.version) {
            throw DeviceError(
                .corrupt,
                "the cloud shows an older account state than this device has seen (manifest version \(manifest.version), older than version \(highest.version) seen here): rolled back, nothing restored or taken from it"
            )
        }
        return highest
    }

    /// Refuses an account record of an epoch older than `seen`, the epoch this device holds or
    /// saw: the cloud put back an older state of the account (a rollback). Joining again would
    /// take that state as the account's, restoring whatever was deleted since, so the error
    /// advises no join.
    static func refuseOlderEpoch(_ epoch: Int, than seen: Int) throws(DeviceError) {
        guard epoch < seen else { return }
        throw DeviceError(
            .corrupt,
            "the cloud shows an older account state than this device has seen (account key epoch \(epoch), older than epoch \(seen) seen here): rolled back, nothing restored or taken from it; do not join it again: put the cloud's newer copy back, or let a device that holds the current state sync"
        )
    }

    /// Remembers `epoch` and `version` as seen, unless a state at least as new already is.
    func raise(account: String, epoch: Int, version: UInt64) throws(DeviceError) {
        if let highest = read(account: account),
            (highest.epoch, highest.version) >= (epoch, version)
        {
            return
        }
        try write(account: account, epoch: epoch, version: version)
    }

    func write(account: String, epoch: Int, version: UInt64) throws(DeviceError) {
        do {
            try Files.writeAtomically(Data("\(account) \(epoch) \(version)".utf8), to: file)
        } catch {
            throw DeviceError(
                .notAvailable, "the manifest version could not be kept: \(error)", underlying: error
            )
        }
    }
}

/// One exchange with the cloud account, under its lock: the stores read, write and delete their
/// objects through it, and `commit()` writes the manifest that vouches for them.
///
/// Reads are checked against the manifest; writes go to the cloud at once, each under a name of
/// its own that no manifest lists yet, and into the manifest at `commit()`, whose one write is the
/// switch from the old state to the new; the copies it no longer lists (older copies, deletions)
/// are removed after it is written. So a reader at any moment sees one whole manifest's state,
/// and an interruption leaves at worst copies no manifest lists — which a later upload removes,
/// and which no device ever reads.
package final class CloudSession {
    /// The account key the session's objects are sealed under.
    package let key: SecureBytes
    let storage: any CloudStorage
    /// The account's lock, held from opening until `commit()` (or until the session goes).
    private var lock: AnyObject?
    var manifest: AccountManifest
    private let account: String
    private let seen: SeenManifest
    private var dirty: Bool
    private var removals: Set<String> = []
    /// Cloud names of copies the manifest listed when they were replaced or deleted here: removed
    /// once the new manifest is written (unless it lists them after all).
    private var superseded: Set<String> = []
    /// What this session wrote (name → MAC), to merge into a manifest another writer changed.
    private var written: [Data: Data] = [:]
    /// The manifest's copy as read (nil: there was none), for the compare-and-swap at commit.
    private var manifestVersion: CloudObjectVersion?
    /// Store objects in the cloud that the manifest does not list and that were already there
    /// `StrayObjects.age` ago: what `commit()` removes. (A younger one may be another session's
    /// upload that its manifest does not list yet: WebDAV servers' locks are not always
    /// exclusive — Apache's mod_dav_fs granted overlapping exclusive locks to concurrent LOCKs —
    /// so removing it at once could delete what the other session is about to list.)
    private let strays: Set<String>
    /// Told the epoch and version of each manifest this session wrote, once the account's lock
    /// is let go (the device signs it for the account's witness).
    var afterCommit: ((_ epoch: Int, _ version: UInt64) -> Void)?

    init(
        key: SecureBytes, storage: any CloudStorage, lock: AnyObject, manifest: AccountManifest,
        manifestVersion: CloudObjectVersion?, dirty: Bool, seen: SeenManifest,
        strays: Set<String>
    ) {
        self.key = key
        self.storage = storage
        self.lock = lock
        self.manifest = manifest
        self.manifestVersion = manifestVersion
        self.dirty = dirty
        self.seen = seen
        self.strays = strays
        account = SeenManifest.account(key)
    }

    /// The store objects the manifest lists (with this session's writes, without its deletions).
    package func list() -> [String] { manifest.names.sorted() }

    /// Which copy of `name` the manifest lists (nil: none), as text: it changes whenever the
    /// object does, so a store that kept it from its last sync skips what did not change.
    package func digest(of name: String) -> String? {
        manifest.objects[Data(name.utf8)].map { $0.prefix(16).hexString }
    }

    /// Whether this session wrote `name` (its copy is the manifest's, merges included).
    package func wrote(_ name: String) -> Bool { written[Data(name.utf8)] != nil }

    /// An object's bytes, when the manifest lists it; nil when it does not (whatever the cloud
    /// holds under that name).
    ///
    /// - Throws: `.corrupt` when a listed object is gone or its bytes are not the listed ones.
    package func read(_ name: String) throws(DeviceError) -> Data? {
        try read([name])[name]
    }

    /// Several objects at once (where the storage can), each checked as `read(_:)` checks one;
    /// names the manifest does not list are left out.
    package func read(_ names: [String]) throws(DeviceError) -> [String: Data] {
        let listed = names.compactMap { name in manifest.storedName(of: name).map { (name, $0) } }
        let found = try storage.checked.read(listed.map(\.1))
        var checked: [String: Data] = [:]
        for (name, stored) in listed { checked[name] = try check(name, found[stored]) }
        return checked
    }

    private func check(_ name: String, _ found: Data?) throws(DeviceError) -> Data {
        let expected = manifest.objects[Data(name.utf8)]!
        guard let bytes = found else {
            throw DeviceError(
                .corrupt,
                "\(name) is in the account manifest but gone from the cloud (deleted behind it)")
        }
        guard constantTimeEquals(AccountManifest.mac(bytes, name: name, under: key), expected)
        else {
            throw DeviceError(
                .corrupt,
                "\(name) is not the copy the account manifest lists (an old copy put back, or replaced)"
            )
        }
        return bytes
    }

    package func write(_ name: String, _ data: Data) throws(DeviceError) {
        try write([(name, data)])
    }

    /// Writes several objects (at once where the storage can: `CloudStorage.write(_:)`); each
    /// is in the manifest once written.
    package func write(_ objects: [(name: String, data: Data)]) throws(DeviceError) {
        guard !objects.isEmpty else { return }
        let macs = objects.map { AccountManifest.mac($0.data, name: $0.name, under: key) }
        let copies = zip(objects, macs).map { object, mac in
            (
                name: AccountManifest.storedName(object.name, mac: mac, layout: manifest.layout),
                data: object.data
            )
        }
        try storage.checked.write(copies)
        for (object, mac) in zip(objects, macs) { enter(object.name, mac: mac) }
    }

    private func enter(_ name: String, mac: Data) {
        if let old = manifest.storedName(of: name) { superseded.insert(old) }
        manifest.objects[Data(name.utf8)] = mac
        written[Data(name.utf8)] = mac
        removals.remove(name)
        dirty = true
    }

    /// Enters a deletion; a name the manifest does not list costs nothing (an unlisted object
    /// left in the cloud is a stray, which `commit()` of an upload removes).
    package func delete(_ name: String) {
        written.removeValue(forKey: Data(name.utf8))
        guard let old = manifest.storedName(of: name) else { return }
        manifest.objects.removeValue(forKey: Data(name.utf8))
        superseded.insert(old)
        dirty = true
        removals.insert(name)
    }

    /// Moves an account written before 0.4.0 (each object written over in place under its name)
    /// to a copy per name, once: every listed object that is whole is copied under its stored
    /// name. One that is not the listed copy — a sync that died between its writes and its commit
    /// left it so, and every sync after it stopped there — is dropped from the manifest instead
    /// (a listed object gone is refused before: `Device.cloudSession`), so each device that holds what it held uploads it again at its next sync
    /// (nothing of the unlisted bytes is taken). Returns how many were dropped.
    @discardableResult
    func moveToCurrentLayout() throws(DeviceError) -> Int {
        guard (manifest.layout ?? 1) < AccountManifest.layout else { return 0 }
        let names = manifest.names.sorted()
        let found = try storage.checked.read(names)
        var copies: [(name: String, data: Data)] = []
        var dropped = 0
        for name in names {
            let mac = manifest.objects[Data(name.utf8)]!
            if let bytes = found[name],
                constantTimeEquals(AccountManifest.mac(bytes, name: name, under: key), mac)
            {
                copies.append(
                    (
                        AccountManifest.storedName(name, mac: mac, layout: AccountManifest.layout),
                        bytes
                    ))
            } else {
                manifest.objects.removeValue(forKey: Data(name.utf8))
                removals.insert(name)
                dropped += 1
            }
            superseded.insert(name)
        }
        try storage.checked.write(copies)
        manifest.layout = AccountManifest.layout
        dirty = true
        return dropped
    }

    /// Writes the manifest (a new version) when anything changed, then removes what was deleted
    /// and the objects it does not list.
    ///
    /// The manifest is written by compare-and-swap against the copy this session read: when
    /// another writer changed it meanwhile (one that did not hold the account's lock, or whose
    /// lock had expired), the new copy is read, checked like any manifest, and this session's
    /// writes and deletions are merged into it — never written over it.
    package func commit() throws(DeviceError) {
        let wrote = dirty
        if dirty {
            var attempts = 0
            while true {
                manifest.version += 1
                let swapped: Bool
                do {
                    swapped = try storage.write(
                        AccountManifest.name, manifest.sealed(under: key),
                        ifVersion: manifestVersion, unless: Self.skipsTheSwitch)
                } catch {
                    throw DeviceError(
                        .notAvailable, "the account manifest could not be written: \(error)",
                        underlying: error)
                }
                if swapped { break }
                attempts += 1
                guard attempts < 4 else {
                    throw DeviceError(
                        .notAvailable,
                        "the account manifest kept changing under this sync: try again")
                }
                try mergeNewerManifest()
            }
            try seen.write(account: account, epoch: manifest.epoch, version: manifest.version)
            dirty = false
        }
        let listed = manifest.storedNames
        for name in superseded.union(strays).sorted() where !listed.contains(name) {
            try? storage.delete(name)
        }
        removals = []
        superseded = []
        lock = nil  // the exchange is over: other devices and processes may go
        if wrote { afterCommit?(manifest.epoch, manifest.version) }
    }

    /// Test hook (debug builds only): `KEEPSAKE_TEST_SKIP_MANIFEST_SWITCH=1` makes every commit
    /// skip the manifest's write and go on as if it were made — the broken commit the chaos soak
    /// must catch (`keepsake-dev soak --broken-commit yes`).
    static var skipsTheSwitch: Bool {
        #if KEEPSAKE_TEST_HOOKS
            ProcessInfo.processInfo.environment["KEEPSAKE_TEST_SKIP_MANIFEST_SWITCH"] == "1"
        #else
            false
        #endif
    }

    /// Reads the manifest another writer put in place, and enters this session's changes in it.
    private func mergeNewerManifest() throws(DeviceError) {
        guard let found = try storage.checked.readVersioned(AccountManifest.name)
        else {
            throw DeviceError(
                .corrupt, "the cloud account's manifest vanished during this sync")
        }
        var newer = try AccountManifest.open(found.data, under: key)
        guard newer.epoch == manifest.epoch, newer.version >= manifest.version - 1,
            newer.layout == manifest.layout || newer.objects.isEmpty
        else {
            throw DeviceError(
                .notAvailable,
                "the account was re-keyed or rolled back during this sync: nothing was overwritten; try again"
            )
        }
        for (name, mac) in written { newer.objects[name] = mac }
        for name in removals { newer.objects.removeValue(forKey: Data(name.utf8)) }
        newer.layout = manifest.layout
        newer.devices.merge(manifest.devices) { theirs, _ in theirs }
        manifest = newer
        manifestVersion = found.version
    }
}

/// When this device first saw each object the account's manifest does not list (its directory's
/// `cloud-strays`: `<hash of the name> <ms since 1970>` per line — the cloud's names, whatever
/// they hold, are not copied into the device directory): a stray is removed only once it has been
/// one for `age` — longer than any session holds the account's lock — so an upload another
/// session has not listed yet is never removed, whatever the server's lock did.
struct StrayObjects {
    /// Four minutes: a session's lock is refreshed for at most this long (less its lifetime and a
    /// margin), so no session outlives it.
    static let age: TimeInterval = 240
    let file: URL

    init(directory: URL) { file = directory.appendingPathComponent("cloud-strays") }

    private static func id(_ name: String) -> String {
        KeyDerivation.keyedHash(
            key: SecureBytes(copying: Data(repeating: 0x53, count: 32)),
            context: "keepsake.cloud.stray.v1", Data(name.utf8)
        ).unsafeData().prefix(16).hexString
    }

    /// Those of `strays` first seen at least `age` ago; remembers the others from now (and
    /// forgets names that are no longer strays).
    func old(among strays: Set<String>, now: Date = Date()) -> Set<String> {
        var firstSeen: [String: Int64] = [:]
        if let bytes = (try? Files.read(file, limit: 4 << 20)) ?? nil {
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
                let parts = line.split(separator: " ")
                if parts.count == 2, let ms = Int64(parts[1]) { firstSeen[String(parts[0])] = ms }
            }
        }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        var kept: [String: Int64] = [:]
        var byID: [String: String] = [:]
        for name in strays {
            let id = Self.id(name)
            byID[id] = name
            kept[id] = firstSeen[id] ?? nowMs
        }
        if kept != firstSeen {
            let text = kept.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)\n" }.joined()
            try? Files.writeAtomically(Data(text.utf8), to: file)
        }
        let cutoff = nowMs - Int64(Self.age * 1000)
        return Set(kept.filter { $0.value <= cutoff }.keys.compactMap { byID[$0] })
    }
}

extension CloudAccount {
    /// Opens an exchange with the cloud account: nil when signed out or when this device does
    /// not hold the account's key (for uploads, also without E2EE). Waits for the account's lock.
    ///
    /// A restore (`forUpload` false) refuses an account whose objects and manifest disagree; an
    /// upload removes the objects the manifest does not list at `commit()`.
    ///
    /// - Throws: `.corrupt` for a manifest that is older than one this device saw, gone after
    ///   this device saw one, or does not open; `.notAvailable` when the cloud is unreachable.
    package func cloudSession(forUpload: Bool = true) throws(DeviceError) -> CloudSession? {
        // The device record, read once for the whole session.
        guard let cloud, let held = try self.keys.heldCloudKey(forUpload: forUpload) else {
            return nil
        }
        var key = held.key
        var record: HeldAccountState? = held.record
        // Usually the key this device holds is the account's: one read of the account record,
        // under the account's lock.
        var lock: AnyObject? = try cloud.checked.lock()
        var account = try self.keys.readAccount()
        if !(account.map { constantTimeEquals($0.check, AccountRecord.check(key)) } ?? false) {
            // Rotated since this device last looked (or gone): following takes the lock-screen
            // lock, which every process takes before the account's, so the account's is let go
            // meanwhile.
            lock = nil
            guard let followed = try self.keys.cloudKey(forUpload: forUpload) else { return nil }
            (key, record) = (followed, nil)
            lock = try cloud.checked.lock()
            account = try self.keys.readAccount()
        }
        // A rotation by another device in between: its key is picked up at the next try.
        guard let account, let lock, constantTimeEquals(account.check, AccountRecord.check(key))
        else {
            throw DeviceError(.notAvailable, "the account key changed meanwhile: try again")
        }
        let seen = manifests.seen
        var (manifest, dirty, version) = try manifests.read(
            key: key, epoch: account.epoch ?? 0, cloud: cloud, seen: seen)
        let listed = Set(try cloud.checked.list()).filter {
            CloudObjects.kind(ofObjectNamed: $0) != nil
        }
        // Copies the manifest does not list (planted, put back, or left by a writer that died
        // before its commit) are never read; an upload removes them once they are old.
        var strays = listed.subtracting(manifest.storedNames)
        // A listed copy gone is the cloud's doing: a copy is removed only once no manifest lists
        // it, in either layout (only a copy written over in place, before 0.4.0, heals).
        let missing = manifest.storedNames.subtracting(listed)
        if !missing.isEmpty {
            throw DeviceError(
                .corrupt,
                "\(missing.count) objects the account manifest lists are gone from the cloud (deleted behind it): nothing is \(forUpload ? "synced" : "restored")"
            )
        }
        if !forUpload {
            strays = []
        } else {
            strays = StrayObjects(directory: device.directory).old(among: strays)
            let (id, publicKey) = try manifests.deviceBoxPublicKey(record)
            if manifest.devices[id] != publicKey {
                manifest.devices[id] = publicKey
                dirty = true
            }
        }
        let session = CloudSession(
            key: key, storage: cloud, lock: lock, manifest: manifest, manifestVersion: version,
            dirty: dirty, seen: seen, strays: strays)
        if forUpload { try session.moveToCurrentLayout() }
        if escrow != nil {
            session.afterCommit = { epoch, version in
                self.keys.witness(key, epoch: epoch, version: version, record: record)
            }
        }
        return session
    }
}
