// libFuzzer target: recovery hint JSON (Sources/RecoveryHint/RecoveryHint.swift).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let hint = try? RecoveryHint.decode(json: bytes) {
        // Accepted hints are valid and survive their own canonical form.
        precondition((try? hint.validate()) != nil)
        precondition((try? RecoveryHint.decode(json: hint.json())) == hint)
    }
    return 0
}
