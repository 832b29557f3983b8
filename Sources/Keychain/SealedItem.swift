import Device
import Dispatch
import Foundation
import Sealing

/// What the Secret Service holds as an item's secret: the item's primary key and class in clear
/// (they are in the clear attributes anyway) and the `StoredRecord` sealed under the class key.
///
/// Format: magic `KSK2`, then `TLV` fields class (1), access group (2), service (3), account (4),
/// synchronizable (5), envelope (6), and for an internet password server (7), port (8), path (9),
/// protocol (10), authentication type (11), security domain (12). The envelope's associated data is `keepsake.keychain.v1`,
/// NUL, and the canonical encoding of the fields but 6: a sealed value moved to another item (another
/// primary key, class or access group — which is the app's id by default) fails to open, and one
/// whose clear header was edited fails too.
struct SealedItem: Equatable {
    static let magic = Data("KSK2".utf8)

    var accessible: Accessibility
    var key: PrimaryKey
    var envelope: Data

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

    private static func associatedData(_ accessible: Accessibility, _ key: PrimaryKey) -> Data {
        Data("keepsake.keychain.v1\0".utf8) + header(accessible, key).bytes
    }

    /// Seals `record` under its class key.
    static func seal(_ record: StoredRecord, key classKey: SecureBytes) -> Data {
        let accessible = record.attributes.accessible
        let envelope = Envelope.seal(
            record.encoded(), key: classKey, associatedData: associatedData(accessible, record.key))
        var out = header(accessible, record.key)
        out.append(6, envelope)
        return out.bytes
    }

    /// Parses the clear header; nothing is opened yet.
    static func parse(_ bytes: Data) throws(KeychainError) -> SealedItem {
        let fields = try KeychainTLV.fields(bytes, magic: magic, knownTags: 1...12)
        func string(_ tag: UInt8) throws(KeychainError) -> String {
            guard let field = fields[tag], let value = String(data: field, encoding: .utf8) else {
                throw KeychainTLV.malformed("missing or invalid header field")
            }
            return value
        }
        guard let accessible = Accessibility(rawValue: try string(1)),
            let sync = fields[5], sync.count == 1, sync.first! <= 1, let envelope = fields[6]
        else { throw KeychainTLV.malformed("bad sealed item header") }
        var internet: InternetLocation?
        if fields[7] != nil {
            guard let port = fields[8], port.count == 8 else {
                throw KeychainTLV.malformed("bad port in header")
            }
            internet = InternetLocation(
                server: try string(7), port: Int(port.reduce(0) { $0 << 8 | Int64($1) }),
                path: try string(9), internetProtocol: try string(10),
                authenticationType: try string(11), securityDomain: try string(12))
        }
        return SealedItem(
            accessible: accessible,
            key: PrimaryKey(
                accessGroup: try string(2), service: try string(3), account: try string(4),
                synchronizable: sync.first! == 1, internet: internet),
            envelope: Data(envelope))
    }

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
        let lanes = min(ProcessInfo.processInfo.activeProcessorCount, items.count / 16)
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
        let opened: Result<StoredRecord, KeychainError>
        do {
            opened = try Envelope.open(
                envelope, key: classKey, associatedData: Self.associatedData(accessible, key)
            ) { plaintext in
                Result { () throws(KeychainError) in try StoredRecord.decode(Data(plaintext)) }
            }
        } catch {
            throw KeychainError(KeychainStatus.decode, "the item does not open (\(error.code))")
        }
        let record = try opened.get()
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
