import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Keychain

/// A phone: its own Secret Service, a device with fast Argon2id, one app.
private struct Phone {
    let service: PrivateSecretService
    let device: Device
    let keychain: Keychain
    let clock = ManualClock()

    /// `savesAfterEveryChange`: for a test that reads the provider's file on disk.
    init(app: App? = nil, savesAfterEveryChange: Bool = false) throws {
        service = try PrivateSecretService.start(savesAfterEveryChange: savesAfterEveryChange)
        device = service.device(retryPolicy: .fast, clock: clock)
        keychain = Keychain(app: try app ?? ThrowawayApp.make(), device: device)
    }

    func add(_ account: String, _ accessible: Accessibility, _ data: String) throws {
        try keychain.add(
            GenericPasswordAttributes(service: "table", account: account, accessible: accessible),
            data: Data(data.utf8))
    }

    /// "ok:<data>" or the status.
    func read(_ account: String) -> String {
        var result = ""
        let code = status {
            result = String(
                decoding: try keychain.data(
                    matching: GenericPasswordQuery(service: "table", account: account)),
                as: UTF8.self)
        }
        return code == .success ? "ok:" + result : "\(code)"
    }
}

@Suite("Data-protection classes enforced by keys (the iOS table)")
struct DataProtectionTests {
    let denied = "\(KeychainStatus.interactionNotAllowed)"

