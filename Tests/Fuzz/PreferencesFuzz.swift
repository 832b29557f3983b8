// libFuzzer target: preference files (Android's XML) and backup / transfer bundles
// (Sources/Preferences/PreferencesFormats.swift, with Sources/Sealing).
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let values = try? PreferencesXML.parse(bytes) {
        // What is read is written back and read again unchanged, unless it holds characters XML
        // 1.0 cannot carry at all (C0 controls other than tab, line feed, carriage return).
        let carriable = values.allSatisfy { key, value in
            (key + value).unicodeScalars.allSatisfy {
                $0.value >= 0x20 || [9, 10, 13].contains($0.value)
            }
        }
        if carriable {
            precondition((try? PreferencesXML.parse(PreferencesXML.encode(values))) == values)
        }
    }
    if let files = try? BackupBundle.decode(bytes) {
        precondition((try? BackupBundle.decode(BackupBundle.encode(files))) == files)
    }
    return 0
}
