import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Keychain

/// The Keychain's part of `keepsake-dev bench cloud`: one device with 100 and 1,000
/// synchronizable items on a private Apache over TLS (MD5 passwords, so the server's share is
/// small) and on the directory backend beside it, in one run: the first sync (every item up), a
/// sync with nothing changed, and a sync of one changed item — requests and time. A sync's cost
/// should follow what changed, not the account's size: the goals are ≤ 6 requests for a quiet
/// sync and ≤ 10 for one change, at 1,000 items.
struct KeychainSyncBenchmark {
    func run() throws {
        print("Keychain sync, one device, private gnome-keyring (Apache over TLS, MD5 password):")
        let server = try PrivateWebDAV.start(.apache, tls: true, passwordHash: .md5)
        defer { server.stop() }
        for items in [100, 1000] {
            let directory = try measure(items: items) { _ in
                (CloudDirectory(Throwaway.directory("bench-keychain-cloud")), nil)
            }
            let webDAV = try measure(items: items) { label in
                let cloud = try WebDAVCloud(
                    url: server.url.appendingPathComponent("keychain-\(label)/"),
                    username: server.username, password: server.password,
                    caFile: server.caFile.path)
                return (cloud, cloud.requests)
            }
            for (label, index, goal) in [
                ("first sync (all up)", 0, nil), ("sync, nothing changed", 1, 6),
                ("sync, one item changed", 2, 10),
            ] as [(String, Int, Int?)] {
                let requests = webDAV[index].requests
                let verdict = goal.map {
                    requests <= $0 ? "goal ≤ \($0) ok" : "goal ≤ \($0) MISSED"
                }
                print(
                    "  \(String(items).padding(toLength: 5, withPad: " ", startingAt: 0)) items, \(label.padding(toLength: 24, withPad: " ", startingAt: 0)) directory \(ms(directory[index].time))  WebDAV \(ms(webDAV[index].time)) (\(requests) requests)  \(verdict ?? "")"
                )
            }
        }
    }

    private func ms(_ d: Duration) -> String {
        String(
            format: "%8.1f ms",
            Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000)
    }

    /// The three syncs' times and requests, on a fresh account from `makeCloud`.
    private func measure(
        items: Int, _ makeCloud: (String) throws -> (any CloudStorage, RequestCounter?)
    ) throws -> [(time: Duration, requests: Int)] {
        let (cloud, counter) = try makeCloud("\(items)")
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let account = CloudAccount(
            secretService: service.connection(), directory: service.deviceDirectory("phone"),
            cloud: cloud, tuning: .fast
        )
        _ = try account.setLockScreen(.pin, passcode: "123456", currentPasscode: nil)
        let keychain = Keychain(
            app: try App(id: "com.example.bench", container: Throwaway.directory("app")),
            device: account.device)
        for index in 0..<items {
            try keychain.add(
                GenericPasswordAttributes(
                    service: "bench", account: "item-\(index)", synchronizable: true),
                data: Data("secret \(index)".utf8))
        }
        let clock = ContinuousClock()
        var results: [(time: Duration, requests: Int)] = []
        for step in 0..<3 {
            if step == 2 {
                try keychain.update(
                    matching: GenericPasswordQuery(
                        service: "bench", account: "item-0", synchronizable: .yes),
                    with: GenericPasswordChanges(data: Data("changed".utf8)))
            }
            let before = counter?.value ?? 0
            let start = clock.now
            let report = try KeychainSync(account: account).sync()
            results.append((clock.now - start, (counter?.value ?? 0) - before))
            let expected = [items, 0, 1][step]
            guard report.uploaded == expected else {
                throw HarnessError(
                    "the benchmark's sync \(step) uploaded \(report.uploaded) items, not \(expected)"
                )
            }
        }
        return results
    }
}
