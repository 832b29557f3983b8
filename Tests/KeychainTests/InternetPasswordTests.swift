import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Keychain

@Suite("Internet passwords: Apple's attributes and primary key on the same sealed engine")
struct InternetPasswordTests {
    private func keychain() throws -> Keychain {
        Keychain(
            app: try ThrowawayApp.make(),
            device: try PrivateSecretService.shared().device(retryPolicy: .fast))
    }

    private func site(
        _ server: String, port: Int = 443, path: String = "/", account: String = "alice"
    ) -> GenericPasswordAttributes {
        GenericPasswordAttributes(
            account: account,
            internet: InternetLocation(
                server: server, port: port, path: path, internetProtocol: "htps",
                authenticationType: "form", securityDomain: ""))
    }

    @Test(
        "the primary key is account + server + port + path + protocol + authentication type + security domain"
    )
    func primaryKey() throws {
        let keychain = try keychain()
        let server = "example-\(UUID().uuidString).com"
        try keychain.add(site(server), data: Data("one".utf8))
        #expect(
            status { try keychain.add(site(server), data: Data("two".utf8)) }
                == KeychainStatus.duplicateItem)
        try keychain.add(site(server, port: 8443), data: Data("other port".utf8))
        try keychain.add(site(server, path: "/admin"), data: Data("other path".utf8))
        var other = site(server)
        other.internet?.securityDomain = "realm"
        try keychain.add(other, data: Data("other realm".utf8))

