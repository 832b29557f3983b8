import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import RecoveryHint
import SecretService
import Synchronization
import Testing

struct HintJSONCase: Decodable, Sendable, CustomTestStringConvertible {
    var json: String
    var canonical: String?
    var error: String?
    var testDescription: String { json }
}
private struct HintJSONFile: Decodable { var cases: [HintJSONCase] }
private func jsonCases() throws -> [HintJSONCase] {
    try fixtureTable(HintJSONFile.self, "hint/json.json", \.cases, atLeast: 5)
}

/// A phone with the linux hint profile for one app.
struct HintPhone {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }
    let app: App

    init(cloud: URL? = nil, timeout: Duration = .seconds(5)) throws {
        service = try PrivateSecretService.start()
        account = service.account(cloud: cloud, timeout: timeout, retryPolicy: .fast)
        app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
    }

    func hints() throws -> RecoveryHintService {
        try RecoveryHintService.make(profile: .linux, app: app, account: account)
    }
}

@Suite("Recovery hint model")
struct RecoveryHintModelTests {
    @Test("hint JSON is decoded strictly", arguments: try jsonCases())
    func decoding(_ c: HintJSONCase) {
        do {
            let hint = try RecoveryHint.decode(json: Data(c.json.utf8))
            #expect(c.error == nil)
            #expect(String(decoding: hint.json(), as: UTF8.self) == c.canonical)
        } catch {
            let expected: HintError.Code = c.error == "malformed" ? .malformed : .invalidField
            #expect(error.code == expected)
        }
    }

    @Test("merging keeps the fields not given")
    func merging() {
        let current = RecoveryHint(
            lastAuthenticatorId: "a", lastWallet: testWallet("w"), lastLoginAt: 1)
        #expect(
            current.merging(RecoveryHint(lastWallet: testWallet("w2")))
                == RecoveryHint(
                    lastAuthenticatorId: "a", lastWallet: testWallet("w2"), lastLoginAt: 1))
    }
}