    @Test(
        "with a pin: after reboot neither class reads; after unlock both; after lock only AfterFirstUnlock; after another reboot neither"
    )
    func iosTable() throws {
        let phone = try Phone()
        try phone.device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try phone.add("afu", .afterFirstUnlock, "A")
        try phone.add("wu", .whenUnlocked, "W")
        try phone.add("afu-tdo", .afterFirstUnlockThisDeviceOnly, "AT")
        try phone.add("wu-tdo", .whenUnlockedThisDeviceOnly, "WT")
        try phone.add("pc", .whenPasscodeSetThisDeviceOnly, "P")
        let accounts = ["afu", "wu", "afu-tdo", "wu-tdo", "pc"]

        try phone.device.reboot()
        #expect(accounts.map(phone.read) == Array(repeating: denied, count: 5))
        // Writing needs the class key too.
        #expect(
            status { try phone.add("new", .afterFirstUnlock, "x") }
                == KeychainStatus.interactionNotAllowed)
        #expect(
            status {
                try phone.keychain.update(
                    matching: GenericPasswordQuery(service: "table", account: "wu"),
                    with: GenericPasswordChanges(data: Data("changed".utf8)))
            } == KeychainStatus.interactionNotAllowed)

        try phone.device.unlock(passcode: "1234")
        #expect(accounts.map(phone.read) == ["ok:A", "ok:W", "ok:AT", "ok:WT", "ok:P"])

        try phone.device.lock()
        #expect(accounts.map(phone.read) == ["ok:A", denied, "ok:AT", denied, denied])

        try phone.device.reboot()
        #expect(accounts.map(phone.read) == Array(repeating: denied, count: 5))
    }

    @Test("a wrong pin answers errSecAuthFailed and the next attempt waits")
    func wrongPin() throws {
        let phone = try Phone()
        try phone.device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try phone.device.reboot()
        #expect(status { try phone.device.unlock(passcode: "4321") } == KeychainStatus.authFailed)
        try phone.device.unlock(passcode: "1234")
        #expect(phone.clock.slept == .milliseconds(300))  // the earned delay, sat out
    }

    @Test("WhenPasscodeSet cannot be added without a knowledge factor")
    func passcodeSetNeedsPasscode() throws {
        let phone = try Phone()
        #expect(
            status { try phone.add("pc", .whenPasscodeSetThisDeviceOnly, "P") }
                == KeychainStatus.authFailed)
        try phone.device.setLockScreen(.swipe, passcode: nil, currentPasscode: nil)
        #expect(
            status { try phone.add("pc", .whenPasscodeSetThisDeviceOnly, "P") }
                == KeychainStatus.authFailed)
        #expect(try phone.keychain.secretService.search(["service": "table"]).unlocked.isEmpty)
    }

    @Test("removing the pin deletes WhenPasscodeSet items and makes the rest readable")
    func removingPin() throws {
        let phone = try Phone()
        try phone.device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try phone.add("afu", .afterFirstUnlock, "A")
        try phone.add("wu", .whenUnlocked, "W")
        try phone.add("pc", .whenPasscodeSetThisDeviceOnly, "P")
        try phone.device.lock()
        let change = try phone.device.setLockScreen(.none, passcode: nil, currentPasscode: "1234")
        #expect(change.knowledgeFactorRemoved)
        try Keychain.deleteItemsRequiringPasscode(on: phone.device)
        try phone.device.reboot()
        #expect(
            ["afu", "wu", "pc"].map(phone.read) == [
                "ok:A", "ok:W", "\(KeychainStatus.itemNotFound)",
            ])
        #expect(
            try phone.keychain.secretService.search(["service": "table", "accessible": "akpu"])
                .unlocked.isEmpty)
    }

    @Test("changing the passcode re-encrypts no item")
    func passcodeChangeKeepsItems() throws {
        let phone = try Phone()
        try phone.device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try phone.add("afu", .afterFirstUnlock, "A")
        let connection = phone.keychain.secretService
        let paths = try connection.search(["service": "table"]).unlocked
        let before = try connection.secrets(at: paths)
        try phone.device.setLockScreen(.password, passcode: "a longer one", currentPasscode: "1234")
        #expect(try connection.secrets(at: paths) == before)
        try phone.device.reboot()
        try phone.device.unlock(passcode: "a longer one")
        #expect(phone.read("afu") == "ok:A")
    }

    @Test("a scan of the raw Secret Service values never finds an item's plaintext")
    func rawScan() throws {
        let phone = try Phone(savesAfterEveryChange: true)
        try phone.device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let secrets = (0..<5).map { "plaintext-secret-\($0)-\(UUID().uuidString)" }
        for (index, secret) in secrets.enumerated() {
            try phone.add("a\(index)", Accessibility.allCases[index], secret)
        }
        // An independent client: secret-tool reads every secret of the collection. On KWallet
        // under load it now and then lists the items without their secrets (its GetSecrets
        // call fails and it prints what it has): asked again, up to 3 times.
        var dump = Data()
        for _ in 0..<3 {
            dump = try Spawn.capture(
                "/usr/bin/secret-tool", ["search", "--all", "--unlock", "service", "table"],
                environment: phone.service.environment
            ).stdout
            if String(decoding: dump, as: UTF8.self).contains("secret = ") { break }
        }
        #expect(String(decoding: dump, as: UTF8.self).contains("secret = KSK2"))
        // And every raw value, read over D-Bus.
        let connection = phone.keychain.secretService
        let raw = try connection.secrets(at: try connection.search(["service": "table"]).unlocked)
        #expect(raw.count == 5)
        for secret in secrets {
            #expect(dump.range(of: Data(secret.utf8)) == nil)
            #expect(raw.values.allSatisfy { $0.range(of: Data(secret.utf8)) == nil })
        }
        // Nor does the provider's file on disk.
        for file in try phone.service.storageFiles() {
            let bytes = try Data(contentsOf: file)
            for secret in secrets { #expect(bytes.range(of: Data(secret.utf8)) == nil) }
        }
    }

    @Test("a sealed value moved to another item, class or app fails to open")
    func movedValues() throws {
        let phone = try Phone()
        let other = Keychain(app: try ThrowawayApp.make(), device: phone.device)
        try phone.add("alice", .afterFirstUnlock, "alice's")
        try phone.add("bob", .afterFirstUnlock, "bob's")
        try other.add(
            GenericPasswordAttributes(
                service: "table", account: "carol", accessible: .afterFirstUnlock),
            data: Data("carol's".utf8))
        let connection = phone.keychain.secretService
        func path(_ account: String) throws -> ItemPath {
            try connection.search(["service": "table", "account": account]).unlocked[0]
        }
        func rawSecret(_ account: String) throws -> Data {
            try connection.secrets(at: [try path(account)]).values.first!
        }
        // Swap bob's sealed value into alice's item (same app, same class).
        let alicesPath = try path("alice")
        let bobsSecret = try rawSecret("bob")
        try overwriteSecret(connection, at: alicesPath, with: bobsSecret)
        #expect(phone.read("alice") == "\(KeychainStatus.decode)")
        // Another app's value moved in: fails as well.
        let bobsPath = try path("bob")
        try overwriteSecret(connection, at: bobsPath, with: try rawSecret("carol"))
        #expect(phone.read("bob") == "\(KeychainStatus.decode)")
        // Never wrong bytes: the other items still read their own.
        #expect(
            String(
                decoding: try other.data(
                    matching: GenericPasswordQuery(service: "table", account: "carol")),
                as: UTF8.self) == "carol's")
        // A value sealed under one class whose clear header is edited to claim another (so that it
        // would open with a key that is available while locked) fails too.
        try phone.add("dave", .whenUnlocked, "dave's")
        var raw = [UInt8](try rawSecret("dave"))
        let classField = raw.firstIndex(of: UInt8(ascii: "a"))!  // KSK2 · tag 1 · length · "ak"
        #expect(Array(raw[classField...(classField + 1)]) == Array("ak".utf8))
        raw[classField] = UInt8(ascii: "c")
        try overwriteSecret(connection, at: try path("dave"), with: Data(raw))
        #expect(phone.read("dave") == "\(KeychainStatus.decode)")
    }
}

