// libFuzzer target: the cloud account's key blob (Sources/Device/AccountKeyBlob.swift), the one
// object a cloud holds outside a seal.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let blob = AccountKeyBlob.parse(bytes) {
        // Accepted blobs have a usable salt and a bounded cost, and survive their own encoding.
        precondition(blob.salt.count == KeyDerivation.saltLength && blob.cost.isWithinBounds)
        precondition(AccountKeyBlob.parse(blob.encoded()) == blob)
    }
    return 0
}
