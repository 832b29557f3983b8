import CloudAccount
import Foundation

/// One synchronizable item as it travels inside its sealed cloud object (`KeychainSync`): its
/// primary key, when it was last modified, and its record — none for a tombstone. Device-free, so
/// the decoder builds alone for the fuzzer (`scripts/fuzz`, target keychain-record).
struct SyncedItem: Codable, Equatable {
    var accessGroup: String
    var service: String
    var account: String
    /// Internet passwords only: a generic password's object has no `internet` key at all.
    var internet: InternetLocation?
    var modified: Int64
    /// The device that wrote it (absent in objects written before writers were recorded).
    var writer: String?
    var deleted: Bool
    var record: Data?  // StoredRecord encoding, absent for a tombstone

    /// Its place in the one conflict rule (`SyncVersion`).
    var version: SyncVersion { SyncVersion(modified: modified, writer: writer ?? "") }

    init(item record: StoredRecord, modified: Int64, writer: String) {
        accessGroup = record.key.accessGroup
        service = record.key.service
        account = record.key.account
        internet = record.key.internet
        self.modified = modified
        self.writer = writer
        deleted = false
        self.record = record.encoded()
    }

    init(tombstoneFor item: SyncedItem, modified: Int64, writer: String) {
        accessGroup = item.accessGroup
        service = item.service
        account = item.account
        internet = item.internet
        self.modified = modified
        self.writer = writer
        deleted = true
        record = nil
    }

    var key: PrimaryKey {
        PrimaryKey(
            accessGroup: accessGroup, service: service, account: account, synchronizable: true,
            internet: internet)
    }

    func encoded() -> Data {
        // Strings, integers, a Bool and base64: nothing here can fail to encode.
        try! JSONEncoder().encode(self)
    }

    /// Decodes and checks: a tombstone carries no record, an item carries one that decodes, is
    /// synchronizable, not `…ThisDeviceOnly`, and has this same primary key.
    static func decode(_ json: Data) throws(KeychainError) -> SyncedItem {
        guard let item = try? JSONDecoder().decode(SyncedItem.self, from: json),
            item.deleted == (item.record == nil)
        else { throw KeychainError(KeychainStatus.decode, "a synced item does not decode") }
        _ = try item.storedRecord()
        return item
    }

    /// Whether this is not a tombstone and carries `record`'s attributes and secret (the local
    /// item id aside, which each device picks for itself).
    func holds(_ record: StoredRecord) throws(KeychainError) -> Bool {
        guard var theirs = try storedRecord() else { return false }
        theirs.id = record.id
        return theirs == record
    }

    /// The item's record, checked against its envelope; nil for a tombstone.
    func storedRecord() throws(KeychainError) -> StoredRecord? {
        guard let record else { return nil }
        let stored = try StoredRecord.decode(record)
        guard stored.attributes.synchronizable, !stored.attributes.accessible.isThisDeviceOnly,
            ExactNames.equal(stored.key.accessGroup, accessGroup),
            ExactNames.equal(stored.key.service, service),
            ExactNames.equal(stored.key.account, account), stored.key.internet == internet
        else {
            throw KeychainError(KeychainStatus.decode, "a synced item does not match its envelope")
        }
        return stored
    }
}
