import Foundation
import KeepsakeTestSupport
import Keychain
import LocalAuthentication
import Security
import Testing

/// Runs `body` with the SecItem functions acting on a fresh app on the shared private service.
private func withApp<R>(_ body: () throws -> R) throws -> R {
    let keychain = Keychain(
        app: try ThrowawayApp.make(), device: try PrivateSecretService.shared().device())
    return try SecurityConfiguration.$current.withValue(keychain) { try body() }
}

/// Code written the way widely used Swift keychain wrappers write it, against Apple's names:
/// `noErr`, `Data` accounts, access control objects, `kSecUseAuthenticationUI`, the deprecated
/// `Always` classes, numeric match limits, persistent references, other classes.
@Suite("Apple keychain code beyond the basics compiles and behaves as on Apple platforms")
struct AppleCompatibilityTests {
    @Test("noErr, the errSec table and SecCopyErrorMessageString carry Apple's numbers and text")
    func statusTable() {
        #expect(noErr == 0 && errSecSuccess == noErr)
        #expect(errSecItemNotFound == -25300 && errSecDuplicateItem == -25299)
        #expect(errSecMissingEntitlement == -34018 && errSecInteractionNotAllowed == -25308)
        #expect(errSecNoSuchAttr == -25303 && errSecDecode == -26275 && errSecAuthFailed == -25293)
        #expect(
            SecCopyErrorMessageString(errSecDuplicateItem, nil) as String?
                == "The specified item already exists in the keychain.")
        #expect(SecCopyErrorMessageString(-1, nil) as String? == "OSStatus -1")
    }

    @Test(
        "Data for string attributes, string generic, Always classes, UI keys and unknown keys are accepted as Apple accepts them"
    )
    func lenientValues() throws {
        try withApp {
            let service = "svc-\(UUID().uuidString)"
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: Data(service.utf8),
                kSecAttrAccount as String: Data("alice".utf8),
                kSecAttrAccessible as String: kSecAttrAccessibleAlways,
                kSecAttrGeneric as String: "generic",
                kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail,
                kSecValueData as String: Data("secret".utf8),
                "com.example.not-an-apple-key": "ignored",
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == noErr)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: "alice",
                kSecReturnData as String: kCFBooleanTrue!,
                kSecUseOperationPrompt as String: "Unlock",
                kSecUseAuthenticationContext as String: LAContext(),
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == noErr)
            #expect(result as? Data == Data("secret".utf8))
            let always: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service, kSecAttrAccount as String: "bob",
                kSecAttrAccessible as String: kSecAttrAccessibleAlwaysThisDeviceOnly,
                kSecValueData as String: Data("b".utf8),
            ]
            #expect(SecItemAdd(always as CFDictionary, nil) == noErr)

            // Read back as given, as Apple returns them: the Always classes by their own values,
            // attributes given as Data as Data, the others as strings.
            let attributes: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnAttributes as String: true, kSecMatchLimit as String: kSecMatchLimitAll,
            ]
            #expect(SecItemCopyMatching(attributes as CFDictionary, &result) == noErr)
            let items = (result as? [[String: Any]]) ?? []
            let alice = items.first {
                ($0[kSecAttrAccount as String] as? Data) == Data("alice".utf8)
            }
            #expect(alice?[kSecAttrAccessible as String] as? String == "dk")
            #expect(alice?[kSecAttrService as String] as? Data == Data(service.utf8))
            let bob = items.first { ($0[kSecAttrAccount as String] as? String) == "bob" }
            #expect(bob?[kSecAttrAccessible as String] as? String == "dku")
            #expect(bob?[kSecAttrService as String] as? String == service)
            // A query for the Always class finds it; AfterFirstUnlock's does not.
            var byClass = attributes
            byClass[kSecAttrAccessible as String] = kSecAttrAccessibleAlwaysThisDeviceOnly
            #expect(SecItemCopyMatching(byClass as CFDictionary, nil) == noErr)
            byClass[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            #expect(SecItemCopyMatching(byClass as CFDictionary, nil) == errSecItemNotFound)
        }
    }

    @Test("a numeric kSecMatchLimit returns up to that many items, as an array")
    func numericMatchLimit() throws {
        try withApp {
            let service = "svc-\(UUID().uuidString)"
            for account in ["a", "b", "c"] {
                let add: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrService as String: service,
                    kSecAttrAccount as String: account, kSecValueData as String: Data(account.utf8),
                ]
                #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            }
            for (limit, expected) in [(2, 2), (1, 1), (10, 3)] {
                var result: CFTypeRef?
                let query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrService as String: service,
                    kSecMatchLimit as String: limit, kSecReturnAttributes as String: true,
                ]
                #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
                #expect((result as? [[String: Any]])?.count == expected)
            }
        }
    }

    @Test(
        "a persistent reference names exactly one item across restarts, and never another after a delete and re-add"
    )
    func persistentReferences() throws {
        let app = try ThrowawayApp.make()
        let service = "svc-\(UUID().uuidString)"
        var reference: Data?
        SecurityConfiguration.$current.withValue(
            Keychain(app: app, device: try PrivateSecretService.shared().device())
        ) {
            var result: CFTypeRef?
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "alice", kSecValueData as String: Data("one".utf8),
                kSecReturnPersistentRef as String: true,
            ]
            #expect(SecItemAdd(add as CFDictionary, &result) == errSecSuccess)
            reference = result as? Data
        }
        let ref = try #require(reference)
        // A fresh Keychain (as after a restart) finds it by the reference alone.
        try SecurityConfiguration.$current.withValue(
            Keychain(app: app, device: try PrivateSecretService.shared().device())
        ) {
            var result: CFTypeRef?
            let byRef: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecValuePersistentRef as String: ref,
                kSecReturnData as String: true, kSecReturnAttributes as String: true,
                kSecReturnPersistentRef as String: true,
            ]
            #expect(SecItemCopyMatching(byRef as CFDictionary, &result) == errSecSuccess)
            let found = try #require(result as? [String: Any])
            #expect(found[kSecValueData as String] as? Data == Data("one".utf8))
            #expect(found[kSecValuePersistentRef as String] as? Data == ref)
            // Delete and re-add the same primary key: the old reference names nothing.
            #expect(
                SecItemDelete(
                    [
                        kSecClass as String: kSecClassGenericPassword,
                        kSecValuePersistentRef as String: ref,
                    ] as CFDictionary) == errSecSuccess)
            let again: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "alice", kSecValueData as String: Data("two".utf8),
            ]
            #expect(SecItemAdd(again as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemCopyMatching(byRef as CFDictionary, &result) == errSecItemNotFound)
            let garbage: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecValuePersistentRef as String: Data("nonsense".utf8),
            ]
            #expect(SecItemCopyMatching(garbage as CFDictionary, &result) == errSecItemNotFound)
        }
    }

    @Test(
        "other item classes answer as for a keychain holding none; adding one is errSecUnimplemented"
    )
    func otherClasses() throws {
        try withApp {
            for itemClass in [
                kSecClassInternetPassword, kSecClassCertificate, kSecClassKey, kSecClassIdentity,
            ] {
                let query: [String: Any] = [kSecClass as String: itemClass]
                var result: CFTypeRef?
                #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecItemNotFound)
                #expect(SecItemDelete(query as CFDictionary) == errSecItemNotFound)
                #expect(
                    SecItemUpdate(
                        query as CFDictionary, [kSecAttrLabel as String: "x"] as CFDictionary)
                        == errSecItemNotFound)
            }
            let key: [String: Any] = [
                kSecClass as String: kSecClassKey,
                kSecAttrApplicationTag as String: Data("tag".utf8),
                kSecValueData as String: Data("x".utf8),
            ]
            #expect(SecItemAdd(key as CFDictionary, nil) == errSecUnimplemented)
        }
    }

    @Test(
        "access control: a class alone is honoured; SecAccessControlCreateWithFlags refuses bad classes"
    )
    func accessControl() throws {
        try withApp {
            var error: Unmanaged<CFError>?
            let plain = try #require(
                SecAccessControlCreateWithFlags(
                    kCFAllocatorDefault, kSecAttrAccessibleAfterFirstUnlock, [], &error))
            let service = "svc-\(UUID().uuidString)"
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "a", kSecAttrAccessControl as String: plain,
                kSecValueData as String: Data("x".utf8),
            ]
            #expect(
                SecItemAdd(add as CFDictionary, nil) == errSecSuccess,
                "\(SecItemDiagnostics.lastFailure)")
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecReturnAttributes as String: true,
            ]
            #expect(
                SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess,
                "\(SecItemDiagnostics.lastFailure)")
            #expect((result as? [String: Any])?[kSecAttrAccessible as String] as? String == "ck")
            #expect(SecAccessControlCreateWithFlags(nil, "nonsense" as CFString, [], &error) == nil)
            #expect(error?.takeRetainedValue().code == Int(errSecParam))
        }
    }

    @Test(
        "one dictionary for everything (delete then add, update, read): kSecValueData in a query is ignored, return keys in a delete too"
    )
    func oneDictionaryForEverything() throws {
        try withApp {
            let service = "svc-\(UUID().uuidString)"
            // The idiom: the add dictionary, return key and all, deletes what is there first.
            var item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "alice", kSecValueData as String: Data("one".utf8),
                kSecReturnData as String: true,
            ]
            #expect(SecItemDelete(item as CFDictionary) == errSecItemNotFound)
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
            item[kSecValueData as String] = Data("two".utf8)
            #expect(SecItemDelete(item as CFDictionary) == errSecSuccess)
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)

            // A read whose query carries other data still finds the item: never matched by secret.
            var result: CFTypeRef?
            item[kSecValueData as String] = Data("not what is stored".utf8)
            #expect(SecItemCopyMatching(item as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("two".utf8))

            // Locksmith's update: the query is the new add dictionary, the changes the same minus
            // the class.
            var query = item
            query.removeValue(forKey: kSecReturnData as String)
            query[kSecValueData as String] = Data("three".utf8)
            var changes = query
            changes.removeValue(forKey: kSecClass as String)
            #expect(SecItemUpdate(query as CFDictionary, changes as CFDictionary) == errSecSuccess)
            #expect(SecItemCopyMatching(item as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("three".utf8))
            // Return keys still have no place in an update's query.
            #expect(SecItemUpdate(item as CFDictionary, changes as CFDictionary) == errSecParam)
        }
    }

    @Test(
        "dictionaries keyed by the CF constants themselves ([CFString: Any] literals) and [String: any Sendable] ones"
    )
    func otherDictionaryTypes() throws {
        try withApp {
            let service = "svc-\(UUID().uuidString)"
            let add =
                [
                    kSecValueData: Data("token".utf8), kSecClass: kSecClassGenericPassword,
                    kSecAttrService: service, kSecAttrAccount: "github",
                ] as CFDictionary
            #expect(SecItemAdd(add, nil) == errSecSuccess)
            #expect(SecItemAdd(add, nil) == errSecDuplicateItem)
            let read =
                [
                    kSecAttrService: service, kSecAttrAccount: "github",
                    kSecClass: kSecClassGenericPassword, kSecReturnData: true,
                ] as CFDictionary
            var result: AnyObject?
            #expect(SecItemCopyMatching(read, &result) == errSecSuccess)
            #expect(result as? Data == Data("token".utf8))
            let sendable: [String: any Sendable] = [
                kSecClass as String: kSecClassGenericPassword as String,
                kSecAttrService as String: service, kSecAttrAccount as String: "github",
                kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll as String,
            ]
            var all: CFTypeRef?
            #expect(SecItemCopyMatching(sendable as CFDictionary, &all) == errSecSuccess)
            #expect(
                (all as? [[String: Any]])?.first?[kSecAttrAccount as String] as? String == "github")
            let base: [CFString: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService: service,
            ]
            #expect(SecItemDelete(base as CFDictionary) == errSecSuccess)
        }
    }

    @Test(
        "queries built Objective-C style: NSMutableDictionary, setObject(_:forKey: NSCopying), setValue(_:forKey:), results looked up by CF constants"
    )
    func objectiveCStyleDictionaries() throws {
        try withApp {
            let service = "svc-\(UUID().uuidString)"
            // Strongbox's way.
            let add = NSMutableDictionary()
            add.setObject(kSecClassGenericPassword, forKey: kSecClass as! NSCopying)
            add.setObject(service, forKey: kSecAttrService as! NSCopying)
            add.setObject(Data("boxed".utf8), forKey: kSecValueData as! NSCopying)
            #expect(SecItemAdd(add, nil) == errSecSuccess)
            // DAKeychain's way.
            let query = NSMutableDictionary()
            query.setValue(kSecClassGenericPassword, forKey: kSecClass as String)
            query.setValue(service, forKey: kSecAttrService as String)
            query.setValue(kCFBooleanTrue, forKey: kSecReturnData as String)
            query.setValue(kCFBooleanTrue, forKey: kSecReturnAttributes as String)
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query, &result) == errSecSuccess)
            let found = result as? NSDictionary
            #expect(found?.value(forKey: kSecValueData as String) as? Data == Data("boxed".utf8))
            // SwiftKeychainWrapper's way of reading the results: [AnyHashable: Any], looked up
            // with the CF constant itself.
            query.setValue(kSecMatchLimitAll, forKey: kSecMatchLimit as String)
            #expect(SecItemCopyMatching(query, &result) == errSecSuccess)
            let all = result as? [[AnyHashable: Any]]
            #expect(all?.count == 1 && all?[0][kSecAttrService] as? String == service)
            #expect(all?[0][kSecAttrService as String] as? String == service)
            #expect(AnyHashable(kSecAttrAccount) == AnyHashable(kSecAttrAccount as String))
            query.setValue(nil, forKey: kSecMatchLimit as String)
            query.setValue(nil, forKey: kSecReturnAttributes as String)
            #expect(query.count == 3)
            // Locksmith's default service comes from the bundle's identifier key.
            #expect(String(kCFBundleIdentifierKey) == "CFBundleIdentifier")
            #expect(SecItemDelete(query) == errSecSuccess)
        }
    }

    @Test("SecRandomCopyBytes fills with random bytes (LAContext: LocalAuthenticationTests)")
    func random() {
        var a = [UInt8](repeating: 0, count: 32)
        var b = [UInt8](repeating: 0, count: 32)
        #expect(SecRandomCopyBytes(kSecRandomDefault, a.count, &a) == errSecSuccess)
        #expect(SecRandomCopyBytes(kSecRandomDefault, b.count, &b) == errSecSuccess)
        #expect(a != b && a != [UInt8](repeating: 0, count: 32))
    }

    /// The `kSecReturn…` combinations that ask for data, and whether iOS answers with a
    /// dictionary (securityd's `handle_result`: data alone is the data itself, an empty `CFData`
    /// for an item without any; a dictionary holds `kSecValueData` only when the item has data).
    static let dataReturns: [(name: String, keys: [String], dictionary: Bool)] = [
        ("data", [kSecReturnData as String], false),
        ("data + attributes", [kSecReturnData as String, kSecReturnAttributes as String], true),
        (
            "data + persistent ref", [kSecReturnData as String, kSecReturnPersistentRef as String],
            true
        ),
        (
            "data + attributes + persistent ref",
            [
                kSecReturnData as String, kSecReturnAttributes as String,
                kSecReturnPersistentRef as String,
            ], true
        ),
    ]

    @Test(
        "an item added without kSecValueData reads back without kSecValueData, as on iOS (not with an empty one); an item with empty data keeps it; data alone is empty data for both",
        arguments: dataReturns.indices)
    func absentVersusEmptyData(_ index: Int) throws {
        let returns = Self.dataReturns[index]
        try withApp {
            let service = "svc-\(UUID().uuidString)"
            func read(_ account: String) -> (OSStatus, CFTypeRef?) {
                var query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrService as String: service, kSecAttrAccount as String: account,
                ]
                for key in returns.keys { query[key] = kCFBooleanTrue! }
                var result: CFTypeRef?
                return (SecItemCopyMatching(query as CFDictionary, &result), result)
            }
            // Added without data: on the add's own result too.
            var added: CFTypeRef?
            var add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service, kSecAttrAccount as String: "no-data",
            ]
            for key in returns.keys { add[key] = kCFBooleanTrue! }
            #expect(SecItemAdd(add as CFDictionary, &added) == errSecSuccess)
            add[kSecAttrAccount as String] = "empty"
            add[kSecValueData as String] = Data()
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            let (status, found) = read("no-data")
            #expect(status == errSecSuccess)
            let (emptyStatus, empty) = read("empty")
            #expect(emptyStatus == errSecSuccess)
            if returns.dictionary {
                for result in [found, added] {
                    let dictionary = try #require(result as? [String: Any], "\(returns.name)")
                    #expect(dictionary[kSecValueData as String] == nil, "\(returns.name)")
                }
                let dictionary = try #require(empty as? [String: Any])
                #expect(dictionary[kSecValueData as String] as? Data == Data(), "\(returns.name)")
            } else {
                #expect(found as? Data == Data())
                #expect(added as? Data == Data())
                #expect(empty as? Data == Data())
            }
            // An update that gives data makes it an item with data.
            let update: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service, kSecAttrAccount as String: "no-data",
            ]
            #expect(
                SecItemUpdate(
                    update as CFDictionary,
                    [kSecValueData as String: Data("now".utf8)] as CFDictionary)
                    == errSecSuccess)
            let (_, updated) = read("no-data")
            let data =
                returns.dictionary
                ? (updated as? [String: Any])?[kSecValueData as String] as? Data : updated as? Data
            #expect(data == Data("now".utf8), "\(returns.name)")
        }
    }
}
