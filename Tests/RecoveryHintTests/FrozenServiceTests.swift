import BlockStore
import Device
import Foundation
import KeepsakeTestSupport
import KeyValueStore
import Keychain
import Preferences
import RecoveryHint
import Synchronization
import Testing

@Suite("Faults: every store while the Secret Service is frozen")
struct FrozenServiceTests {
    @Test(
        "with the Secret Service frozen (SIGSTOP) every store's call fails within its bound with its own error, the facade answers empty; after a thaw all work"
    )
    func everyStoreFrozen() throws {
        let phone = try HintPhone(timeout: .milliseconds(500))
        let rules = try BackupConfiguration.parse(
            Data(PreferencesHintStore.rules.utf8), allowBackup: true)
        let logged = Mutex<[String]>([])
        // A device of a process that starts now: nothing derived or cached yet.
        func coldDevice() -> Device {
            phone.service.device(timeout: .milliseconds(500))
        }
        /// Each call, with the error type its module throws.
        func calls(_ device: Device) -> [(String, () throws -> Void)] {
            let app = phone.app
            return [
                (
                    "Keychain add",
                    {
                        try Keychain(app: app, device: device).add(
                            GenericPasswordAttributes(service: "s", account: UUID().uuidString),
                            data: Data("secret".utf8))
                    }
                ),
                (
                    "Block Store store",
                    {
                        try BlockStoreClient(app: app, device: device).storeBytes(
                            StoreBytesData(bytes: Data("bytes".utf8), key: "k"))
                    }
                ),
                (
                    "key-value write",
                    {
                        try UbiquitousKeyValueStore(app: app, device: device).write(
                            .int(1), forKey: "k")
                    }
                ),
                (
                    "Auto Backup",
                    {
                        var prefs = try SharedPreferences(app: app, name: PreferencesHintStore.file)
                        prefs.putString("v", forKey: "k")
                        try prefs.commit()
                        _ = try AutoBackup(app: app, device: device, configuration: rules).backup()
                    }
                ),
                ("lock state", { _ = try device.state() }),
                (
                    "hint set",
                    {
                        _ = try RecoveryHintService.make(profile: .linux, app: app, device: device)
                            .set(RecoveryHint(lastWallet: testWallet("w")))
                    }
                ),
            ]
        }

        let expectedErrors: [String: any Error.Type] = [
            "Keychain add": KeychainError.self, "Block Store store": BlockStoreError.self,
            "key-value write": KeyValueStoreError.self, "Auto Backup": PreferencesError.self,
            "lock state": DeviceError.self, "hint set": HintError.self,
        ]
        phone.service.freeze()
        var slowest = Duration.zero
        for (name, call) in calls(coldDevice()) {
            let start = ContinuousClock.now
            do {
                try call()
                Issue.record("\(name) succeeded on a frozen Secret Service")
            } catch {
                #expect(
                    expectedErrors[name].map {
                        ObjectIdentifier(type(of: error)) == ObjectIdentifier($0)
                    } == true,
                    "\(name): \(error)")
            }
            let elapsed = ContinuousClock.now - start
            slowest = max(slowest, elapsed)
            #expect(elapsed < Pace.scaled(.milliseconds(2500)), "\(name) took \(elapsed)")
        }
        let facade = RecoveryHints(
            service: try? RecoveryHintService.make(
                profile: .linux, app: phone.app, device: coldDevice()),
            log: { line in logged.withLock { $0.append(line) } })
        let start = ContinuousClock.now
        #expect(facade.get() == .empty)
        facade.set(lastWallet: testWallet("w"))
        #expect(ContinuousClock.now - start < Pace.scaled(.seconds(5)))
        #expect(!logged.withLock { $0.isEmpty })
        phone.service.thaw()
        // Thawed, the provider first works through the calls that queued while it was stopped
        // (each abandoned at its bound, still in its queue): on a busy machine the first call
        // after the thaw can meet that backlog. Once one call answers, every store's must.
        let settled = ContinuousClock.now + .seconds(30)  // a bound for a hang, not a timing
        while ContinuousClock.now < settled {
            guard (try? calls(coldDevice()).first?.1()) == nil else { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        for (name, call) in calls(coldDevice()) {
            #expect(throws: Never.self, "\(name) after the thaw") { try call() }
        }
        print("fault: Secret Service frozen: 6 stores' calls failed cleanly, slowest \(slowest)")
    }
}
