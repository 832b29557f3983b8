import Foundation
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
            "generic": kSecAttrGeneric, "server": kSecAttrServer, "port": kSecAttrPort,
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
                == ["label", "comment", "description", "generic"])
    }

    @Test(
        "every descriptive field has a stored-record tag of its own, none the record's own (1–6, 11–22); the primary key and the location have none"
    )
    func recordTags() {
        let tags = ItemAttribute.all.compactMap(\.recordTag)
        #expect(Set(tags).count == tags.count)
        #expect(tags.allSatisfy { (7...10).contains($0) || (23...31).contains($0) })
        for attribute in ItemAttribute.all {
            #expect(attribute.recordKept == !(attribute.indexed), "\(attribute.name)")
        }
    }

    @Test(
        "a stored record keeps every descriptive field through encode and decode, and one tag it does not know is refused"
    )
    func recordRoundTrip() throws {
        var attributes = GenericPasswordAttributes(
            service: "s", account: "a", accessGroup: "g", label: "l", comment: "c",
            itemDescription: "d", generic: Data([1, 2, 3]))
        attributes.creationDate = Date(timeIntervalSince1970: 1_700_000_000)
        let record = StoredRecord(id: "id-1", attributes: attributes, data: Data("x".utf8))
        let decoded = try StoredRecord.decode(record.encoded())
        #expect(decoded == record)
        #expect(decoded.attributes.label == "l" && decoded.attributes.generic == Data([1, 2, 3]))
        // A field with tag 31 (no attribute's): the record is malformed, not half read.
        var bytes = record.encoded()
        bytes.append(contentsOf: [31, 0, 0, 0, 1, 0x41])
        #expect(throws: KeychainError.self) { try StoredRecord.decode(bytes) }
    }
}
