// libFuzzer target: Auto Backup rule XML (Sources/Preferences/BackupRules.swift).
import Foundation

private let files = [
    "shared_prefs/recovery_hint.xml", "files/a", "databases/d.db", "device/files/x",
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let configuration = try? BackupConfiguration.parse(bytes) {
        for transfer in [false, true] {
            for e2ee in [false, true] {
                let selected = configuration.select(
                    files, forTransfer: transfer, endToEndEncryption: e2ee)
                // A selection never invents a path.
                precondition(selected.allSatisfy(files.contains))
            }
        }
    }
    return 0
}
