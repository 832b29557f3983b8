import Foundation
import KeepsakeTestSupport
import Testing

@Suite("Load: several processes on one device")
struct LoadTests {
    @Test(
        "8 processes × 200 mixed operations: only documented statuses, no lost update, no duplicate left",
        // KeePassXC 2.7.4 crashes under eight client processes at once (SIGSEGV-like exit seen
        // here); gnome-keyring and kwalletd5 hold.
        .enabled(if: PrivateSecretService.defaultProvider != .keepassxc)
    )
    func eightProcesses() throws {
        let service = try PrivateSecretService.start()
        let app = ["--app-id", "com.example.load"] + deviceDirectory(of: service)
        let environment = service.environment
        let workers = try (0..<8).map { worker in
            try Spawn.start(
                keepsakeExecutable.path,
                ["stress", "--worker", "\(worker)", "--ops", "200"] + app, environment: environment)
        }
        var total: [String: Int] = [:]
        for worker in workers {
            let (status, data, _) = worker.wait()
            #expect(status == 0)
            let counts = try #require(
                try JSONSerialization.jsonObject(with: data) as? [String: Int])
            total.merge(counts) { $0 + $1 }
        }
        print("load: \(total.values.reduce(0, +)) operations: \(total)")
        // Only documented outcomes: success, a duplicate add, an update before the item exists, a
        // 17th Block Store key (8 workers × 3 keys + the hint's entry compete for 16).
        let documented: Set<String> = [
            "ok", "errSecDuplicateItem (-25299)", "errSecItemNotFound (-25300)",
            "TOO_MANY_ENTRIES (40001)",
        ]
        #expect(Set(total.keys).isSubset(of: documented), "\(total)")
        #expect(total.values.reduce(0, +) == 8 * 201)
        // No duplicate item left for the key every worker raced to add.
        #expect(
            try service.connection().search(["service": "stress", "account": "shared"]).unlocked
                .count == 1)
        // No lost update: each worker's item holds its final value.
        for worker in 0..<8 {
            let run = try keepsake(
                ["keychain", "get", "--service", "stress", "--account", "w\(worker)"] + app,
                service: service)
            #expect(run.text == "final-\(worker)")
        }
        // The entry limit held under contention.
        let entries = try keepsake(["blockstore", "retrieve", "--all"] + app, service: service)
            .stdout
        #expect((try JSONSerialization.jsonObject(with: entries) as? [String: String])?.count == 16)
        // The hint kept both kinds of field (even workers set one, odd workers the other).
        let hint = try keepsake(["hint", "get"] + app, service: service).text
        #expect(hint.contains("lastAuthenticatorId") && hint.contains("lastWallet"), "\(hint)")
    }
}
