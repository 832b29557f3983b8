import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Testing

@testable import Keychain

/// A name is its bytes, as in Apple's Keychain: `"caf\u{E9}"` (é precomposed) and `"cafe\u{301}"`
/// (e and a combining accent) are canonically equivalent — Swift's `==` calls them equal — and
/// are two names, two items, everywhere an item's fields are compared.
@Suite("A name is its bytes: canonically equivalent names are two items")
struct ExactNameTests {
    static let composed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    private static func keychain(groups: [String]? = nil) throws -> Keychain {
        Keychain(
            app: try ThrowawayApp.make(accessGroups: groups),
            device: try PrivateSecretService.shared().device())
    }

    private static func read(_ keychain: Keychain, _ service: String) throws -> String? {
        try keychain.dataIfPresent(matching: GenericPasswordQuery(service: service, account: "a"))
            .map { String(decoding: $0, as: UTF8.self) }
    }

    @Test("the names compare unequal as the Keychain's own types, and hash apart")
    func typesCompareBytes() {
        #expect(Self.composed == Self.decomposed)  // Swift's String: canonical equivalence
        let one = GenericPasswordQuery(service: Self.composed, account: "a")
        let two = GenericPasswordQuery(service: Self.decomposed, account: "a")
        #expect(one != two)
        #expect(Set([one, two]).count == 2)
        let keyOne = PrimaryKey(
            accessGroup: "g", service: Self.composed, account: "a", synchronizable: false)
        let keyTwo = PrimaryKey(
            accessGroup: "g", service: Self.decomposed, account: "a", synchronizable: false)
        #expect(Set([keyOne, keyTwo]).count == 2)
        #expect(
            InternetLocation(server: Self.composed) != InternetLocation(server: Self.decomposed))
        #expect(
            !one.matches(GenericPasswordAttributes(service: Self.decomposed, account: "a")))
    }

    @Test(
        "add, read (cold and cached), search, update and delete each reach only the item with the same bytes"
    )
    func twoItems() throws {
        let keychain = try Self.keychain()
        try keychain.add(
            GenericPasswordAttributes(service: Self.composed, account: "a"),
            data: Data("VICTIM's secret".utf8))
        #expect(try Self.read(keychain, Self.composed) == "VICTIM's secret")  // now cached
        try keychain.add(
            GenericPasswordAttributes(service: Self.decomposed, account: "a"),
            data: Data("ATTACKER's secret".utf8))
        for _ in 0..<2 {  // the second time from the read cache
            #expect(try Self.read(keychain, Self.composed) == "VICTIM's secret")
            #expect(try Self.read(keychain, Self.decomposed) == "ATTACKER's secret")
        }
        // A search of every item lists both; a search by one name finds that one only.
        let all = try keychain.items(
            matching: GenericPasswordQuery(), limit: .all, returnData: false)
        let services = all.map { Array($0.attributes.service.utf8) }
        #expect(services.contains(Array(Self.composed.utf8)))
        #expect(services.contains(Array(Self.decomposed.utf8)))
        let found = try keychain.items(
            matching: GenericPasswordQuery(service: Self.decomposed), limit: .all)
        #expect(found.map(\.data) == [Data("ATTACKER's secret".utf8)])
        // An update and a delete by one name leave the other item as it was.
        try keychain.update(
            matching: GenericPasswordQuery(service: Self.decomposed, account: "a"),
            with: GenericPasswordChanges(data: Data("CHANGED".utf8)))
        #expect(try Self.read(keychain, Self.composed) == "VICTIM's secret")
        try keychain.delete(matching: GenericPasswordQuery(service: Self.decomposed, account: "a"))
        #expect(try Self.read(keychain, Self.composed) == "VICTIM's secret")
        #expect(try Self.read(keychain, Self.decomposed) == nil)
        try keychain.delete(matching: GenericPasswordQuery(service: Self.composed, account: "a"))
    }

    @Test("an app entitled to one access group reaches no item of a canonically equivalent group")
    func accessGroups() throws {
        let owner = try Self.keychain(groups: [Self.decomposed])
        try owner.add(
            GenericPasswordAttributes(service: "s", account: "a", accessGroup: Self.decomposed),
            data: Data("OWNER".utf8))
        let other = Keychain(
            app: try ThrowawayApp.make(accessGroups: [Self.composed]), device: owner.device)
        #expect(
            try other.dataIfPresent(matching: GenericPasswordQuery(service: "s", account: "a"))
                == nil)
        #expect(
            throws: KeychainError.self,
            performing: {
                try other.add(
                    GenericPasswordAttributes(
                        service: "s", account: "a", accessGroup: Self.decomposed),
                    data: Data("x".utf8))
            })
    }
}
