// libFuzzer target: Apple-compatible query dictionaries (Sources/Security/QueryDictionary.swift,
// with the Keychain's value types). The input picks keys (Apple's kSec… names and stray strings)
// and values of every type the bridge can carry.
import Foundation

private let keys: [String] = [
    kSecClass, kSecAttrService, kSecAttrAccount, kSecAttrAccessGroup, kSecAttrSynchronizable,
    kSecAttrAccessible, kSecAttrLabel, kSecAttrComment, kSecAttrDescription, kSecAttrGeneric,
    kSecValueData, kSecReturnData, kSecReturnAttributes, kSecMatchLimit,
    kSecUseDataProtectionKeychain,
    kSecAttrAccessControl, kSecReturnRef, "bogus", "",
].map { $0 as String }
private let strings: [String] = [
    kSecClassGenericPassword, kSecClassInternetPassword, kSecAttrSynchronizableAny,
    kSecMatchLimitOne,
    kSecMatchLimitAll, kSecAttrAccessibleAfterFirstUnlock, "ak", "zz", "",
].map { $0 as String }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var dictionary: [String: Any] = [:]
    var index = 0
    while index + 2 < bytes.count {
        let key = keys[Int(bytes[index]) % keys.count]
        let kind = bytes[index + 1] % 7
        let length = Int(bytes[index + 2]) % 16
        let payload = Array(
            bytes[min(index + 3, bytes.count)..<min(index + 3 + length, bytes.count)])
        index += 3 + length
        let value: Any =
            switch kind {
            case 0: strings[Int(payload.first ?? 0) % strings.count]
            case 1: String(decoding: payload, as: UTF8.self)
            case 2: Data(payload)
            case 3: NSNumber(value: (payload.first ?? 0) & 1 == 1)
            case 4: NSNumber(value: Int(payload.first ?? 0))
            case 5: NSNumber(value: Double(payload.first ?? 0) / 3)
            default: [payload.first ?? 0] as NSArray
            }
        dictionary[key] = value
    }
    guard let parsed = try? QueryDictionary(dictionary as NSDictionary) else { return 0 }
    for purpose in [QueryDictionary.Purpose.add, .query, .update, .delete, .changes] {
        _ = try? parsed.checkKeys(for: purpose)
        _ = try? parsed.checkClass(for: purpose)
    }
    _ = try? parsed.persistentID()
    _ = try? parsed.query()
    _ = try? parsed.attributes()
    _ = try? parsed.changes()
    _ = try? parsed.matchLimit()
    return 0
}
