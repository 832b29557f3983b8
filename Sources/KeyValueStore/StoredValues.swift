import CloudAccount
import Foundation

// The key-value store's stored forms — the sealed local cache and the cloud object — and their
// limits. Nothing here touches the device, so the decoders build alone for the fuzzer
// (`scripts/fuzz`, target kvstore-json).

/// A value in the key-value store (the property-list scalars apps use).
public enum KVValue: Sendable, Hashable, Codable {
    /// A string, counted as its UTF-8 bytes.
    case string(String)
    /// Bytes, counted as their number.
    case data(Data)
    /// A 64-bit integer, counted as 8 bytes.
    case int(Int64)
    /// A double (non-finite ones too), counted as 8 bytes.
    case double(Double)
    /// A boolean, counted as 1 byte.
    case bool(Bool)
    /// A date, counted as 8 bytes.
    case date(Date)
    /// An array of values, counted as its values.
    case array([KVValue])
    /// A dictionary of values, counted as its keys (UTF-8) and values.
    case dictionary([String: KVValue])

    /// Bytes counted against the 1 MB quota (the value's own size).
    var size: Int {
        switch self {
        case .string(let s): s.utf8.count
        case .data(let d): d.count
        case .int, .double, .date: 8
        case .bool: 1
        case .array(let items): items.reduce(0) { $0 + $1.size }
        case .dictionary(let entries): entries.reduce(0) { $0 + $1.key.utf8.count + $1.value.size }
        }
    }
}

/// Apple's limits: ≤ 1024 keys, ≤ 1 MB of keys and values in all, keys of 1…64 UTF-8 bytes.
enum KVQuota {
    static let maximumKeys = 1024
    static let maximumTotalBytes = 1_048_576
    static let maximumKeyLength = 64

    static func allows(key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= maximumKeyLength
    }

    static func allows(_ entries: [String: KVEntry]) -> Bool {
        let live = entries.filter { $0.value.value != nil }
        let bytes = live.reduce(0) { $0 + $1.key.utf8.count + ($1.value.value?.size ?? 0) }
        return live.count <= maximumKeys && bytes <= maximumTotalBytes
    }
}

/// One key's latest write; a removal is kept as a tombstone so that it syncs.
struct KVEntry: Codable, Sendable, Equatable {
    var value: KVValue?  // nil: removed
    var modified: Int64
    /// The device that wrote it (absent in entries written before writers were recorded).
    var writer: String?

    /// Its place in the one conflict rule (`SyncVersion`): the later write, then the writer.
    var version: SyncVersion { SyncVersion(modified: modified, writer: writer ?? "") }

    static func encode(_ entries: [String: KVEntry]) -> Data {
        KVJSON.encode(entries)
    }

    /// The cloud object's entries; keys outside Apple's limits are refused, as a local write
    /// would be.
    static func decode(_ json: Data) throws -> [String: KVEntry] {
        let entries = try KVJSON.decoder.decode([String: KVEntry].self, from: json)
        guard entries.keys.allSatisfy(KVQuota.allows(key:)) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "a key outside Apple's limits"))
        }
        return entries
    }
}

/// The local cache: every key's latest write and the account last synchronized with.
struct KVSnapshot: Codable, Sendable {
    var entries: [String: KVEntry] = [:]
    /// The id of the cloud account last synchronized with (`CloudNames.account`).
    var account: Data?
    /// Keys written here since the last synchronize that reached the cloud; nil in a cache that
    /// has no such field, read as none pending.
    var unsynced: Set<String>?

    func encoded() -> Data { KVJSON.encode(self) }

    static func decode(_ json: Data) throws -> KVSnapshot {
        let snapshot = try KVJSON.decoder.decode(KVSnapshot.self, from: json)
        guard snapshot.entries.keys.allSatisfy(KVQuota.allows(key:)) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "a key outside Apple's limits"))
        }
        return snapshot
    }
}

/// JSON with sorted keys (one content, one encoding) and the non-finite doubles a property list
/// can hold spelled as strings, so that every `KVValue` encodes.
enum KVJSON {
    private static let spelled = (positive: "+Infinity", negative: "-Infinity", nan: "NaN")

    static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: spelled.positive, negativeInfinity: spelled.negative, nan: spelled.nan
        )
        // Strings, integers, base64 and every double (the non-finite ones spelled) encode;
        // nothing else is in a value.
        return try! encoder.encode(value)
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: spelled.positive, negativeInfinity: spelled.negative, nan: spelled.nan
        )
        return decoder
    }
}