extension DataProtectionTests {
    @Test("a sealed item copied into another device's Secret Service fails to open there")
    func movedToAnotherDevice() throws {
        let phone = try Phone()
        let other = try Phone(app: phone.keychain.app)  // the same app on another device
        try phone.add("alice", .afterFirstUnlock, "alice's")
        try other.add("alice", .afterFirstUnlock, "the other device's")
        func path(_ connection: SecretServiceConnection) throws -> ItemPath {
            try connection.search(["service": "table", "account": "alice"]).unlocked[0]
        }
        let source = phone.keychain.secretService
        let stolen = try source.secrets(at: [try path(source)]).values.first!
        let target = other.keychain.secretService
        try overwriteSecret(target, at: try path(target), with: stolen)
        #expect(other.read("alice") == "\(KeychainStatus.decode)")
        #expect(phone.read("alice") == "ok:alice's")
    }
}

/// Replaces the secret of the item at `path` in place (`Item.SetSecret`), keeping its
/// attributes, as an attacker with Secret Service access could — on every provider (KeePassXC
/// answers `CreateItem` with replace by a new item or a prompt).
func overwriteSecret(_ connection: SecretServiceConnection, at path: ItemPath, with secret: Data)
    throws
{
    try connection.replaceItem(at: path, secret: secret)
}

/// An item's attributes, read with gdbus (an independent client).
func secretToolAttributes(_ connection: SecretServiceConnection, _ path: ItemPath) throws
    -> [String: String]
{
    var environment = ProcessInfo.processInfo.environment
    environment["DBUS_SESSION_BUS_ADDRESS"] = connection.busAddress
    let found = try Spawn.capture(
        "/usr/bin/gdbus",
        [
            "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path",
            path.rawValue, "--method", "org.freedesktop.DBus.Properties.Get",
            "org.freedesktop.Secret.Item", "Attributes",
        ], environment: environment)
    let text = String(decoding: found.stdout, as: UTF8.self)
    // (<{'service': 'table', 'account': 'alice', …}>,)
    var attributes: [String: String] = [:]
    let pattern = try NSRegularExpression(pattern: "'([^']*)': '([^']*)'")
    for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
        let key = String(text[Range(match.range(at: 1), in: text)!])
        let value = String(text[Range(match.range(at: 2), in: text)!])
        attributes[key] = value
    }
    return attributes
}

private struct MalformedEnvelopeFile: Decodable {
    struct Case: Decodable {
        var name: String
        var envelope: String
        var error: String
    }
    struct Malformed: Decodable { var cases: [Case] }
    var malformed: Malformed
}

