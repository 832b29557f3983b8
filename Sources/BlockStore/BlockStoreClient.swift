import CloudAccount
import Device
import Foundation
import Platform

/// Google's Block Store for one app (`com.google.android.gms.auth.blockstore.BlockstoreClient`),
/// rule for rule: at most 16 entries, key and bytes together at most 4096 bytes, the default key,
/// one app never reads another's entries. Entries live sealed in the device directory and survive
/// uninstall while the device's backup setting is on; cloud copies are made by ``BlockStoreSync``
/// only under an end-to-end-encryption-capable lock screen.
///
/// Thread- and process-safe: every change holds the app's Block Store lock.
public final class BlockStoreClient: Sendable {
    /// Google's limit of entries per app: a 17th key is `TOO_MANY_ENTRIES`.
    public static let maximumEntries = 16
    /// Google's limit for one entry, key (UTF-8) and bytes together: more is `MAX_SIZE_EXCEEDED`.
    public static let maximumSize = 4096

    /// The app whose entries these are; it never reads another app's.
    public let app: App
    /// The device whose directory holds the sealed entries and whose settings say whether Block
    /// Store is available.
    public let device: Device

    /// Block Store for `app` on `device`.
    public init(app: App, device: Device) {
        self.app = app
        self.device = device
    }

    /// Mirrors `storeBytes`: the number of bytes stored. The same key overwrites.
    @discardableResult
    public func storeBytes(_ data: StoreBytesData) throws(BlockStoreError) -> Int {
        let layout = try available()
        guard data.key.utf8.count + data.bytes.count <= Self.maximumSize else {
            throw BlockStoreError(
                .maxSizeExceeded, "key and bytes together exceed \(Self.maximumSize) bytes")
        }
        guard !data.key.isEmpty else { throw BlockStoreError(.invalidArgument, "an empty key") }
        let entry = BlockStoreEntry(
            key: data.key, bytes: data.bytes, shouldBackupToCloud: data.shouldBackupToCloud,
            modified: Self.now(), writer: writer)
        try layout.locked { () throws(BlockStoreError) in
            let names = layout.names()
            if !names.contains(layout.name(data.key)) && names.count >= Self.maximumEntries {
                throw BlockStoreError(
                    .tooManyEntries, "this app already has \(Self.maximumEntries) entries")
            }
            try layout.write(entry)
        }
        return data.bytes.count
    }

    /// Mirrors `retrieveBytes`: key → bytes. An empty key list gives an empty map; keys and
    /// retrieveAll together are an invalid argument. A tampered entry is an error, never wrong bytes.
    public func retrieveBytes(_ request: RetrieveBytesRequest) throws(BlockStoreError) -> [String:
        Data]
    {
        let layout = try available()
        if request.retrieveAll && !request.keys.isEmpty {
            throw BlockStoreError(.invalidArgument, "keys and retrieveAll together")
        }
        let names = request.retrieveAll ? layout.names() : request.keys.map(layout.name)
        var result: [String: Data] = [:]
        for name in names {
            if let entry = try layout.read(name) { result[entry.key] = entry.bytes }
        }
        return result
    }

    /// The entries with their backup flags (for sync and tools).
    public func entries() throws(BlockStoreError) -> [BlockStoreEntry] {
        let layout = try available()
        var result: [BlockStoreEntry] = []
        for name in layout.names() {
            if let entry = try layout.read(name) { result.append(entry) }
        }
        return result.sorted { $0.key < $1.key }
    }

    /// Mirrors `deleteBytes`: false when nothing was deleted.
    public func deleteBytes(_ request: DeleteBytesRequest) throws(BlockStoreError) -> Bool {
        let layout = try available()
        if request.deleteAll && !request.keys.isEmpty {
            throw BlockStoreError(.invalidArgument, "keys and deleteAll together")
        }
        return try layout.locked { () throws(BlockStoreError) in
            let present = Set(layout.names())
            let names =
                request.deleteAll
                ? Array(present) : request.keys.map(layout.name).filter(present.contains)
            let now = Self.now()
            for name in names { try layout.remove(name, writer: writer, at: now) }
            return !names.isEmpty
        }
    }

    /// Takes `entry` from the cloud as it was written (its version kept, so the restore is no
    /// new write): not over an entry held here, nor over a later deletion here, nor past the
    /// entry limit. True when it was stored.
    func restore(_ entry: BlockStoreEntry) throws(BlockStoreError) -> Bool {
        let layout = try available()
        return try layout.locked { () throws(BlockStoreError) in
            let name = layout.name(entry.key)
            if try layout.read(name) != nil { return false }
            if let gone = try layout.readTombstone(name), gone.version > entry.version {
                return false
            }
            guard layout.names().count < Self.maximumEntries else { return false }
            var restored = entry
            restored.shouldBackupToCloud = true
            try layout.write(restored)
            return true
        }
    }

    /// This device as the writer of a store or a deletion (`SyncVersion.writer`; "" when it
    /// cannot say, which sorts lowest at the same millisecond).
    private var writer: String { (try? device.deviceID()) ?? "" }

    private static func now() -> Int64 { SyncClock.now() }

    /// Mirrors `isEndToEndEncryptionAvailable`: true only with a knowledge-factor lock screen.
    public func isEndToEndEncryptionAvailable() throws(BlockStoreError) -> Bool {
        _ = try available()
        return try LocalLayout.call { try device.isEndToEndEncryptionAvailable() }
    }

    private func available() throws(BlockStoreError) -> LocalLayout {
        guard try LocalLayout.call({ try device.settings() }).blockStoreAvailable else {
            throw BlockStoreError(
                .featureNotSupported, "Block Store is not available on this device")
        }
        return try LocalLayout(device: device, app: app)
    }
}
