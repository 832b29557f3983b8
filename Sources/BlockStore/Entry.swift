import CloudAccount
import Foundation
import Sealing

/// One Block Store entry as an app sees it, plus what sync needs.
public struct BlockStoreEntry: Sendable, Hashable {
    /// The entry's key, as the app stored it.
    public var key: String
    /// The entry's bytes.
    public var bytes: Data
    /// Whether the entry is copied to the cloud account at sync (only with end-to-end encryption).
    public var shouldBackupToCloud: Bool
    /// Milliseconds since 1970 of the last store.
    public var modified: Int64
    /// The device that made the last store or deletion (its device ID; "" when not recorded).
    public var writer: String = ""
    /// A deletion marker (a tombstone): the key was deleted at `modified` by `writer`; no bytes.
    public var deleted = false

    /// Its place in the one conflict rule (`SyncVersion`): the later write, then the writer.
    package var version: SyncVersion { SyncVersion(modified: modified, writer: writer) }

    /// The tombstone of this entry: its key, deleted at `modified` by `writer`.
    func tombstone(modified: Int64, writer: String) -> BlockStoreEntry {
        BlockStoreEntry(
            key: key, bytes: Data(), shouldBackupToCloud: false, modified: modified,
            writer: writer, deleted: true)
    }

    static let magic = Data("KBE1".utf8)

    /// The entry's fields (inside every envelope: local file, cloud object, transfer bundle).
    func encoded(appID: String? = nil) -> Data {
        var out = TLV(magic: Self.magic)
        out.append(1, key)
        out.append(2, bytes)
        out.append(3, shouldBackupToCloud)
        out.append(4, modified)
        if let appID { out.append(5, appID) }
        // Absent when empty or false, so an entry from before writers were recorded encodes as it did.
        if !writer.isEmpty { out.append(6, writer) }
        if deleted { out.append(7, true) }
        return out.bytes
    }

    static func decode(_ bytes: Data) throws(SealingError) -> (
        entry: BlockStoreEntry, appID: String?
    ) {
        let fields = try TLV.fields(bytes, magic: magic, known: 1...7)
        let entry = BlockStoreEntry(
            key: try fields.requiredString(1), bytes: Data(try fields.required(2)),
            shouldBackupToCloud: try fields.bool(3) ?? false, modified: try fields.int64(4) ?? 0,
            writer: try fields.string(6) ?? "", deleted: try fields.bool(7) ?? false)
        guard !entry.deleted || entry.bytes.isEmpty else { throw SealingError(.malformed) }
        return (entry, try fields.string(5))
    }
}

extension BlockStoreEntry {
    /// A transfer payload: length-prefixed entries, each naming its app.
    static func encodeTransfer(_ entries: [(BlockStoreEntry, String)]) -> Data {
        var payload = Data()
        for (entry, appID) in entries {
            let encoded = entry.encoded(appID: appID)
            withUnsafeBytes(of: UInt32(encoded.count).bigEndian) { payload.append(contentsOf: $0) }
            payload.append(encoded)
        }
        return payload
    }

    static func decodeTransfer(_ payload: Data) throws(SealingError) -> [(BlockStoreEntry, String)]
    {
        var result: [(BlockStoreEntry, String)] = []
        var rest = payload
        while !rest.isEmpty {
            guard rest.count >= 4 else { throw SealingError(.malformed) }
            let length = rest.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            guard rest.count - 4 >= length else { throw SealingError(.malformed) }
            let (entry, appID) = try BlockStoreEntry.decode(Data(rest.dropFirst(4).prefix(length)))
            guard let appID else { throw SealingError(.malformed) }
            result.append((entry, appID))
            rest = Data(rest.dropFirst(4 + length))
        }
        return result
    }
}

func hex(_ data: Data) -> String { data.hexString }
