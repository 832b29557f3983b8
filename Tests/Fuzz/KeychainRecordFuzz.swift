// libFuzzer target: the Keychain's stored item records (Sources/Keychain/StoredRecord.swift).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let record = try? StoredRecord.decode(bytes) {
        precondition((try? StoredRecord.decode(record.encoded())) == record)
    }
    return 0
}
