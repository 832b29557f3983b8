// libFuzzer target: Block Store entry records and device-to-device transfer payloads
// (Sources/BlockStore/Entry.swift, with Sources/Sealing).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let (entry, appID) = try? BlockStoreEntry.decode(bytes) {
        // What decodes re-encodes to something that decodes to the same entry.
        let again = try? BlockStoreEntry.decode(entry.encoded(appID: appID))
        precondition(again?.entry == entry && again?.appID == appID)
    }
    if let entries = try? BlockStoreEntry.decodeTransfer(bytes) {
        precondition(
            (try? BlockStoreEntry.decodeTransfer(BlockStoreEntry.encodeTransfer(entries)))?.count
                == entries.count)
    }
    return 0
}
