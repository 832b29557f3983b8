// libFuzzer target: the key-value store's stored JSON — the cloud object's entries and the local
// cache (Sources/KeyValueStore/StoredValues.swift). Both are sealed, so they decode only after
// authentication; a member of the account could still write any JSON.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let entries = try? KVEntry.decode(bytes) {
        // Accepted keys are within Apple's limits; the canonical form is a fixed point.
        precondition(entries.keys.allSatisfy(KVQuota.allows(key:)))
        _ = KVQuota.allows(entries)
        let once = KVEntry.encode(entries)
        precondition(KVEntry.encode(try! KVEntry.decode(once)) == once)
    }
    if let snapshot = try? KVSnapshot.decode(bytes) {
        let once = snapshot.encoded()
        precondition((try! KVSnapshot.decode(once)).encoded() == once)
    }
    return 0
}
