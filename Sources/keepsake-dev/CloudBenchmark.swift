import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Sealing

/// `keepsake bench cloud`: one Block Store sync of 16 entries (the account objects and the
/// manifest with them), a sync with nothing changed, and a new device's join with the recovery
/// key + restore — on the directory backend and on private WebDAV servers (Apache, nginx + dav-ext,
/// rclone; loopback, TLS with a throwaway CA), in one run. Test-speed Argon2id, so the cloud's cost is what shows.
struct CloudBenchmark {
    let rounds: Int

    private struct Result {
        var firstSync = Duration.zero
        var quietSync = Duration.zero
        var join = Duration.zero
        var requests: (first: Int, quiet: Int, join: Int) = (0, 0, 0)
    }

    func run() throws {
        print(
            "keepsake bench cloud: \(rounds) rounds, 16 Block Store entries of 4 KB, private gnome-keyring"
        )
        let directory = try measure { _ in
            (CloudDirectory(Throwaway.directory("bench-cloud")), nil)
        }
        // Apache twice: once checking the password with bcrypt on every request (about 2 ms of
        // server CPU each here, the tests' setting), once with Apache's MD5 — what is Keepsake's
        // and what is the server's shows in the difference. Then nginx (dav-ext, its locks) and
        // rclone, which ignore conditional writes: there each round's new client probes the
        // server at its first compare-and-swap (counted), and swaps go under the account lock;
        // and wsgidav (when its wheel was fetched), which honours them.
        let servers: [(PrivateWebDAV.Server, PrivateWebDAV.PasswordHash)] =
            [
                (.apache, .bcrypt), (.apache, .md5), (.nginx, .md5), (.rclone, .md5),
            ] + (PrivateWebDAV.Server.available.contains(.wsgidav) ? [(.wsgidav, .md5)] : [])
        for (kind, hash) in servers {
            let server = try PrivateWebDAV.start(kind, tls: true, passwordHash: hash)
            defer { server.stop() }
            let webDAV = try measure { round in
                // Each round its own account: a collection of its own on the same server (made
                // by the first write).
                let cloud = try WebDAVCloud(
                    url: server.url.appendingPathComponent("round-\(round)/"),
                    username: server.username, password: server.password,
                    caFile: server.caFile.path)
                return (cloud, cloud.requests)
            }
            switch kind {
            case .apache:
                print(
                    "Apache over TLS, password checked with \(hash == .bcrypt ? "bcrypt" : "MD5"):")
            case .nginx: print("nginx + dav-ext (dav_ext_lock) over TLS, MD5 password:")
            default: print("\(kind) over TLS:")
            }
            report(directory, webDAV)
        }
        try KeychainSyncBenchmark().run()
    }

    private func report(_ directory: Result, _ webDAV: Result) {
        func ms(_ d: Duration) -> String {
            String(
                format: "%8.1f ms",
                Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000)
        }
        func ratio(_ a: Duration, _ b: Duration) -> Double { a / b }
        for (label, d, w, requests) in [
            (
                "first sync (16 entries up)", directory.firstSync, webDAV.firstSync,
                webDAV.requests.first
            ),
            ("sync, nothing changed", directory.quietSync, webDAV.quietSync, webDAV.requests.quiet),
            ("join (recovery key) + restore", directory.join, webDAV.join, webDAV.requests.join),
        ] {
            let r = ratio(w, d)
            print(
                "  \(label.padding(toLength: 31, withPad: " ", startingAt: 0)) directory \(ms(d))  WebDAV \(ms(w)) (\(requests) requests)  ratio \(String(format: "%5.2f", r))×  goal ≤ 3×  \(r <= 3 ? "ok" : "MISSED")"
            )
        }
    }

    /// Medians over the rounds, each round on a fresh account from `makeCloud`.
    private func measure(_ makeCloud: (Int) throws -> (any CloudStorage, RequestCounter?)) throws
        -> Result
    {
        var firsts: [Duration] = []
        var quiets: [Duration] = []
        var joins: [Duration] = []
        var result = Result()
        let clock = ContinuousClock()
        for round in 0..<rounds {
            let (cloud, counter) = try makeCloud(round)
            let one = try PrivateSecretService.start()
            let two = try PrivateSecretService.start()
            defer {
                one.stop()
                two.stop()
            }
            let account = CloudAccount(
                secretService: one.connection(), directory: one.deviceDirectory("phone"),
                cloud: cloud, tuning: .fast
            )
            let recoveryKey = try account.setLockScreen(
                .pin, passcode: "123456", currentPasscode: nil
            )
            .recoveryKey!
            let client = BlockStoreClient(
                app: try App(id: "com.example.bench", container: Throwaway.directory("app")),
                device: account.device)
            for index in 0..<16 {
                try client.storeBytes(
                    StoreBytesData(
                        bytes: Data(repeating: UInt8(index), count: 4000),
                        key: "entry-\(String(format: "%02d", index))", shouldBackupToCloud: true))
            }
            var start = clock.now
            var before = counter?.value ?? 0
            _ = try BlockStoreSync(account: account).sync()
            firsts.append(clock.now - start)
            result.requests.first = (counter?.value ?? 0) - before
            start = clock.now
            before = counter?.value ?? 0
            _ = try BlockStoreSync(account: account).sync()
            quiets.append(clock.now - start)
            result.requests.quiet = (counter?.value ?? 0) - before
            let tablet = CloudAccount(
                secretService: two.connection(), directory: two.deviceDirectory("tablet"),
                cloud: cloud, tuning: .fast
            )
            start = clock.now
            before = counter?.value ?? 0
            try tablet.join(recoveryKey: recoveryKey)
            let restored = try BlockStoreSync(account: tablet).restore()
            joins.append(clock.now - start)
            result.requests.join = (counter?.value ?? 0) - before
            guard restored == 16 else {
                throw HarnessError("the benchmark restored \(restored) of 16 entries")
            }
        }
        result.firstSync = firsts.median
        result.quietSync = quiets.median
        result.join = joins.median
        return result
    }
}