@Suite("Recovery hint: dual write, read either, the facade (linux profile)")
struct RecoveryHintServiceTests {
    @Test("set writes both stores and reports each; get reads the primary; clear removes both")
    func dualWrite() throws {
        let phone = try HintPhone()
        let hints = try phone.hints()
        let hint = RecoveryHint(
            lastAuthenticatorId: "passkey-7", lastWallet: demoWallet, lastLoginAt: 1_795_000_000_000
        )
        let outcomes = try hints.set(hint)
        #expect(
            outcomes.map(\.store) == ["keychain", "blockstore"]
                && outcomes.allSatisfy { $0.succeeded })
        #expect(try hints.get().hint == hint)
        #expect(try hints.get().source == "keychain")
        #expect(try hints.primary!.read() == hint)
        #expect(try hints.fallback.read() == hint)
        let cleared = hints.clear()
        #expect(cleared.allSatisfy { $0.succeeded })
        #expect(try hints.get().hint == .empty)
        #expect(try hints.fallback.read() == nil)
    }

    @Test("an empty hint is refused and the stored hint is untouched")
    func emptyRefused() throws {
        let phone = try HintPhone()
        let hints = try phone.hints()
        try hints.set(RecoveryHint(lastWallet: testWallet("kept")))
        #expect(throws: HintError(.empty, "")) { try hints.set(.empty) }
        do {
            try hints.set(.empty)
        } catch {
            #expect(error.message == "Refusing to persist an empty recovery hint")
        }
        #expect(throws: HintError(.empty, "")) { try hints.update(.empty) }
        #expect(try hints.get().hint == RecoveryHint(lastWallet: testWallet("kept")))
    }

    @Test("invalid fields are refused with a clear error and nothing is written")
    func invalidFields() throws {
        let phone = try HintPhone()
        let hints = try phone.hints()
        try hints.set(RecoveryHint(lastWallet: testWallet("kept")))
        #expect(throws: HintError(.invalidField, "")) {
            try hints.update(RecoveryHint(lastLoginAt: -1))
        }
        #expect(throws: HintError(.invalidField, "")) {
            try hints.update(RecoveryHint(lastWallet: String(repeating: "x", count: 300)))
        }
        #expect(try hints.get().hint == RecoveryHint(lastWallet: testWallet("kept")))
    }

    @Test(
        "the field limit is 256 bytes of UTF-8, bidirectional controls are refused, a key given twice is refused"
    )
    func exactLimits() throws {
        func valid(_ id: String) -> Bool {
            (try? RecoveryHint(lastAuthenticatorId: id).validate()) != nil
        }
        #expect(valid(String(repeating: "a", count: 256)))
        #expect(!valid(String(repeating: "a", count: 257)))
        #expect(valid(String(repeating: "\u{E9}", count: 128)))  // 256 bytes
        #expect(!valid(String(repeating: "\u{E9}", count: 129)))  // 129 characters, 258 bytes
        // One character of 20,000 combining marks (40 KB) is far over, as its bytes say.
        #expect(!valid("e" + String(repeating: "\u{301}", count: 20_000)))
        #expect(!valid("passkey\u{202E}1-yek"))  // a right-to-left override
        #expect(!valid("\u{2067}passkey"))  // an isolate
        #expect(valid("passkey-\u{1F511}"))
        #expect(throws: HintError(.malformed, "")) {
            try RecoveryHint.decode(
                json: Data(#"{"lastAuthenticatorId":"a","lastAuthenticatorId":"b"}"#.utf8))
        }
        #expect(throws: HintError(.invalidField, "")) {
            try RecoveryHint.decode(json: Data(#"{"lastAuthenticatorId":{"x":1}}"#.utf8))
        }
    }

    @Test("when the primary is gone, the fallback answers")
    func fallbackWhenPrimaryMissing() throws {
        let phone = try HintPhone()
        let hints = try phone.hints()
        try hints.set(RecoveryHint(lastWallet: testWallet("w")))
        try hints.primary!.clear()
        #expect(try hints.get().hint == RecoveryHint(lastWallet: testWallet("w")))
        #expect(try hints.get().source == "blockstore")
    }

    @Test("a frozen Secret Service fails the primary within its bound; the fallback stays readable")
    func frozenPrimary() throws {
        let phone = try HintPhone(timeout: .milliseconds(700))
        let hints = try phone.hints()
        try hints.set(RecoveryHint(lastWallet: testWallet("still here")))
        phone.service.freeze()
        defer { phone.service.thaw() }
        let start = ContinuousClock.now
        #expect(try hints.get().hint == RecoveryHint(lastWallet: testWallet("still here")))
        #expect(try hints.get().source == "blockstore")
        #expect(
            ContinuousClock.now - start
                < Pace.allowance(bound: .milliseconds(1400), slack: .seconds(1)))
    }

    @Test("Block Store unavailable: the Keychain alone keeps the hint")
    func blockStoreUnavailable() throws {
        let phone = try HintPhone()
        try phone.device.updateSettings { $0.blockStoreAvailable = false }
        let hints = try phone.hints()
        let outcomes = try hints.set(RecoveryHint(lastWallet: testWallet("w")))
        #expect(
            outcomes.first { $0.store == "blockstore" }?.error?.contains("FEATURE_NOT_SUPPORTED")
                == true)
        #expect(outcomes.first { $0.store == "keychain" }?.succeeded == true)
        #expect(try hints.get().hint == RecoveryHint(lastWallet: testWallet("w")))
    }

    @Test(
        "the facade never throws: it merges on set, answers empty on failure and logs what it swallowed"
    )
    func facade() throws {
        let phone = try HintPhone(timeout: .milliseconds(500))
        let logged = Mutex<[String]>([])
        let facade = RecoveryHints(service: try phone.hints()) { line in
            logged.withLock { $0.append(line) }
        }
        #expect(facade.get() == .empty)
        facade.set(lastWallet: demoWallet)
        facade.set(lastAuthenticatorId: "passkey-7")
        facade.set(lastLoginAt: 1_795_000_000_000)
        #expect(
            facade.get()
                == RecoveryHint(
                    lastAuthenticatorId: "passkey-7", lastWallet: demoWallet,
                    lastLoginAt: 1_795_000_000_000))
        facade.set(RecoveryHint())  // empty: swallowed, logged, nothing changed
        #expect(facade.get().lastWallet == demoWallet)
        #expect(logged.withLock { $0 }.contains { $0.contains("empty") })
        facade.clear()
        #expect(facade.get() == .empty)
        // Both stores unreachable: still no throw, the empty hint, and a log line.
        phone.service.kill()
        let freshDevice = phone.service.device(
            "cold", timeout: .milliseconds(500), tuning: .fast)
        let cold = RecoveryHints(
            service: try RecoveryHintService.make(
                profile: .linux, app: phone.app, device: freshDevice)
        ) { line in logged.withLock { $0.append(line) } }
        #expect(cold.get() == .empty)
        cold.set(lastWallet: testWallet("x"))
        cold.clear()
        #expect(logged.withLock { $0 }.contains { $0.contains("get failed") })
        #expect(!logged.withLock { $0 }.contains { $0.contains("0x8A") })
    }

    @Test("the hint survives uninstall and reinstall")
    func uninstallReinstall() throws {
        let phone = try HintPhone()
        RecoveryHints(service: try phone.hints()).set(lastWallet: demoWallet)
        try phone.device.uninstall(phone.app)
        #expect(RecoveryHints(service: try phone.hints()).get().lastWallet == demoWallet)
    }

    @Test("a new device that joins with the old device's pin is welcomed back through Block Store")
    func newDevice() throws {
        let cloud = Throwaway.untrusted("cloud")
        let old = try HintPhone(cloud: cloud)
        try old.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try old.hints().set(RecoveryHint(lastWallet: demoWallet))
        _ = try BlockStoreSync(account: old.account).sync()
        let new = try HintPhone(cloud: cloud)
        #expect(RecoveryHints(service: try new.hints()).get() == .empty)
        try BlockStoreSync(account: new.account).join(passcode: "1234")
        #expect(RecoveryHints(service: try new.hints()).get().lastWallet == demoWallet)
    }

    @Test("a device without a lock screen keeps its hint local: the cloud stays empty")
    func noLockScreenStaysLocal() throws {
        let cloud = Throwaway.untrusted("cloud")
        let phone = try HintPhone(cloud: cloud)
        RecoveryHints(service: try phone.hints()).set(lastWallet: testWallet("local"))
        _ = try BlockStoreSync(account: phone.account).sync()
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
    }
}