@Suite("Malformed sealed items answer errSecDecode")
struct MalformedSealedItemTests {
    @Test(
        "every malformed envelope of Fixtures/sealing/envelopes.json, put in a real item, answers errSecDecode"
    )
    func malformedEnvelopes() throws {
        let cases = try loadFixture(MalformedEnvelopeFile.self, "sealing/envelopes.json").malformed
            .cases
        let service = try PrivateSecretService.shared()
        let keychain = Keychain(app: try ThrowawayApp.make(), device: service.device())
        let name = UUID().uuidString
        try keychain.add(
            GenericPasswordAttributes(service: name, account: "victim"), data: Data("v".utf8))
        let connection = keychain.secretService
        let path = try connection.search(["service": name]).unlocked[0]
        let original = try connection.secrets(at: [path])[path]!
        let sealed = try SealedItem.parse(original)
        for testCase in cases {
            // The genuine clear header, with the malformed envelope in place of the real one.
            var bytes = original
            bytes.removeLast(sealed.envelope.count + 5)
            var tlv = [UInt8(6)]
            withUnsafeBytes(of: UInt32(testCase.envelope.count / 2).bigEndian) { tlv += $0 }
            bytes += tlv + fromHex(testCase.envelope)
            try overwriteSecret(connection, at: path, with: bytes)
            var code = KeychainStatus.success
            do {
                _ = try keychain.data(
                    matching: GenericPasswordQuery(service: name, account: "victim"))
            } catch {
                code = error.status
            }
            #expect(code == KeychainStatus.decode, "\(testCase.name)")
        }
        // Truncated and extended sealed items, too.
        for bytes in [original.dropLast(1), original + Data([0]), original.prefix(10), Data()] {
            try overwriteSecret(connection, at: path, with: Data(bytes))
            var code = KeychainStatus.success
            do {
                _ = try keychain.data(
                    matching: GenericPasswordQuery(service: name, account: "victim"))
            } catch {
                code = error.status
            }
            #expect(code == KeychainStatus.decode)
        }
    }
}

@Suite("Sealed Keychain items refuse every tampering")
struct SealedItemTamperTests {
    @Test(
        "every single-bit flip, truncation and extension of a sealed item is refused, and so is the item under another class key",
        arguments: [Accessibility.whenUnlocked, .afterFirstUnlockThisDeviceOnly])
    func everyFlip(_ accessible: Accessibility) throws {
        var attributes = GenericPasswordAttributes(
            service: "wallet", account: "alice", accessible: accessible)
        attributes.accessGroup = "com.example.wallet"
        attributes.label = "Alice's wallet"
        let record = StoredRecord(
            id: "item-1", attributes: attributes, data: Data("correct horse battery".utf8))
        let classKey = SecureBytes(randomCount: Envelope.keyLength)
        let sealed = SealedItem.seal(record, key: classKey)
        #expect(try SealedItem.parse(sealed).open(key: classKey) == record)
        var cases = 0
        var refused = 0
        func expectRefused(_ bytes: Data, key: SecureBytes = classKey) {
            cases += 1
            do { _ = try SealedItem.parse(bytes).open(key: key) } catch { refused += 1 }
        }
        for damaged in Tampered.singleBitFlips(of: sealed) { expectRefused(damaged) }
        for damaged in Tampered.truncationsAndExtension(of: sealed) { expectRefused(damaged) }
        // Another device or class:
        expectRefused(sealed, key: SecureBytes(randomCount: Envelope.keyLength))
        // The clear header is authenticated as stored: its fields reordered (the same values), or
        // the envelope moved before them, do not open either.
        let fields = try TLV.fields(sealed, magic: SealedItem.magic, known: 1...12)
        func sealedItem(inOrder tags: [UInt8]) -> Data {
            var out = TLV(magic: SealedItem.magic)
            for tag in tags { out.append(tag, fields[tag]!) }
            return out.bytes
        }
        expectRefused(sealedItem(inOrder: [2, 1, 3, 4, 5, 6]))
        expectRefused(sealedItem(inOrder: [6, 1, 2, 3, 4, 5]))
        #expect(
            try SealedItem.parse(sealedItem(inOrder: [1, 2, 3, 4, 5, 6])).open(key: classKey)
                == record)
        #expect(refused == cases)
        print("tamper: sealed Keychain item (\(accessible)), \(refused) of \(cases) cases refused")
    }
}
