import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import LocalAuthentication
import Sealing
import Security
import Testing

/// Runs `body` with the SecItem functions acting on a fresh app on a device of its own with the
/// pin 2468 (fast Argon2id: a test device).
private func withPinDevice<R>(_ body: (Device) throws -> R) throws -> R {
    let service = try PrivateSecretService.start()
    let device = service.device(retryPolicy: .fast)
    try device.setLockScreen(.pin, passcode: "2468", currentPasscode: nil)
    let keychain = Keychain(app: try ThrowawayApp.make(), device: device)
    return try withExtendedLifetime(service) {
        try SecurityConfiguration.$current.withValue(keychain) { try body(device) }
    }
}

/// Apple code for items protected by access control and for internet passwords, written as for
/// iOS: `SecAccessControlCreateWithFlags`, an `LAContext` in `kSecUseAuthenticationContext`.
@Suite("SecItem with access control and internet passwords, as Apple code writes them")
struct AppleAccessControlTests {
    private func read(_ account: String, context: LAContext? = nil, ui: CFString? = nil)
        -> (OSStatus, Data?)
    {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: "vault",
            kSecAttrAccount as String: account,
            kSecReturnData as String: true,
            kSecUseOperationPrompt as String: "Open the vault",
        ]
        query[kSecUseAuthenticationContext as String] = context
        query[kSecUseAuthenticationUI as String] = ui
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        return (status, result as? Data)
    }

    private func add(
        _ account: String, _ flags: SecAccessControlCreateFlags, context: LAContext? = nil
    )
        throws -> OSStatus
    {
        var error: Unmanaged<CFError>?
        let access = try #require(
            SecAccessControlCreateWithFlags(
                kCFAllocatorDefault, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags,
                &error))
        var attributes: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: "vault",
            kSecAttrAccount as String: account,
            kSecAttrAccessControl as String: access,
            kSecValueData as String: Data("gold".utf8),
        ]
        attributes[kSecUseAuthenticationContext as String] = context
        return SecItemAdd(attributes as CFDictionary, nil)
    }

    @Test(
        ".userPresence: no context → errSecInteractionNotAllowed, wrong passcode → errSecAuthFailed (counted), right → the data"
    )
    func userPresence() throws {
        try withPinDevice { (device: Device) throws in
            #expect(try add("u", .userPresence) == errSecSuccess)
            #expect(read("u").0 == errSecInteractionNotAllowed)
            #expect(read("u", ui: kSecUseAuthenticationUIFail).0 == errSecInteractionNotAllowed)
            let wrong = LAContext()
            wrong.setDevicePasscode("1111")
            #expect(read("u", context: wrong).0 == errSecAuthFailed)
            #expect(try device.status().failedAttempts == 1)
            let right = LAContext()
            right.setDevicePasscode("2468")
            let (status, data) = read("u", context: right)
            #expect(status == errSecSuccess && data == Data("gold".utf8))
            // The context holds what the proof reported: the wrong passcode before it.
            #expect(
                right.wrongPasscodesNotice?.hasPrefix("1 wrong passcode since your last unlock")
                    == true)
            // Attributes alone need nothing; they carry the item's access control.
            var result: CFTypeRef?
            let attributes: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
                kSecReturnAttributes as String: true,
            ]
            #expect(SecItemCopyMatching(attributes as CFDictionary, &result) == errSecSuccess)
            let control = (result as? [String: Any])?[kSecAttrAccessControl as String]
            #expect(control is SecAccessControl)
        }
    }

    @Test(
        "queries kept as [String: AnyHashable] (Valet's way): access control, context, Bool, Data and String values all read as given"
    )
    func anyHashableQueries() throws {
        try withPinDevice { (device: Device) throws in
            // Valet's SecureEnclave queries, as its Service and SecItem build them.
            var base: [String: AnyHashable] = [
                kSecClass as String: kSecClassGenericPassword as String,
                kSecAttrService as String: "com.example.valet",
                kSecAttrAccessControl as String: SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .userPresence, nil),
            ]
            var add = base
            add[kSecAttrAccount as String] = Data("key".utf8)
            add[kSecValueData as String] = Data("valet secret".utf8)
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecDuplicateItem)

            base.removeValue(forKey: kSecAttrAccessControl as String)
            base[kSecAttrAccount as String] = "key"
            base[kSecMatchLimit as String] = kSecMatchLimitOne as String
            base[kSecReturnData as String] = true
            var result: CFTypeRef?
            #expect(
                SecItemCopyMatching(base as CFDictionary, &result) == errSecInteractionNotAllowed)
            let wrong = LAContext()
            wrong.setDevicePasscode("1357")
            base[kSecUseAuthenticationContext as String] = wrong
            #expect(SecItemCopyMatching(base as CFDictionary, &result) == errSecAuthFailed)
            #expect(try device.status().failedAttempts == 1)
            let context = LAContext()
            context.setDevicePasscode("2468")
            base[kSecUseAuthenticationContext as String] = context
            #expect(SecItemCopyMatching(base as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("valet secret".utf8))

            // Two access controls made alike are equal, as CFEqual finds them; contexts only to
            // themselves.
            #expect(
                SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .userPresence, nil)
                    == SecAccessControlCreateWithFlags(
                        nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, .userPresence, nil))
            #expect(AnyHashable(context) != AnyHashable(LAContext()))

            let delete: [String: AnyHashable] = [
                kSecClass as String: kSecClassGenericPassword as String,
                kSecAttrService as String: "com.example.valet",
            ]
            #expect(SecItemDelete(delete as CFDictionary) == errSecSuccess)
            #expect(SecItemDelete(delete as CFDictionary) == errSecItemNotFound)
        }
    }

    @Test("kSecUseAuthenticationUISkip leaves protected items out of a search")
    func skip() throws {
        try withPinDevice { (_: Device) throws in
            #expect(try add("p", .devicePasscode) == errSecSuccess)
            let plain: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
                kSecAttrAccount as String: "plain", kSecValueData as String: Data("x".utf8),
            ]
            #expect(SecItemAdd(plain as CFDictionary, nil) == errSecSuccess)
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "vault",
                kSecReturnData as String: true, kSecReturnAttributes as String: true,
                kSecMatchLimit as String: kSecMatchLimitAll,
                kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let accounts = (result as? [[String: Any]])?.compactMap {
                $0[kSecAttrAccount as String] as? String
            }
            #expect(accounts == ["plain"])
            #expect(read("p", ui: kSecUseAuthenticationUISkip).0 == errSecItemNotFound)
        }
    }

    @Test(".applicationPassword through LAContext.setCredential: needed to add and to read")
    func applicationPassword() throws {
        try withPinDevice { (_: Device) throws in
            #expect(try add("a", .applicationPassword) == errSecAuthFailed)
            let context = LAContext()
            context.setCredential(Data("hunter2".utf8), type: .applicationPassword)
            #expect(try add("a", .applicationPassword, context: context) == errSecSuccess)
            #expect(read("a").0 == errSecInteractionNotAllowed)
            let wrong = LAContext()
            wrong.setCredential(Data("hunter3".utf8), type: .applicationPassword)
            #expect(read("a", context: wrong).0 == errSecAuthFailed)
            #expect(read("a", context: context).1 == Data("gold".utf8))
            context.invalidate()
            #expect(!context.isCredentialSet(.applicationPassword))
        }
    }

    @Test(
        "internet passwords: add, find by server, attributes, update, delete — and no service attribute"
    )
    func internetPasswords() throws {
        try withPinDevice { (_: Device) throws in
            let add: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword,
                kSecAttrServer as String: "mail.example.com",
                kSecAttrPort as String: 993,
                kSecAttrProtocol as String: kSecAttrProtocolIMAPS,
                kSecAttrAuthenticationType as String: kSecAttrAuthenticationTypeDefault,
                kSecAttrAccount as String: Data("alice".utf8),
                kSecValueData as String: Data("imap secret".utf8),
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecDuplicateItem)
            var other = add
            other[kSecAttrPort as String] = 143
            other[kSecAttrProtocol as String] = kSecAttrProtocolIMAP
            #expect(SecItemAdd(other as CFDictionary, nil) == errSecSuccess)

            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword,
                kSecAttrServer as String: "mail.example.com",
                kSecAttrProtocol as String: kSecAttrProtocolIMAPS,
                kSecReturnAttributes as String: true, kSecReturnData as String: true,
            ]
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
            let item = try #require(result as? [String: Any])
            #expect(item[kSecClass as String] as? String == kSecClassInternetPassword as String)
            #expect(item[kSecAttrPort as String] as? Int == 993)
            // Given as Data, returned as Data (as Apple returns it).
            #expect(item[kSecAttrAccount as String] as? Data == Data("alice".utf8))
            #expect(item[kSecValueData as String] as? Data == Data("imap secret".utf8))
            #expect(item[kSecAttrService as String] == nil)

            let generic: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrAccount as String: "alice",
            ]
            #expect(SecItemCopyMatching(generic as CFDictionary, nil) == errSecItemNotFound)
            var withService = add
            withService[kSecAttrService as String] = "svc"
            #expect(SecItemAdd(withService as CFDictionary, nil) == errSecNoSuchAttr)

            let update: [String: Any] = [kSecValueData as String: Data("new secret".utf8)]
            // Return keys have no place in an update's query (errSecParam, as on Apple platforms).
            #expect(SecItemUpdate(query as CFDictionary, update as CFDictionary) == errSecParam)
            var match = query
            match[kSecReturnAttributes as String] = nil
            match[kSecReturnData as String] = nil
            #expect(SecItemUpdate(match as CFDictionary, update as CFDictionary) == errSecSuccess)
            let search: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword,
                kSecAttrServer as String: "mail.example.com", kSecAttrPort as String: 993,
                kSecReturnData as String: true,
            ]
            #expect(SecItemCopyMatching(search as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("new secret".utf8))
            let all: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword,
                kSecAttrServer as String: "mail.example.com",
            ]
            #expect(SecItemDelete(all as CFDictionary) == errSecSuccess)
            #expect(SecItemCopyMatching(all as CFDictionary, nil) == errSecItemNotFound)
            var badPort = add
            badPort[kSecAttrPort as String] = "993"
            #expect(SecItemAdd(badPort as CFDictionary, nil) == errSecParam)
        }
    }
}
