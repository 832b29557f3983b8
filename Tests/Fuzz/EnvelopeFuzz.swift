// libFuzzer target: sealed envelopes and the shared TLV record layout (Sources/Sealing).
// Built by scripts/fuzz together with the module's sources; never part of the package build.
import Foundation

private let key = SecureBytes(copying: Data(repeating: 7, count: 32))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    // Any bytes: open refuses or opens; never crashes, never returns what was not sealed.
    if let opened = try? Envelope.open(bytes, key: key, associatedData: Data("ad".utf8)) {
        precondition(opened.count == size - Envelope.overhead)
    }
    _ = try? TLV.fields(bytes, magic: Data(), known: 0...31)
    if let fields = try? TLV.fields(bytes, magic: Data("KBE1".utf8), known: 1...5) {
        _ = try? fields.string(1)
        _ = try? fields.int64(4)
        _ = try? fields.bool(3)
    }
    // Round trip: what is sealed opens to itself.
    let sealed = Envelope.seal(bytes, key: key, associatedData: Data())
    precondition(
        (try? Envelope.open(sealed, key: key, associatedData: Data()) { Data($0) }) == bytes)
    return 0
}
