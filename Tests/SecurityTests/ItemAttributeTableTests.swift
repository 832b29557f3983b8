import Foundation
import KeepsakeTestSupport
import Testing

@testable import Keychain
@testable import Security

@Suite("One table of item attributes")
struct ItemAttributeTableTests {
    @Test(
        "each field of the table answers to Apple's own kSecAttr… constant, once; the clear index holds exactly the fields a query needs no secret for"
    )
    func table() {
        let constants: [String: CFString] = [
            "service": kSecAttrService, "account": kSecAttrAccount,
            "access group": kSecAttrAccessGroup, "label": kSecAttrLabel,
            "comment": kSecAttrComment, "description": kSecAttrDescription,
            "generic": kSecAttrGeneric, "creator": kSecAttrCreator, "server": kSecAttrServer,
            "port": kSecAttrPort,
            "path": kSecAttrPath, "protocol": kSecAttrProtocol,
            "authentication type": kSecAttrAuthenticationType,
            "security domain": kSecAttrSecurityDomain,
        ]
        #expect(ItemAttribute.all.count == constants.count)
        #expect(Set(ItemAttribute.all.map(\.secKey)).count == ItemAttribute.all.count)
        for attribute in ItemAttribute.all {
            #expect(
                constants[attribute.name].map { $0 as String } == attribute.secKey,
                "\(attribute.name)")
        }
        #expect(
            Set(ItemAttribute.all.filter { !$0.indexed }.map(\.name))
                == ["label", "comment", "description", "generic", "creator"])
    }

    @Test(
        "every descriptive field has a stored-record tag of its own, none the record's own (1–6, 11–22); the primary key and the location have none"
    )
    func recordTags() {
        let tags = ItemAttribute.all.compactMap(\.recordTag)
        #expect(Set(tags).count == tags.count)
        #expect(tags.allSatisfy { (7...10).contains($0) || (23...31).contains($0) })
        for attribute in ItemAttribute.all {
            #expect((attribute.recordTag != nil) == !attribute.indexed, "\(attribute.name)")
        }
    }

    @Test(
        "a stored record keeps every descriptive field through encode and decode, and one tag it does not know is refused"
    )
    func recordRoundTrip() throws {
        var attributes = GenericPasswordAttributes(
            service: "s", account: "a", accessGroup: "g", label: "l", comment: "c",
            itemDescription: "d", generic: Data([1, 2, 3]))
        attributes.creator = 0x6143_7274
        attributes.creationDate = Date(timeIntervalSince1970: 1_700_000_000)
        let record = StoredRecord(id: "id-1", attributes: attributes, data: Data("x".utf8))
        let decoded = try StoredRecord.decode(record.encoded())
        #expect(decoded == record)
        #expect(decoded.attributes.label == "l" && decoded.attributes.generic == Data([1, 2, 3]))
        #expect(decoded.attributes.creator == 0x6143_7274)
        // A field with tag 31 (no attribute's): the record is malformed, not half read.
        var bytes = record.encoded()
        bytes.append(contentsOf: [31, 0, 0, 0, 1, 0x41])
        #expect(throws: KeychainError.self) { try StoredRecord.decode(bytes) }
    }

    @Test(
        "kSecAttrCreator, added by one line of the table: stored, returned as a number, matched, changed, and refused outside 0…2³²−1"
    )
    func creator() throws {
        let keychain = Keychain(
            app: try ThrowawayApp.make(), device: try PrivateSecretService.shared().device())
        try SecurityConfiguration.$current.withValue(keychain) {
            let service = "creator-\(UUID().uuidString)"
            let add: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "a", kSecValueData as String: Data("v".utf8),
                kSecAttrCreator as String: 0x6143_7274,
            ]
            #expect(SecItemAdd(add as CFDictionary, nil) == errSecSuccess)
            func find(_ creator: Int?) -> [String: Any]? {
                var query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword,
                    kSecAttrService as String: service, kSecReturnAttributes as String: true,
                ]
                query[kSecAttrCreator as String] = creator
                var result: CFTypeRef?
                guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess
                else { return nil }
                return result as? [String: Any]
            }
            #expect((find(nil)?[kSecAttrCreator as String] as? NSNumber)?.intValue == 0x6143_7274)
            #expect(find(0x6143_7274) != nil)
            #expect(find(0x6143_7275) == nil)
            let match: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
            ]
            #expect(
                SecItemUpdate(
                    match as CFDictionary, [kSecAttrCreator as String: 7] as CFDictionary)
                    == errSecSuccess)
            #expect(find(7) != nil && find(0x6143_7274) == nil)
            // Through the Swift API, by name.
            let item = try #require(
                try keychain.items(matching: GenericPasswordQuery(service: service)).first)
            #expect(item.attributes.creator == 7)
            var query = GenericPasswordQuery(service: service)
            query.creator = 7
            #expect(try keychain.items(matching: query).count == 1)
            // Outside a four-character code's range, or not a number: errSecParam, nothing added.
            for bad: Any in [-1, 0x1_0000_0000, "aCrt"] {
                var again = add
                again[kSecAttrAccount as String] = "b"
                again[kSecAttrCreator as String] = bad
                #expect(SecItemAdd(again as CFDictionary, nil) == errSecParam, "\(bad)")
            }
            var negative = GenericPasswordAttributes(service: service, account: "c")
            negative.creator = -5
            #expect(throws: KeychainError.self) { try keychain.add(negative, data: Data("v".utf8)) }
        }
    }
}