@Suite("Recovery hint: the apple profile")
struct AppleProfileTests {
    @Test("key-value store primary, synchronizable AfterFirstUnlock Keychain item fallback")
    func stores() throws {
        let phone = try HintPhone()
        let hints = try RecoveryHintService.make(
            profile: .apple, app: phone.app, account: phone.account)
        let outcomes = try hints.set(RecoveryHint(lastWallet: demoWallet))
        #expect(outcomes.map(\.store) == ["kvstore", "keychain (synchronizable)"])
        #expect(try hints.get().source == "kvstore")
        let item = try Keychain(app: phone.app, device: phone.device).item(
            matching: GenericPasswordQuery(service: KeychainHintStore.service, synchronizable: .yes)
        )
        #expect(item.attributes.accessible == .afterFirstUnlock && item.attributes.synchronizable)
        try hints.primary!.clear()
        let started = ContinuousClock.now
        let fallback = try hints.get()
        if fallback.source != "keychain (synchronizable)" {
            // get() never says why a store failed: ask the Keychain itself.
            let direct = Result { try hints.fallback.read() }
            Issue.record(
                "after \(ContinuousClock.now - started): \(fallback.source ?? "no source"); the fallback itself: \(direct)"
            )
        }
    }

    @Test("signed out of the cloud, the hint survives uninstall through the local key-value cache")
    func signedOut() throws {
        let phone = try HintPhone(cloud: nil)
        RecoveryHints(
            service: try RecoveryHintService.make(
                profile: .apple, app: phone.app, account: phone.account)
        ).set(lastWallet: demoWallet)
        try phone.device.uninstall(phone.app)
        let hints = try RecoveryHintService.make(
            profile: .apple, app: phone.app, account: phone.account)
        #expect(try hints.get().hint.lastWallet == demoWallet)
        #expect(try hints.get().source == "kvstore")
    }
}

@Suite("Recovery hint: the android profile")
struct AndroidProfileTests {
    @Test(
        "Block Store primary, preferences + Auto Backup fallback; the shipped rules are the fixture's"
    )
    func stores() throws {
        let phone = try HintPhone()
        let hints = try RecoveryHintService.make(
            profile: .android, app: phone.app, account: phone.account)
        let outcomes = try hints.set(RecoveryHint(lastWallet: demoWallet))
        #expect(outcomes.map(\.store) == ["blockstore", "preferences"])
        #expect(try hints.get().source == "blockstore")
        let fixture = try String(
            contentsOf: fixturesDirectory.appendingPathComponent(
                "backup-rules/data_extraction_rules.xml"), encoding: .utf8)
        let strip = { (text: String) in
            text.split(separator: "\n").filter {
                !$0.contains("<!--") && !$0.contains("-->") && !$0.hasPrefix("     ")
            }.map { $0.trimmingCharacters(in: .whitespaces) }.joined()
        }
        #expect(strip(fixture) == strip(PreferencesHintStore.rules))
    }

    @Test("uninstall and reinstall: welcomed back")
    func reinstall() throws {
        let phone = try HintPhone()
        RecoveryHints(
            service: try RecoveryHintService.make(
                profile: .android, app: phone.app, account: phone.account)
        ).set(lastWallet: demoWallet)
        try phone.device.uninstall(phone.app)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: .android, app: phone.app, account: phone.account)
            ).get().lastWallet == demoWallet)
    }

    @Test(
        "a device without Block Store uses the fallback alone, restored at reinstall by Auto Backup (with a pin, as the rules require)"
    )
    func withoutBlockStore() throws {
        let phone = try HintPhone()
        try phone.device.updateSettings { $0.blockStoreAvailable = false }
        try phone.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let hints = try RecoveryHintService.make(
            profile: .android, app: phone.app, account: phone.account)
        #expect(hints.primary == nil)
        #expect(try hints.set(RecoveryHint(lastWallet: demoWallet)).map(\.store) == ["preferences"])
        try phone.device.uninstall(phone.app)
        let reinstalled = try RecoveryHintService.make(
            profile: .android, app: phone.app, account: phone.account)
        #expect(try reinstalled.get().hint.lastWallet == demoWallet)
        #expect(try reinstalled.get().source == "preferences")
    }

    @Test(
        "without a pin the shipped rules back nothing up: the hint does not survive uninstall without Block Store"
    )
    func withoutBlockStoreOrPin() throws {
        let phone = try HintPhone()
        try phone.device.updateSettings { $0.blockStoreAvailable = false }
        try RecoveryHintService.make(profile: .android, app: phone.app, account: phone.account).set(
            RecoveryHint(lastWallet: testWallet("w")))
        try phone.device.uninstall(phone.app)
        #expect(
            try RecoveryHintService.make(profile: .android, app: phone.app, account: phone.account)
                .get().hint == .empty)
    }
}
