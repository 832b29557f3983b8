import Foundation
import KeepsakeTestSupport
import Keychain
import Security
import Testing

/// Runs `body` with the SecItem functions acting on a fresh app on the shared private service.
private func withFreshApp<R>(_ body: () throws -> R) throws -> R {
    let keychain = Keychain(
        app: try ThrowawayApp.make(), device: try PrivateSecretService.shared().device())
    return try SecurityConfiguration.$current.withValue(keychain) { try body() }
}

@Suite("Apple-source-compatible SecItem API")
struct SecItemTests {
    @Test("typical Apple keychain code compiles and behaves the same")
    func appleStyleHelper() throws {
        try withFreshApp {
            let helper = AppleStyleKeychainHelper(service: "com.example.\(UUID().uuidString)")
            #expect(helper.read(account: "alice") == nil)
            #expect(helper.save(Data("one".utf8), account: "alice") == errSecSuccess)
            #expect(helper.read(account: "alice") == Data("one".utf8))
            #expect(helper.save(Data("two".utf8), account: "alice") == errSecSuccess)
            #expect(helper.read(account: "alice") == Data("two".utf8))
            #expect(helper.save(Data("b".utf8), account: "bob") == errSecSuccess)
            #expect(helper.allAccounts() == ["alice", "bob"])
            #expect(helper.exists(account: "bob"))
            #expect(helper.delete(account: "alice") == errSecSuccess)
            #expect(helper.delete(account: "alice") == errSecItemNotFound)
            #expect(!helper.exists(account: "alice"))
            #expect(
                helper.message(for: errSecItemNotFound)
                    == "The specified item could not be found in the keychain.")
        }
    }

    @Test(
        "kSecReturnAttributes with kSecReturnData returns one dictionary with the data under kSecValueData"
    )
    func attributesAndData() throws {
        try withFreshApp {
            let service = UUID().uuidString
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "a", kSecAttrLabel as String: "Label",
                kSecAttrSynchronizable as String: kCFBooleanTrue!,
                kSecValueData as String: Data([1, 2]),
                kSecAttrGeneric as String: Data([9]),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
                kSecReturnAttributes as String: true, kSecReturnData as String: true,
            ]
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let item = try #require(result as? [String: Any])
            #expect(item[kSecAttrAccount as String] as? String == "a")
            #expect(item[kSecAttrLabel as String] as? String == "Label")
            #expect(item[kSecAttrSynchronizable as String] as? Bool == true)
            #expect(
                item[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked
                    as String)
            #expect(item[kSecValueData as String] as? Data == Data([1, 2]))
            #expect(item[kSecAttrGeneric as String] as? Data == Data([9]))
            #expect(item[kSecAttrCreationDate as String] is Date)
        }
    }

    @Test("kSecReturnData with kSecMatchLimitAll returns an array of data")
    func allData() throws {
        try withFreshApp {
            let service = UUID().uuidString
            for account in ["a", "b"] {
                let add: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrService as String: service,
                    kSecAttrAccount as String: account, kSecValueData as String: Data(account.utf8),
                ]
                #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            }
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnData as String: true, kSecMatchLimit as String: kSecMatchLimitAll,
            ]
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            #expect(result as? [Data] == [Data("a".utf8), Data("b".utf8)])
        }
    }

    /// Bad input: the status Apple answers, and nothing written.
    nonisolated(unsafe) static let badAdds: [(String, [String: Any], OSStatus)] = [
        (
            "service given as data that is not UTF-8", [kSecAttrService as String: Data([0xFF])],
            errSecParam
        ),
        ("a kSec key where it does not belong", [kSecMatchLimit as String: 2], errSecParam),
        ("data given as a string", [kSecValueData as String: "secret"], errSecParam),
        (
            "synchronizable given as a string", [kSecAttrSynchronizable as String: "yes"],
            errSecParam
        ),
        (
            "synchronizable any on add",
            [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny], errSecParam
        ),
        ("unknown accessibility", [kSecAttrAccessible as String: "zz"], errSecParam),
        (
            "synchronizable this-device-only",
            [
                kSecAttrSynchronizable as String: true,
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
            ], errSecParam
        ),
        ("NUL in the account", [kSecAttrAccount as String: "a\u{0}b"], errSecParam),
        ("oversize secret", [kSecValueData as String: Data(count: 65537)], errSecParam),
        (
            "access control that is not a SecAccessControl", [kSecAttrAccessControl as String: "x"],
            errSecParam
        ),
        (
            "an attribute Keepsake does not store", [kSecAttrIsNegative as String: true],
            errSecUnimplemented
        ),
        (
            "unentitled access group", [kSecAttrAccessGroup as String: "other.group"],
            errSecMissingEntitlement
        ),
        ("match limit on add", [kSecMatchLimit as String: kSecMatchLimitAll], errSecParam),
    ]

    @Test(
        "bad input to SecItemAdd gets the precise status and writes nothing",
        arguments: badAdds.indices)
    func badAdd(_ index: Int) throws {
        let (_, extra, expected) = Self.badAdds[index]
        try withFreshApp {
            let service = UUID().uuidString
            var add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "a", kSecValueData as String: Data("v".utf8),
            ]
            add.merge(extra) { $1 }
            #expect(SecItemAdd(add as CFDictionary, nil) == expected)
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test("classes other than generic and internet passwords are refused")
    func otherClasses() throws {
        try withFreshApp {
            let certificate: [String: Any] = [
                kSecClass as String: kSecClassCertificate, kSecAttrAccount as String: "a",
            ]
            #expect(SecItemAdd(certificate as CFDictionary, nil) == errSecUnimplemented)
            let unknown: [String: Any] = [kSecClass as String: "nope"]
            #expect(SecItemCopyMatching(unknown as CFDictionary, nil) == errSecParam)
            let missing: [String: Any] = [kSecAttrAccount as String: "a"]
            #expect(SecItemDelete(missing as CFDictionary) == errSecParam)
            let numeric: [String: Any] = [kSecClass as String: 7]
            #expect(SecItemDelete(numeric as CFDictionary) == errSecParam)
        }
    }

    @Test("SecItemUpdate refuses return keys in the query and unknown keys in the changes")
    func badUpdates() throws {
        try withFreshApp {
            let service = UUID().uuidString
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecValueData as String: Data("v".utf8),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
            ]
            var withReturn = query
            withReturn[kSecReturnData as String] = true
            #expect(
                SecItemUpdate(
                    withReturn as CFDictionary, [kSecAttrLabel as String: "x"] as CFDictionary)
                    == errSecParam)
            #expect(
                SecItemUpdate(query as CFDictionary, ["bogus": 1] as CFDictionary) == errSecParam)
            #expect(
                SecItemUpdate(
                    query as CFDictionary,
                    [kSecClass as String: kSecClassGenericPassword] as CFDictionary) == errSecParam)
            #expect(SecItemUpdate(query as CFDictionary, [:] as CFDictionary) == errSecParam)
            var read = query
            read[kSecReturnData as String] = true
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(read as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("v".utf8))
        }
    }
}
