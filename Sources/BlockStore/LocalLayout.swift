import CloudAccount
import Device
import Foundation
import Platform
import Sealing

/// The keys and names of an app's local Block Store copy, all derived from the device's Block
/// Store key (held in the Secret Service).
///
/// Layout: `<device dir>/apps/<app id>/blockstore/<name>.entry`, where name is a keyed hash of the
/// entry key (so file names reveal no key), and the file is an envelope whose associated data binds
/// the app id and the name: an entry copied to another app or renamed fails to open.
struct LocalLayout {
    let directory: URL
    let appID: String
    private let entryKey: SecureBytes
    private let nameKey: SecureBytes

    init(device: Device, app: App) throws(BlockStoreError) {
        self.init(
            blockStoreKey: try Self.call { try device.dataKey("blockstore") },
            directory: device.appDataDirectory(app, store: "blockstore"), appID: app.id)
    }

    init(blockStoreKey: SecureBytes, directory: URL, appID: String) {
        self.directory = directory
        self.appID = appID
        entryKey = KeyDerivation.keyedHash(
            key: blockStoreKey, context: "keepsake.blockstore.entry.v1")
        nameKey = KeyDerivation.keyedHash(
            key: blockStoreKey, context: "keepsake.blockstore.name.v1")
    }

    func name(_ key: String) -> String {
        hex(
            KeyDerivation.keyedHash(
                key: nameKey, context: "keepsake.blockstore.local-name.v1",
                Data((appID + "\0" + key).utf8)
            ).unsafeData())
    }

    func file(_ name: String) -> URL { directory.appendingPathComponent(name + ".entry") }

    private func associatedData(_ name: String) -> Data {
        Data("keepsake.blockstore.local.v1\0\(appID)\0\(name)".utf8)
    }

    func seal(_ entry: BlockStoreEntry, nonce: [UInt8]? = nil) -> Data {
        var plaintext = entry.encoded()
        defer { plaintext.wipe() }
        return Envelope.seal(
            plaintext, key: entryKey, associatedData: associatedData(name(entry.key)),
            nonce: nonce)
    }

    func open(_ bytes: Data, name: String) throws(BlockStoreError) -> BlockStoreEntry {
        do {
            let entry = try Envelope.open(
                bytes, key: entryKey, associatedData: associatedData(name)
            ) {
                plaintext in
                try withTransientData(plaintext) { try BlockStoreEntry.decode($0).entry }
            }
            guard self.name(entry.key) == name else {
                throw BlockStoreError(.internalError, "an entry is stored under another key's name")
            }
            return entry
        } catch let error as BlockStoreError {
            throw error
        } catch {
            throw BlockStoreError(.internalError, "an entry does not open (tampered or corrupt)")
        }
    }

    /// Every entry name on disk (live entries; deletion markers are `tombstoneNames()`).
    func names() -> [String] { names(suffix: ".entry") }

    /// The names of this app's deletion markers: keys deleted here, kept so that the next sync
    /// dates the deletion at the delete (`SyncVersion`), never at the sync.
    func tombstoneNames() -> [String] { names(suffix: ".gone") }

    private func names(suffix: String) -> [String] {
        Files.list(directory).filter { $0.hasSuffix(suffix) }.map {
            String($0.dropLast(suffix.count))
        }
    }

    func read(_ name: String) throws(BlockStoreError) -> BlockStoreEntry? {
        guard let entry = try read(file(name), name: name, deleted: false) else { return nil }
        // A deletion stopped between its two files (the marker written, the entry not yet
        // removed): the later of the two is what the device holds.
        if let gone = try? readTombstone(name), gone.version > entry.version { return nil }
        return entry
    }

    /// The deletion marker of `name`, if the key was deleted here (and not stored again since).
    func readTombstone(_ name: String) throws(BlockStoreError) -> BlockStoreEntry? {
        try read(tombstoneFile(name), name: name, deleted: true)
    }

    private func read(_ url: URL, name: String, deleted: Bool) throws(BlockStoreError)
        -> BlockStoreEntry?
    {
        let bytes: Data?
        do { bytes = try Files.read(url) } catch {
            throw BlockStoreError(.internalError, "an entry could not be read: \(error)")
        }
        guard let bytes else { return nil }
        let entry = try open(bytes, name: name)
        guard entry.deleted == deleted else {
            throw BlockStoreError(.internalError, "an entry does not open (tampered or corrupt)")
        }
        return entry
    }

    /// Stores `entry`, replacing the key's deletion marker if it had one.
    func write(_ entry: BlockStoreEntry) throws(BlockStoreError) {
        do {
            try Files.writeAtomically(seal(entry), to: file(name(entry.key)))
            try Files.remove(tombstoneFile(name(entry.key)))
        } catch {
            throw BlockStoreError(.internalError, "an entry could not be written: \(error)")
        }
    }

    /// Deletes the entry at `name`, leaving its deletion marker (the newest
    /// `maximumTombstones` markers are kept).
    func remove(_ name: String, writer: String, at modified: Int64) throws(BlockStoreError) {
        guard var entry = try read(name) else { return }
        defer { entry.bytes.wipe() }  // the value read only to be deleted
        do {
            try Files.writeAtomically(
                seal(entry.tombstone(modified: modified, writer: writer)), to: tombstoneFile(name))
            try Files.remove(file(name))
        } catch {
            throw BlockStoreError(.internalError, "an entry could not be deleted: \(error)")
        }
        try pruneTombstones()
    }

    /// At most this many deletion markers per app: each stands against every older write of its
    /// key from another device; the oldest beyond it are dropped (their cloud markers stay).
    static let maximumTombstones = 64

    private func pruneTombstones() throws(BlockStoreError) {
        let names = tombstoneNames()
        guard names.count > Self.maximumTombstones else { return }
        var dated: [(SyncVersion, String)] = []
        for name in names {
            // A marker that does not open is dropped first: it stands against nothing.
            let version =
                (try? readTombstone(name))??.version ?? SyncVersion(modified: 0, writer: "")
            dated.append((version, name))
        }
        for (_, name) in dated.sorted(by: { ($0.0, $0.1) < ($1.0, $1.1) })
            .prefix(names.count - Self.maximumTombstones)
        {
            try? Files.remove(tombstoneFile(name))
        }
    }

    func tombstoneFile(_ name: String) -> URL {
        directory.appendingPathComponent(name + ".gone")
    }

    /// Runs `body` holding the app's Block Store lock (flock), so that concurrent processes never
    /// exceed the entry limit or lose a write.
    func locked<R>(_ body: () throws(BlockStoreError) -> R) throws(BlockStoreError) -> R {
        let lock: FileLock
        do { lock = try FileLock(directory.appendingPathComponent(".lock")) } catch {
            throw BlockStoreError(.internalError, "the Block Store lock could not be opened")
        }
        return try withExtendedLifetime(lock) { () throws(BlockStoreError) in try body() }
    }

    static func call<R>(_ body: () throws -> R) throws(BlockStoreError) -> R {
        do { return try body() } catch let error as DeviceError {
            throw BlockStoreError(error)
        } catch {
            throw BlockStoreError(.internalError, "\(error)", underlying: error)
        }
    }
}
