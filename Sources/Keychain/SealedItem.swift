import Device
import Dispatch
import Foundation
import Sealing

/// What the Secret Service holds as an item's secret: the item's primary key and class in clear
/// (they are in the clear attributes anyway) and the `StoredRecord` sealed under the class key.
///
/// Format: magic `KSK2`, then `TLV` fields class (1), access group (2), service (3), account (4),
/// synchronizable (5), envelope (6), and for an internet password server (7), port (8), path (9),
/// protocol (10), authentication type (11), security domain (12), the envelope last. The
/// envelope's associated data is `keepsake.keychain.v1`, NUL, and the clear header — the magic and
/// every field but 6, in that canonical order: a sealed value moved to another item (another
/// primary key, class or access group — which is the app's id by default) fails to open, and one
/// whose clear header was edited, reordered or extended fails too. Opening authenticates the
/// header exactly as stored (never re-encoded: a read-all opens one header per item), and
/// the opened record must then describe the same item as the parsed header.
struct SealedItem: Equatable {
    static let magic = Data("KSK2".utf8)

    var accessible: Accessibility
    var key: PrimaryKey
    var envelope: Data
    /// The header as stored: what the envelope was sealed with.
    private var clearHeader: Data

    var protectionClass: ProtectionClass { accessible.protectionClass }

    private static func header(_ accessible: Accessibility, _ key: PrimaryKey) -> TLV {
        var out = TLV(magic: magic)
        out.append(1, accessible.rawValue.utf8)
        out.append(2, key.accessGroup.utf8)
        out.append(3, key.service.utf8)
        out.append(4, key.account.utf8)
        out.append(5, [key.synchronizable ? 1 : 0])
        if let internet = key.internet {
            out.append(7, internet.server)
            out.append(8, Int64(internet.port))
            out.append(9, internet.path)
            out.append(10, internet.internetProtocol)
            out.append(11, internet.authenticationType)
            out.append(12, internet.securityDomain)
        }
        return out
    }

    private static let context = Data("keepsake.keychain.v1\0".utf8)

    private static func associatedData(_ clearHeader: Data) -> Data {
        var out = Data(capacity: context.count + clearHeader.count)
        out.append(context)
        out.append(clearHeader)
        return out
    }

    /// Seals `record` under its class key.
    static func seal(_ record: StoredRecord, key classKey: SecureBytes) -> Data {
        let accessible = record.attributes.accessible
        var out = header(accessible, record.key)
        var plaintext = record.encoded()
        defer { plaintext.wipe() }
        let envelope = Envelope.seal(
            plaintext, key: classKey, associatedData: associatedData(out.bytes))
        out.append(6, envelope)
        return out.bytes
    }

    /// Parses the clear header; nothing is opened yet.
    static func parse(_ bytes: Data) throws(KeychainError) -> SealedItem {
        let fields = try KeychainTLV.fields(bytes, magic: magic, knownTags: 1...12)
        func string(_ tag: UInt8) throws(KeychainError) -> String {
            guard let value = try? fields.string(tag) else {
                throw KeychainTLV.malformed("missing or invalid header field")
            }
            return value
        }
        guard let accessible = Accessibility(rawValue: try string(1)),
            let sync = try? fields.bool(5), let envelope = fields[6]
        else { throw KeychainTLV.malformed("bad sealed item header") }
        // The envelope is the last field; everything before its tag and length is the header.
        guard envelope.endIndex == bytes.endIndex else {
            throw KeychainTLV.malformed("the envelope is not the last field")
        }
        let clearHeader = bytes[bytes.startIndex..<(envelope.startIndex - 5)]
        var internet: InternetLocation?
        if fields[7] != nil {
            guard let port = try? fields.int64(8) else {
                throw KeychainTLV.malformed("bad port in header")
            }
            internet = InternetLocation(
                server: try string(7), port: Int(port),
                path: try string(9), internetProtocol: try string(10),
                authenticationType: try string(11), securityDomain: try string(12))
        }
        return SealedItem(
            accessible: accessible,
            key: PrimaryKey(
                accessGroup: try string(2), service: try string(3), account: try string(4),
                synchronizable: sync, internet: internet),
            envelope: Data(envelope), clearHeader: clearHeader)
    }

    /// The cores `openAll` spreads over, asked once (`activeProcessorCount` reads the CPU
    /// affinity at every call).
    private static let processors = ProcessInfo.processInfo.activeProcessorCount

    /// Opens each of `items` with its class key from `keys` (which must hold every one), in
    /// order. Opening is pure CPU, a third of a read-all's own time: a batch of many is opened on
    /// every core.
    static func openAll(_ items: [SealedItem], keys: [ProtectionClass: SecureBytes])
        -> [Result<StoredRecord, KeychainError>]
    {
        let results = OpenedRecords(count: items.count)
        @Sendable func open(_ index: Int) {
            let item = items[index]
            results[index] = Result { () throws(KeychainError) in
                try item.open(key: keys[item.protectionClass]!)
            }
        }
        let lanes = min(processors, items.count / 16)
        if lanes > 1 {
            DispatchQueue.concurrentPerform(iterations: lanes) { lane in
                for index in stride(from: lane, to: items.count, by: lanes) { open(index) }
            }
        } else {
            for index in items.indices { open(index) }
        }
        return results.all
    }

    /// Opens the record; it must describe the same item as the clear header.
    func open(key classKey: SecureBytes) throws(KeychainError) -> StoredRecord {
        // The opened record is decoded at once and its buffer wiped; the item's data leaves as a
        // `Data` copy because the caller asked for it.
        var opened: Result<StoredRecord, KeychainError>?
        do {
            try Envelope.open(
                envelope, key: classKey, associatedData: Self.associatedData(clearHeader),
                decoding: { plaintext in
                    opened = Result { () throws(KeychainError) in
                        try withTransientData(plaintext) { (bytes) throws(KeychainError) in
                            try StoredRecord.decode(bytes)
                        }
                    }
                    return true
                })
        } catch {
            throw KeychainError(KeychainStatus.decode, "the item does not open (\(error.code))")
        }
        let record = try opened!.get()
        guard record.key == key, record.attributes.accessible == accessible else {
            throw KeychainError(
                KeychainStatus.decode, "the sealed record does not match its header")
        }
        return record
    }
}

/// One slot per item, each written by exactly one lane of `SealedItem.openAll` before it returns
/// (so no two threads touch one slot, and every slot is written when `all` is read).
private final class OpenedRecords: @unchecked Sendable {
    private let count: Int
    private let base: UnsafeMutablePointer<Result<StoredRecord, KeychainError>?>

    init(count: Int) {
        self.count = count
        base = .allocate(capacity: max(count, 1))
        base.initialize(repeating: nil, count: max(count, 1))
    }

    subscript(index: Int) -> Result<StoredRecord, KeychainError>? {
        get { base[index] }
        set { base[index] = newValue }
    }

    var all: [Result<StoredRecord, KeychainError>] { (0..<count).map { base[$0]! } }

    deinit {
        base.deinitialize(count: max(count, 1))
        base.deallocate()
    }
}
