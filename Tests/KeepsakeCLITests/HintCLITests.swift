import Foundation
import KeepsakeTestSupport
import Testing

/// Starts `keepsake` without waiting; the caller collects it.
private func launch(_ arguments: [String], service: PrivateSecretService) throws -> Spawn.Child {
    try Spawn.start(keepsakeExecutable.path, arguments, environment: service.environment)
}

@Suite("keepsake hint")
struct HintCLITests {
    @Test("get, set (merging), refusing the empty hint, clear")
    func story() throws {
        let service = try PrivateSecretService.shared()
        let app = [
            "--app-id", "com.example.h\(UUID().uuidString.prefix(6).lowercased())", "--device-dir",
            Throwaway.directory("device").path,
        ]
        #expect(
            try keepsake(["hint", "get"] + app, service: service).text == "{}\n")
        let empty = try keepsake(["hint", "set"] + app, service: service)
        #expect(
            empty.status == 1 && empty.stderr.contains("Refusing to persist an empty recovery hint")
        )
        let set = try keepsake(
            ["hint", "set", "--wallet", demoWallet] + app, service: service)
        #expect(
            set.text.contains("\"store\":\"keychain\"")
                && set.text.contains("\"store\":\"blockstore\""))
        _ = try keepsake(
            ["hint", "set", "--login-at", "1795000000000"] + app, service: service)
        #expect(
            try keepsake(["hint", "get"] + app, service: service).text
                == "{\"lastLoginAt\":1795000000000,\"lastWallet\":\"\(demoWallet)\"}\n")
        let bad = try keepsake(
            ["hint", "set", "--login-at", "soon"] + app, service: service)
        #expect(bad.status == 2 && bad.stderr.contains("--login-at"))
        for wallet in [
            "0x8A…3F", "0x123", "8A3fC1d2E4b5A6c7D8e9F0a1B2c3D4e5F6a7B83F00",
            String(demoWallet.dropLast()) + "g",
        ] {
            let notAddress = try keepsake(
                ["hint", "set", "--wallet", wallet] + app, service: service)
            #expect(notAddress.status == 2 && notAddress.stderr.contains("--wallet"), "\(wallet)")
        }
        for count in ["-5", "0", "99999999999999999999", "ten"] {
            let run = try keepsake(["bench", "keychain", "--items", count], service: service)
            #expect(run.status == 2 && run.stderr.contains("--items"), "\(count)")
        }
        let repeated = try keepsake(
            ["hint", "set", "--wallet", demoWallet, "--wallet", demoWallet] + app, service: service)
        #expect(repeated.status == 2 && repeated.stderr.contains("more than once"))
        let pattern = try keepsake(
            ["lockscreen", "set", "--kind", "pattern"], input: Data("1-2-3-+4\n".utf8),
            service: service)
        #expect(pattern.status == 1 && pattern.stderr.contains("errSecParam"))
        #expect(
            try keepsake(["hint", "clear"] + app, service: service).status == 0)
        #expect(
            try keepsake(["hint", "get"] + app, service: service).text == "{}\n")
    }

    @Test("two processes setting different fields at the same moment both keep their field")
    func noLostUpdate() throws {
        let service = try PrivateSecretService.shared()
        let app = [
            "--app-id", "com.example.h\(UUID().uuidString.prefix(6).lowercased())", "--device-dir",
            Throwaway.directory("device").path,
        ]
        for round in 0..<6 {
            let a = try launch(
                ["hint", "set", "--wallet", testWallet("w\(round)")] + app, service: service)
            let b = try launch(
                ["hint", "set", "--authenticator-id", "a\(round)"] + app, service: service)
            for process in [a, b] {
                #expect(process.wait().status == 0)
            }
            let hint = try keepsake(["hint", "get"] + app, service: service).text
            #expect(
                hint.contains("\"lastWallet\":\"\(testWallet("w\(round)"))\"")
                    && hint.contains("\"lastAuthenticatorId\":\"a\(round)\""), "\(hint)")
        }
    }

    @Test("a reader never sees a torn hint while writers replace it")
    func noTornReads() throws {
        let service = try PrivateSecretService.shared()
        let app = [
            "--app-id", "com.example.h\(UUID().uuidString.prefix(6).lowercased())", "--device-dir",
            Throwaway.directory("device").path,
        ]
        var processes: [(Spawn.Child, Bool)] = []
        for index in 0..<6 {
            let p = try launch(
                [
                    "hint", "set", "--wallet", testWallet("v\(index)"), "--authenticator-id",
                    testWallet("v\(index)"),
                ] + app,
                service: service)
            processes.append((p, false))
            let r = try launch(["hint", "get"] + app, service: service)
            processes.append((r, true))
        }
        for (process, isReader) in processes {
            let (status, data, _) = process.wait()
            #expect(status == 0)
            guard isReader else { continue }
            let object = try #require(
                try JSONSerialization.jsonObject(with: data) as? [String: Any])
            #expect(
                object["lastWallet"] as? String == object["lastAuthenticatorId"] as? String,
                "\(object)")
        }
    }
}

