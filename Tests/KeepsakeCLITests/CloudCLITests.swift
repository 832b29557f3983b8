import Foundation
import Synchronization
import KeepsakeTestSupport
import Testing

@Suite(
    "keepsake with a WebDAV cloud (a private Apache, TLS with a throwaway CA)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct CloudCLITests {
    @Test(
        "a command interrupted (SIGINT, SIGTERM) while it holds the cloud account's lock lets go of it before it exits; a sync waiting for that lock says on standard error why it waits, and goes on once it is released"
    )
    func interruptReleasesTheLock() throws {
        let server = try PrivateWebDAV.start(tls: true, passwordHash: .md5)
        defer { server.stop() }
        let service = try PrivateSecretService.start()
        let cloud = ["--cloud", server.url.absoluteString, "--cloud-ca", server.caFile.path]
        let login = try keepsake(
            ["cloud", "login"] + cloud,
            input: Data("\(server.username)\n\(server.password)\n".utf8), service: service)
        #expect(login.status == 0, "\(login.stderr)")
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"] + cloud, input: Data("2580\n".utf8),
                service: service
            ).status == 0)
        for signalNumber in [SIGINT, SIGTERM] {
            // Started with SIGINT and SIGTERM at their defaults, as from a terminal (this test
            // process ignores SIGINT, and an ignored signal is inherited and left ignored).
            let holder = Process()
            holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            holder.arguments =
                [
                    "-c",
                    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGTERM, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
                    keepsakeExecutable.path, "hold-cloud-lock",
                ] + cloud
            holder.environment = service.environment
            let output = Pipe()
            holder.standardOutput = output
            holder.standardError = FileHandle.nullDevice
            holder.standardInput = FileHandle.nullDevice
            try holder.run()
            defer { if holder.isRunning { holder.terminate() } }
            let said = output.fileHandleForReading.availableData
            #expect(String(decoding: said, as: UTF8.self).hasPrefix("held"))
            // A sync meanwhile waits, and says why.
            let refusedBefore = server.answered.filter { $0 == "LOCK 423" }.count
            let waiting = Mutex<Run?>(nil)
            Thread {
                let run = try? keepsake(["blockstore", "sync"] + cloud, service: service)
                waiting.withLock { $0 = run ?? Run(status: -1, stdout: Data(), stderr: "") }
            }.start()
            // Interrupted once the waiting sync has tried the lock (a 423 answered).
            #expect(server.waitUntilAnswered("LOCK 423", count: refusedBefore + 1))
            kill(holder.processIdentifier, signalNumber)
            let ended = Date() + 30  // a bound for a holder that ignores the signal
            while holder.isRunning && Date() < ended { usleep(20_000) }
            guard !holder.isRunning else {
                Issue.record("the holder did not end at \(signalNumber)")
                kill(holder.processIdentifier, SIGKILL)
                return
            }
            #expect(holder.terminationStatus == 128 + signalNumber)
            // Its lock was released, not left to expire (30 s): the waiting sync goes on well
            // before that (it takes about a second; 20 s allows a busy machine).
            let interrupted = Date()
            while waiting.withLock({ $0 }) == nil && Date() < interrupted + 60 { usleep(20_000) }
            #expect(Date().timeIntervalSince(interrupted) < 20)
            let sync = try #require(waiting.withLock { $0 })
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(sync.stderr.contains("waiting for the cloud account's lock"), "\(sync.stderr)")
        }
    }

    @Test(
        "cloud login keeps the credentials in Keepsake's own Keychain item; a sync goes to the server sealed; with the server down it is pending (exit 75) and nothing local is lost"
    )
    func loginSyncAndPending() throws {
        let server = try PrivateWebDAV.start(tls: true)
        defer { server.stop() }
        let service = try PrivateSecretService.start()
        let cloud = ["--cloud", server.url.absoluteString, "--cloud-ca", server.caFile.path]
        let app = ["--app-id", "com.example.wallet"]

        let anonymous = try keepsake(["cloud", "status"] + cloud, service: service)
        #expect(anonymous.text.contains("\"credentials\":\"none\""))
        #expect(anonymous.text.contains("\"reachable\":false"))
        let wrong = try keepsake(
            ["cloud", "login"] + cloud, input: Data("\(server.username)\nwrong\n".utf8),
            service: service)
        #expect(wrong.status != 0 && !wrong.stderr.contains("wrong"))
        // A password the server refused is not kept.
        #expect(
            try keepsake(["cloud", "status"] + cloud, service: service).text.contains(
                "\"credentials\":\"none\""))
        let login = try keepsake(
            ["cloud", "login"] + cloud,
            input: Data("\(server.username)\n\(server.password)\n".utf8), service: service)
        #expect(login.status == 0)
        let status = try keepsake(["cloud", "status"] + cloud, service: service)
        #expect(status.text.contains("\"credentials\":\"keychain\""))
        #expect(status.text.contains("\"reachable\":true"))

        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"] + cloud, input: Data("2580\n".utf8),
                service: service
            ).status == 0)
        let secret = "a block store entry \(UUID().uuidString)"
        #expect(
            try keepsake(
                ["blockstore", "store", "--key", "wallet", "--backup"] + app,
                input: Data(secret.utf8), service: service
            ).status == 0)
        let sync = try keepsake(["blockstore", "sync"] + app + cloud, service: service)
        #expect(sync.status == 0 && sync.text.contains("\"uploaded\":1"))
        #expect(
            try keepsake(
                ["kv", "set", "--key", "greeting"] + app, input: Data("hello".utf8),
                service: service
            ).status == 0)
        let kvSync = try keepsake(["kv", "synchronize"] + app + cloud, service: service)
        #expect(kvSync.status == 0 && kvSync.text == "true\n")
        // On the server: sealed objects only.
        let stored = try FileManager.default.subpathsOfDirectory(
            atPath: server.documentRoot.path
        ).compactMap {
            FileManager.default.contents(
                atPath: server.documentRoot.appendingPathComponent($0).path)
        }
        #expect(!stored.isEmpty)
        #expect(
            stored.allSatisfy {
                $0.range(of: Data(secret.utf8)) == nil
                    && $0.range(of: Data(server.password.utf8)) == nil
            })

        server.kill()
        let pending = try keepsake(["blockstore", "sync"] + app + cloud, service: service)
        #expect(pending.status == 75)
        #expect(pending.text.contains("\"pending\":true"))
        #expect(pending.stderr.contains("unreachable"))
        // The key-value store says the same, with the keys written since that are still to go up.
        #expect(
            try keepsake(
                ["kv", "set", "--key", "later"] + app, input: Data("offline".utf8),
                service: service
            ).status == 0)
        let kvPending = try keepsake(["kv", "synchronize"] + app + cloud, service: service)
        #expect(kvPending.status == 75)
        #expect(kvPending.text.contains("\"pending\":true"))
        #expect(kvPending.text.contains("\"pendingKeys\":[\"later\"]"))
        #expect(
            try keepsake(["kv", "get", "--key", "later"] + app, service: service).text
                == "offline")
        let local = try keepsake(
            ["blockstore", "retrieve", "--key", "wallet"] + app, service: service)
        #expect(local.status == 0 && local.text.contains(Data(secret.utf8).base64EncodedString()))
        #expect(try keepsake(["cloud", "logout"] + cloud, service: service).status == 0)
        #expect(
            try keepsake(["cloud", "status"] + cloud, service: service).text.contains(
                "\"credentials\":\"none\""))
    }

    @Test(
        "credentials the server refuses (after cloud logout) end a sync with exit 1 and what to do — log in again — never the exit 75 of a cloud to try again later"
    )
    func refusedCredentials() throws {
        let server = try PrivateWebDAV.start(tls: true)
        defer { server.stop() }
        let service = try PrivateSecretService.start()
        let cloud = ["--cloud", server.url.absoluteString, "--cloud-ca", server.caFile.path]
        let app = ["--app-id", "com.example.wallet"]
        #expect(
            try keepsake(
                ["cloud", "login"] + cloud,
                input: Data("\(server.username)\n\(server.password)\n".utf8), service: service
            ).status == 0)
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"] + cloud, input: Data("2580\n".utf8),
                service: service
            ).status == 0)
        #expect(try keepsake(["cloud", "logout"] + cloud, service: service).status == 0)
        let sync = try keepsake(["blockstore", "sync"] + app + cloud, service: service)
        #expect(sync.status == 1, "\(sync.stderr)")
        #expect(sync.stderr.contains("log in again"), "\(sync.stderr)")
        #expect(!sync.text.contains("pending"))
    }

    @Test(
        "a lock screen set while the cloud account cannot be made says so on standard error (the lock screen is set all the same), never in silence"
    )
    func accountNotMadeIsSaid() throws {
        // A server without locking: it answers 404 to reads and 405 to LOCK.
        let server = try FaultyHTTPServer { request in
            .respond(status: request.method == "LOCK" ? 405 : 404, headers: [:], body: Data())
        }
        defer { server.stop() }
        let service = try PrivateSecretService.start()
        let set = try keepsake(
            ["lockscreen", "set", "--kind", "pin", "--cloud", server.url.absoluteString]
                + deviceDirectory(of: service), input: Data("2580\n".utf8), service: service)
        #expect(set.status == 0)
        #expect(
            set.stderr.contains("the cloud account is not") && set.stderr.contains("LOCK"),
            "\(set.stderr)")
        let status = try keepsake(
            ["lockscreen", "status"] + deviceDirectory(of: service), service: service)
        #expect(status.text.contains("\"kind\":\"pin\""))
        // The next unlock tries again; it unlocks, and says what it could not do.
        #expect(
            try keepsake(["lockscreen", "lock"] + deviceDirectory(of: service), service: service)
                .status == 0)
        let unlock = try keepsake(
            ["lockscreen", "unlock", "--cloud", server.url.absoluteString]
                + deviceDirectory(of: service), input: Data("2580\n".utf8), service: service)
        #expect(unlock.status == 0)
        #expect(
            unlock.stderr.contains("unlocked, but the cloud account could not be kept up to date")
                && unlock.stderr.contains("LOCK"), "\(unlock.stderr)")
    }

    @Test("credentials from ~/.netrc, which must be private to its owner; no CA, no connection")
    func netrc() throws {
        let server = try PrivateWebDAV.start(tls: true)
        defer { server.stop() }
        let service = try PrivateSecretService.start()
        let netrc = service.home.appendingPathComponent(".netrc")
        try FileManager.default.createDirectory(
            at: service.home, withIntermediateDirectories: true)
        try "machine 127.0.0.1 login \(server.username) password \(server.password)\n".write(
            to: netrc, atomically: true, encoding: .utf8)
        let cloud = ["--cloud", server.url.absoluteString, "--cloud-ca", server.caFile.path]
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: netrc.path)
        #expect(
            try keepsake(["cloud", "status"] + cloud, service: service).stderr.contains(
                "chmod 600"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: netrc.path)
        let status = try keepsake(["cloud", "status"] + cloud, service: service)
        #expect(status.text.contains("\"credentials\":\"netrc\""))
        #expect(status.text.contains("\"reachable\":true"))
        // The system's trust store does not know the throwaway CA.
        let untrusted = try keepsake(
            ["cloud", "status", "--cloud", server.url.absoluteString], service: service)
        #expect(untrusted.text.contains("\"reachable\":false"))
        // Off loopback, plain http is refused.
        #expect(
            try keepsake(
                ["cloud", "status", "--cloud", "http://example.com/dav/"], service: service
            ).status != 0)
    }
}
