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
}