@Suite("keepsake kv")
struct KeyValueCLITests {
    @Test(
        "synchronize: true with the cloud; a cloud copy that was tampered with is an error that says so, not a quiet false"
    )
    func tamperedCloudCopy() throws {
        let service = try PrivateSecretService.start()
        let cloud = Throwaway.untrusted("cloud")
        let app = ["--app-id", "com.example.wallet", "--cloud", cloud.path]
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"] + app, input: Data("2580\n".utf8),
                service: service
            ).status == 0)
        #expect(
            try keepsake(
                ["kv", "set", "--key", "greeting"] + app, input: Data("hello".utf8),
                service: service
            ).status == 0)
        #expect(try keepsake(["kv", "synchronize"] + app, service: service).text == "true\n")
        let objects = try FileManager.default.contentsOfDirectory(atPath: cloud.path).filter {
            $0.hasPrefix("kv-")
        }
        #expect(objects.count == 1)
        for name in objects {
            try Data(repeating: 0x41, count: 64).write(to: cloud.appendingPathComponent(name))
        }
        let refused = try keepsake(["kv", "synchronize"] + app, service: service)
        #expect(refused.status == 1)
        #expect(refused.text.isEmpty)
        #expect(refused.stderr.contains("manifest"))
        // The local value is kept.
        #expect(
            try keepsake(["kv", "get", "--key", "greeting"] + app, service: service).text
                == "hello")
    }

    @Test("set, get, remove and synchronize through the command line")
    func story() throws {
        let service = try PrivateSecretService.shared()
        let app = [
            "--app-id", "com.example.k\(UUID().uuidString.prefix(6).lowercased())", "--device-dir",
            Throwaway.directory("device").path,
        ]
        #expect(
            try keepsake(
                ["kv", "set", "--key", "hint"] + app, input: Data("v1".utf8), service: service
            ).status == 0)
        #expect(try keepsake(["kv", "get", "--key", "hint"] + app, service: service).text == "v1")
        // Signed out:
        #expect(try keepsake(["kv", "synchronize"] + app, service: service).text == "false\n")
        let long = try keepsake(
            ["kv", "set", "--key", String(repeating: "k", count: 65)] + app, input: Data("x".utf8),
            service: service)
        #expect(long.status == 1 && long.stderr.contains("QuotaViolation"))
        #expect(
            try keepsake(["kv", "remove", "--key", "hint"] + app, service: service).status == 0)
        #expect(try keepsake(["kv", "get", "--key", "hint"] + app, service: service).status == 1)
        #expect(
            try keepsake(
                ["hint", "set", "--wallet", testWallet("w"), "--profile", "apple"] + app,
                service: service
            ).text.contains("\"store\":\"kvstore\""))
        #expect(
            try keepsake(["hint", "get", "--profile", "android"] + app, service: service).text
                == "{}\n")
    }
}