        let all = try keychain.items(
            matching: GenericPasswordQuery(itemClass: .internetPassword, server: server),
            limit: .all)
        #expect(all.count == 4)
        #expect(
            try keychain.data(
                matching: GenericPasswordQuery(
                    itemClass: .internetPassword, server: server, port: 8443))
                == Data("other port".utf8))
        #expect(
            try keychain.data(
                matching: GenericPasswordQuery(
                    itemClass: .internetPassword, server: server, securityDomain: "realm"))
                == Data("other realm".utf8))
        // Classes do not see each other.
        #expect(
            status {
                _ = try keychain.items(
                    matching: GenericPasswordQuery(account: "alice"), limit: .all)
            } == KeychainStatus.itemNotFound)
        let item = all.first {
            $0.attributes.internet?.port == 443 && $0.attributes.internet?.path == "/"
                && $0.attributes.internet?.securityDomain == ""
        }
        #expect(item?.attributes.internet?.internetProtocol == "htps")
        #expect(item?.attributes.internet?.authenticationType == "form")
        #expect(item?.attributes.itemClass == .internetPassword)
    }

    @Test("update moves an internet password to another server; delete removes only what matches")
    func updateAndDelete() throws {
        let keychain = try keychain()
        let server = "move-\(UUID().uuidString).com"
        try keychain.add(site(server), data: Data("pw".utf8))
        try keychain.add(site(server, account: "bob"), data: Data("bob".utf8))
        try keychain.update(
            matching: GenericPasswordQuery(
                account: "alice", itemClass: .internetPassword, server: server),
            with: GenericPasswordChanges(server: "new-" + server, port: 444))
        #expect(
            try keychain.data(
                matching: GenericPasswordQuery(
                    itemClass: .internetPassword, server: "new-" + server, port: 444))
                == Data("pw".utf8))
        // Moving onto an existing primary key is a duplicate and changes nothing.
        #expect(
            status {
                try keychain.update(
                    matching: GenericPasswordQuery(
                        account: "bob", itemClass: .internetPassword, server: server),
                    with: GenericPasswordChanges(
                        account: "alice", server: "new-" + server, port: 444))
            } == KeychainStatus.duplicateItem)
        // A service is not an attribute of internet passwords.
        #expect(
            status {
                try keychain.update(
                    matching: GenericPasswordQuery(itemClass: .internetPassword, server: server),
                    with: GenericPasswordChanges(service: "x"))
            } == KeychainStatus.noSuchAttribute)
        try keychain.delete(
            matching: GenericPasswordQuery(itemClass: .internetPassword, server: server))
        #expect(
            try keychain.items(
                matching: GenericPasswordQuery(
                    itemClass: .internetPassword, server: "new-" + server)
            ).count == 1)
    }

    @Test("bad input: a port outside 0…65535, generic attributes on an internet password")
    func badInput() throws {
        let keychain = try keychain()
        var attributes = site("bad.example", port: 70000)
        #expect(status { try keychain.add(attributes, data: Data()) } == KeychainStatus.param)
        attributes = site("bad.example")
        attributes.service = "svc"
        #expect(
            status { try keychain.add(attributes, data: Data()) } == KeychainStatus.noSuchAttribute)
        #expect(
            status {
                _ = try keychain.items(matching: GenericPasswordQuery(server: "bad.example"))
            } == KeychainStatus.noSuchAttribute)
    }

    @Test(
        "in the Secret Service: an index of Apple's attributes (secret-tool search server S), the secret sealed"
    )
    func storedForm() throws {
        let keychain = try keychain()
        let server = "index-\(UUID().uuidString).com"
        try keychain.add(site(server), data: Data("sealed internet secret".utf8))
        let found = try keychain.secretService.search([
            "xdg:schema": "org.keepsake.InternetPassword", "server": server, "port": "443",
            "protocol": "htps", "account": "alice",
        ])
        #expect(found.unlocked.count == 1)
        let secret = try keychain.secretService.secrets(at: found.unlocked)[found.unlocked[0]]!
        #expect(secret.range(of: Data("sealed internet secret".utf8)) == nil)
        // The sealed header binds the whole primary key: the same bytes under another server's
        // index do not open as that item.
        var sealed = try SealedItem.parse(secret)
        sealed.key.internet?.server = "elsewhere.example"
        #expect(
            status { _ = try sealed.open(key: try keychain.device.classKey(.whenUnlocked)) }
                == KeychainStatus.decode)
    }

    @Test(
        "a wipe leaves no item of either class, nor of a store the device never heard of (every schema in the namespace the device erases), and every item outside that namespace"
    )
    func wipe() throws {
        let schemas = [SecretServiceSchema.name, SecretServiceSchema.internetName]
        for schema in schemas { #expect(schema.hasPrefix(Device.schemaNamespace)) }
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let device = service.device(retryPolicy: .fast)
        let keychain = Keychain(app: try ThrowawayApp.make(), device: device)
        let generic = GenericPasswordAttributes(service: "wiped", account: "alice")
        try keychain.add(generic, data: Data("g".utf8))
        try keychain.add(site("wiped.example"), data: Data("i".utf8))
        let connection = service.connection()
        // A store this device has never heard of names its schema under the namespace too.
        _ = try connection.createItem(
            label: "later", attributes: ["xdg:schema": "org.keepsake.LaterStore"],
            secret: Data("later".utf8))
        // The user's own items: two of schemas whose names only start alike, one of no schema.
        let others = ["org.example.Note", "org.keepsakeish.Note", "org.keepsake"]
        for schema in others {
            _ = try connection.createItem(
                label: schema, attributes: ["xdg:schema": schema], secret: Data("mine".utf8))
        }
        let run = UUID().uuidString
        _ = try connection.createItem(
            label: "no schema", attributes: ["run": run], secret: Data("mine".utf8))
        try device.wipe()
        for schema in schemas + ["org.keepsake.Device", "org.keepsake.LaterStore"] {
            #expect(try connection.search(["xdg:schema": schema]).unlocked.isEmpty, "\(schema)")
        }
        for schema in others {
            #expect(try connection.search(["xdg:schema": schema]).unlocked.count == 1, "\(schema)")
        }
        #expect(try connection.search(["run": run]).unlocked.count == 1)
        // The same item again on the device that follows: nothing of the last one is in its way.
        try keychain.add(generic, data: Data("again".utf8))
    }
}
