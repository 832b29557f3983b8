// libFuzzer target: the Keychain's stored item records (Sources/Keychain/StoredRecord.swift) and
// synchronizable items as they travel in the cloud (Sources/Keychain/SyncedItem.swift).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let record = try? StoredRecord.decode(bytes) {
        precondition((try? StoredRecord.decode(record.encoded())) == record)
        if record.attributes.synchronizable, !record.attributes.accessible.isThisDeviceOnly {
            let item = SyncedItem(item: record, modified: 1, writer: "fuzz")
            precondition((try? SyncedItem.decode(item.encoded())) == item)
        }
    }
    if let item = try? SyncedItem.decode(bytes) {
        // An accepted synced item carries a record exactly when it is not a tombstone, and that
        // record is its own primary key's.
        let record = try? item.storedRecord()
        precondition(item.deleted == (record == nil))
        precondition(
            record.map { $0.key.service == item.service && $0.key.account == item.account } ?? true)
        precondition((try? SyncedItem.decode(item.encoded())) == item)
    }
    return 0
}
