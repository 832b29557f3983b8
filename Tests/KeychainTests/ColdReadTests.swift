import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import SecretService
import Testing

/// A process's first read: the device record comes in the same `GetSecrets` as the item, at the
/// path it was last found at (noted in the device directory), with no search of its own; a noted
/// path that went, names another item or is not a path falls back to the search.
@Suite(
    "A cold read fetches the device record with the item (on a Secret Service in memory)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct ColdReadTests {
    let service = InMemorySecretService()
    let app: App
    let query = GenericPasswordQuery(service: "cold", account: "a")

    init() throws {
        app = try ThrowawayApp.make()
        try Keychain(app: app, device: service.device("d")).add(
            GenericPasswordAttributes(service: "cold", account: "a"), data: Data("secret".utf8))
    }

    /// Reads the item as a new process would (a new device on the same directory), and the
    /// calls the read made.
    private func coldRead() throws -> (data: Data, calls: [String]) {
        service.forgetCalls()
        let data = try Keychain(app: app, device: service.device("d")).data(matching: query)
        return (data, service.calls)
    }

    private var notedPathFile: URL {
        service.device("d").directory.appendingPathComponent("record-path")
    }

    /// An item in another collection, which is then locked: reading it is refused.
    private func lockedItemElsewhere() throws -> ItemPath {
        let other = CollectionPath("/org/freedesktop/secrets/collection/other")
        let path = try service.createItem(
            label: "elsewhere", attributes: ["k": "v"], secret: Data("x".utf8), replacing: false,
            in: other)
        try service.lock(other)
        return path
    }

    @Test("one search (the item's) and one GetSecrets (the item and the record)")
    func oneRoundTripEach() throws {
        let (data, calls) = try coldRead()
        #expect(data == Data("secret".utf8))
        #expect(calls == ["search org.keepsake.GenericPassword", "secrets 2"])
    }

    @Test(
        "a noted path that went, names another item, is not a path, lies in a locked collection or holds another device's record: the record is searched for, the read answers, the note is mended",
        arguments: ["went", "another item", "not a path", "locked elsewhere", "another device's"])
    func badNote(_ kind: String) throws {
        let recordPath = try String(contentsOf: notedPathFile, encoding: .utf8)
        let itemPath = try #require(
            service.search(["service": "cold"], in: .default).unlocked.first)
        let note: String =
            switch kind {
            case "went": recordPath + "999"
            case "another item": itemPath.rawValue
            case "locked elsewhere": try lockedItemElsewhere().rawValue
            case "another device's":
                // The record at the path is not the device noted in this directory.
                try { () throws -> String in
                    try Data(String(repeating: "ab", count: 16).utf8).write(
                        to: notedPathFile.deletingLastPathComponent().appendingPathComponent(
                            "device-id"))
                    return recordPath
                }()
            default: "../../etc/passwd"
            }
        try Data(note.utf8).write(to: notedPathFile)
        let (data, calls) = try coldRead()
        #expect(data == Data("secret".utf8))
        #expect(calls.contains("search org.keepsake.Device"))
        #expect(try String(contentsOf: notedPathFile, encoding: .utf8) == recordPath)
        #expect(try coldRead().calls == ["search org.keepsake.GenericPassword", "secrets 2"])
    }
}
