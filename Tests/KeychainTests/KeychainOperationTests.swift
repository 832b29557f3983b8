import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import Testing

/// `Fixtures/keychain/operations.json`: Apple's generic-password rules as a table.
struct KeychainCase: Decodable, CustomTestStringConvertible, Sendable {
    struct Item: Decodable, Sendable {
        var account: String
        var group: String?
        var sync: String?
        var accessible: String?
        var label: String?
        var comment: String?
        var data: String?
        var dataHex: String?
        var dataSize: Int?
    }
    struct Query: Decodable, Sendable {
        var account: String?
        var group: String?
        var sync: String?
        var accessible: String?
        var label: String?
    }
    struct Changes: Decodable, Sendable {
        var account: String?
        var group: String?
        var sync: String?
        var data: String?
    }
    struct After: Decodable, Sendable {
        var query: Query
        var limit: String?
        var status: Int32?
        var items: [String]?
    }
    var name: String
    var setup: [Item]
    var op: String
    var item: Item?
    var query: Query?
    var changes: Changes?
    var limit: String?
    var status: Int32
    var items: [String]?
    var after: After?

    var testDescription: String { name }
}

private struct CaseFile: Decodable { var cases: [KeychainCase] }

/// The operation table; a missing, undecodable or short fixture fails the table loudly.
private func cases() throws -> [KeychainCase] {
    try fixtureTable(CaseFile.self, "keychain/operations.json", \.cases, atLeast: 30)
}

/// Runs one case against a fresh service name on the shared Secret Service in memory (the table
/// tests Keepsake's rules; the provider-neutral suites run the same calls on each provider).
private struct CaseRunner {
    let keychain: Keychain
    let service: String
    let groups: [String: String]

    init() throws {
        let app = try ThrowawayApp.make()
        groups = ["G1": app.id + ".g1", "G2": app.id + ".g2"]
        let entitled = try App(
            id: app.id, container: app.container, accessGroups: [groups["G1"]!, groups["G2"]!])
        keychain = Keychain(
            app: entitled, device: InMemorySecretService.shared.device())
        service = "svc-" + UUID().uuidString
    }

    func group(_ name: String?) -> String? { name.map { groups[$0] ?? $0 } }

    func attributes(_ item: KeychainCase.Item) -> GenericPasswordAttributes {
        GenericPasswordAttributes(
            service: service, account: item.account, accessGroup: group(item.group),
            synchronizable: item.sync == "yes",
            accessible: item.accessible.flatMap(Accessibility.init(rawValue:)) ?? .whenUnlocked,
            label: item.label, comment: item.comment)
    }

    func data(_ item: KeychainCase.Item) -> Data {
        if let hexString = item.dataHex { return fromHex(hexString) }
        if let size = item.dataSize { return Data(repeating: 0x5a, count: size) }
        return Data((item.data ?? "").utf8)
    }

    func query(_ query: KeychainCase.Query) -> GenericPasswordQuery {
        let sync: SynchronizableMatch =
            switch query.sync {
            case "yes": .yes
            case "any": .any
            default: .no
            }
        return GenericPasswordQuery(
            service: service, account: query.account, accessGroup: group(query.group),
            synchronizable: sync,
            accessible: query.accessible.flatMap(Accessibility.init(rawValue:)),
            label: query.label)
    }

    func add(_ item: KeychainCase.Item) throws {
        if item.sync == "any" {
            // Not expressible in the typed API (a Bool); the Apple surface's test covers it.
            throw KeychainError(KeychainStatus.param)
        }
        try keychain.add(attributes(item), data: data(item))
    }

    func render(_ item: GenericPasswordItem) -> String {
        let name = groups.first { $0.value == item.attributes.accessGroup }?.key ?? "?"
        let data = item.data ?? Data()
        let text = String(data: data, encoding: .utf8)
        let printable = text.map { !$0.unicodeScalars.contains { $0.value < 0x20 } } ?? false
        return "\(item.attributes.account)@\(name)\(item.attributes.synchronizable ? "+sync" : "")="
            + (printable ? text! : "hex:" + hex(data))
    }

    func read(_ query: KeychainCase.Query, limit: String?) throws -> [String] {
        try keychain.items(matching: self.query(query), limit: limit == "all" ? .all : .one)
            .map(render)
    }
}

@Suite(
    "Keychain rules from Fixtures/keychain/operations.json (on a Secret Service in memory)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct KeychainOperationTests {
    @Test("fixture case", arguments: try cases())
    func run(_ testCase: KeychainCase) throws {
        let runner = try CaseRunner()
        for item in testCase.setup { try runner.add(item) }
        var items: [String]?
        func perform() throws {
            switch testCase.op {
            case "add": try runner.add(testCase.item!)
            case "get": items = try runner.read(testCase.query!, limit: testCase.limit)
            case "update":
                let c = testCase.changes!
                try runner.keychain.update(
                    matching: runner.query(testCase.query!),
                    with: GenericPasswordChanges(
                        account: c.account, accessGroup: runner.group(c.group),
                        synchronizable: c.sync.map { $0 == "yes" },
                        data: c.data.map { Data($0.utf8) }))
            case "delete": try runner.keychain.delete(matching: runner.query(testCase.query!))
            default: Issue.record("unknown op \(testCase.op)")
            }
        }
        var message = ""
        let result = status {
            do { try perform() } catch {
                message = "\(error)"
                throw error
            }
        }
        #expect(result.rawValue == testCase.status, "\(message)")
        if let expected = testCase.items { #expect(items == expected) }
        if let after = testCase.after {
            var afterItems: [String]?
            let afterStatus = status {
                afterItems = try runner.read(after.query, limit: after.limit)
            }
            #expect(afterStatus.rawValue == after.status ?? 0)
            if let expected = after.items { #expect(afterItems == expected) }
        }
    }

    @Test("the fixture file has cases")
    func fixturesLoaded() throws { #expect(try cases().count >= 30) }
}
