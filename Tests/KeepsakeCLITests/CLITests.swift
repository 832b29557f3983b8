import Foundation
import KeepsakeTestSupport
import Testing

/// The built development tool, beside the test bundle: the `keepsake` command line on test
/// devices' tuning (cheapest Argon2id cost, short retry delays), plus `stress`.
let keepsakeExecutable = URL(fileURLWithPath: CommandLine.arguments[0])
    .deletingLastPathComponent().appendingPathComponent("keepsake-dev")

/// The shipped command line, at the real device's cost and delays.
let shippedKeepsakeExecutable = URL(fileURLWithPath: CommandLine.arguments[0])
    .deletingLastPathComponent().appendingPathComponent("keepsake")

/// `--device-dir` of `service`'s test device (`PrivateSecretService.deviceDirectory`: under its
/// throwaway root, or kept for the suite-wide sweep).
func deviceDirectory(of service: PrivateSecretService) -> [String] {
    ["--device-dir", service.deviceDirectory().path]
}

struct Run {
    var status: Int32
    var stdout: Data
    var stderr: String
    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs `keepsake` with `arguments` against `service`, feeding `input` on standard input; with
/// `fileSizeLimit` (in blocks, `ulimit -f`) its writes beyond it fail with EFBIG, as on a full disk.
func keepsake(
    _ arguments: [String], input: Data = Data(), service: PrivateSecretService?,
    environment extra: [String: String] = [:], unsetting: [String] = [], fileSizeLimit: Int? = nil,
    executable: URL = keepsakeExecutable
) throws -> Run {
    // What the CLI will seal, for the suite-wide sweep (its own seals happen in another process).
    SuiteSweep.record(input)
    for (option, value) in zip(arguments, arguments.dropFirst())
    where ["--wallet", "--authenticator-id"].contains(option) {
        SuiteSweep.record(Data(value.utf8))
    }
    let (path, argv): (String, [String]) =
        if let fileSizeLimit {
            (
                "/bin/sh",
                [
                    "-c", "trap '' XFSZ; ulimit -f \(fileSizeLimit); exec \"$0\" \"$@\"",
                    executable.path,
                ] + arguments
            )
        } else {
            (executable.path, arguments)
        }
    var environment = service?.environment ?? ProcessInfo.processInfo.environment
    if service == nil {
        // No bus at all: neither the variable nor a user bus at $XDG_RUNTIME_DIR/bus (on a
        // desktop that would be the user's own).
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        environment.removeValue(forKey: "XDG_RUNTIME_DIR")
    }
    environment.merge(extra) { $1 }
    for name in unsetting { environment.removeValue(forKey: name) }
    // posix_spawn and waitpid directly, output read beside the child (`Spawn.capture`):
    // Foundation's Process here once waited for good on a child that had exited.
    let (status, out, err) = try Spawn.capture(path, argv, environment: environment, input: input)
    SuiteSweep.keepStandardError(err)
    return Run(status: status, stdout: out, stderr: String(decoding: err, as: UTF8.self))
}

@Suite("keepsake command line")
struct CLITests {
    @Test(
        "headless, as the documented recipe runs it: scripts/headless-session starts a bus at $XDG_RUNTIME_DIR/bus and an unlocked gnome-keyring from a password on standard input; the shipped keepsake finds that bus with DBUS_SESSION_BUS_ADDRESS unset; with no bus at all it says what to do"
    )
    func headlessRecipe() throws {
        let root = Throwaway.directory("headless")
        let runtime = root.appendingPathComponent("run")
        let home = root.appendingPathComponent("home")
        for directory in [runtime, home] {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        environment.removeValue(forKey: "DISPLAY")
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["HOME"] = home.path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/headless-session").path
        let password = root.appendingPathComponent("keyring-password")
        try Data("the admin's keyring password\n".utf8).write(to: password)
        environment["KEEPSAKE_HEADLESS_PIDS"] = root.appendingPathComponent("pids").path
        let status = try Spawn.run(
            "/bin/bash", [script], environment: environment, input: password)
        let pids = String(
            decoding: (try? Data(contentsOf: root.appendingPathComponent("pids"))) ?? Data(),
            as: UTF8.self
        ).split(separator: "\n").compactMap { $0.split(separator: " ").last.flatMap { Int32($0) } }
        defer { for pid in pids { kill(pid, SIGKILL) } }
        #expect(status == 0)
        #expect(pids.count == 2)
        let unset = [
            "DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": runtime.path,
            "HOME": home.path, "XDG_DATA_HOME": environment["XDG_DATA_HOME"]!,
        ]
        let device = ["--device-dir", root.appendingPathComponent("device").path]
        defer {  // its runtime keyring goes with the test
            _ = try? keepsake(
                ["device", "reboot"] + device, service: nil, environment: unset,
                executable: shippedKeepsakeExecutable)
        }
        let add = try keepsake(
            ["keychain", "add", "--service", "headless", "--account", "a"] + device,
            input: Data("on a server".utf8), service: nil, environment: unset,
            executable: shippedKeepsakeExecutable)
        #expect(add.status == 0, "\(add.stderr)")
        let get = try keepsake(
            ["keychain", "get", "--service", "headless", "--account", "a"] + device,
            service: nil, environment: unset, executable: shippedKeepsakeExecutable)
        #expect(get.status == 0 && get.text == "on a server", "\(get.stderr)")
        // No variable and no bus: the error says what to do.
        var nowhere = unset
        nowhere["XDG_RUNTIME_DIR"] = root.appendingPathComponent("none").path
        let none = try keepsake(
            ["keychain", "get", "--service", "headless", "--account", "a"] + device,
            service: nil, environment: nowhere, executable: shippedKeepsakeExecutable)
        #expect(none.status == 1 && none.stderr.contains("XDG_RUNTIME_DIR/bus"), "\(none.stderr)")
    }

    @Test("keychain add, get, list, update and delete round-trip through the CLI")
    func roundTrip() throws {
        let service = try PrivateSecretService.shared()
        let app = ["--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())"]
        let s = ["--service", "svc", "--account", "alice"]
        #expect(
            try keepsake(
                ["keychain", "add"] + s + app, input: Data([0, 1, 255]), service: service
            ).status == 0)
        #expect(
            try keepsake(["keychain", "get"] + s + app, service: service).stdout
                == Data([0, 1, 255]))
        // Global options may stand before the subcommand too.
        let list = try keepsake(app + ["keychain", "list", "--service", "svc"], service: service)
        #expect(list.status == 0)
        let items = try #require(
            try JSONSerialization.jsonObject(with: list.stdout) as? [[String: Any]])
        #expect(items.count == 1)
        #expect(items[0]["account"] as? String == "alice")
        #expect(items[0]["accessible"] as? String == "when-unlocked")
        #expect(items[0]["data"] == nil && !list.text.contains("AAH/"))
        #expect(
            try keepsake(
                ["keychain", "update", "--label", "L"] + s + app, input: Data("new".utf8),
                service: service
            ).status == 0)
        #expect(try keepsake(["keychain", "get"] + s + app, service: service).text == "new")
        #expect(try keepsake(["keychain", "delete"] + s + app, service: service).status == 0)
        let gone = try keepsake(["keychain", "get"] + s + app, service: service)
        #expect(gone.status != 0)
        #expect(gone.stderr.contains("errSecItemNotFound (-25300)"))
    }

    @Test(
        "without --device-dir and --container the files go under $XDG_DATA_HOME/keepsake, or under ~/.local/share/keepsake when it is unset, empty or not an absolute path (the XDG rule)"
    )
    func defaultDirectories() throws {
        let home = Throwaway.directory("home")
        let share = home.appendingPathComponent(".local/share")
        let data = home.appendingPathComponent("data")
        let app = ["--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())"]
        for (value, expected) in [
            (data.path, data), (nil, share), ("", share), ("relative/share", share),
        ] {
            // A device of its own each time: one Secret Service, one device directory.
            let service = try PrivateSecretService.start()
            var environment = ["HOME": home.path]
            environment["XDG_DATA_HOME"] = value
            let unsetting = value == nil ? ["XDG_DATA_HOME"] : []
            defer {  // its runtime keyring goes with the test
                _ = try? keepsake(
                    ["device", "reboot"], service: service, environment: environment,
                    unsetting: unsetting)
            }
            let add = try keepsake(
                ["keychain", "add", "--service", "s", "--account", "a"] + app,
                input: Data("x".utf8), service: service, environment: environment,
                unsetting: unsetting)
            #expect(add.status == 0, "\(add.stderr)")
            let files = expected.appendingPathComponent("keepsake")
            let said = "XDG_DATA_HOME \(value.map { "\"\($0)\"" } ?? "unset")"
            #expect(
                FileManager.default.fileExists(
                    atPath: files.appendingPathComponent("device/device-id").path), "\(said)")
            // The app's container there too: what `app uninstall` deletes.
            let container = files.appendingPathComponent("containers/\(app[1])")
            try FileManager.default.createDirectory(
                at: container, withIntermediateDirectories: true)
            let uninstall = try keepsake(
                ["app", "uninstall"] + app, service: service, environment: environment,
                unsetting: unsetting)
            #expect(uninstall.status == 0, "\(uninstall.stderr)")
            #expect(!FileManager.default.fileExists(atPath: container.path), "\(said)")
            #expect(!FileManager.default.fileExists(atPath: "relative"))
            try? FileManager.default.removeItem(at: files)
        }
    }

    @Test("failures exit non-zero and name the status on standard error")
    func failuresNameTheirStatus() throws {
        let service = try PrivateSecretService.shared()
        let app = ["--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())"]
        let s = ["--service", "svc", "--account", "a"]
        #expect(
            try keepsake(["keychain", "add"] + s + app, input: Data("1".utf8), service: service)
                .status == 0)
        let duplicate = try keepsake(
            ["keychain", "add"] + s + app, input: Data("2".utf8), service: service)
        #expect(duplicate.status == 1)
        #expect(duplicate.stderr.contains("errSecDuplicateItem (-25299)"))
        let thisDevice = try keepsake(
            [
                "keychain", "add", "--sync", "yes", "--accessible",
                "after-first-unlock-this-device-only",
            ] + ["--service", "t"] + app,
            service: service)
        #expect(thisDevice.stderr.contains("errSecParam (-50)"))
        let entitlement = try keepsake(
            ["keychain", "get", "--access-group", "other.group"] + s + app, service: service)
        #expect(entitlement.stderr.contains("errSecMissingEntitlement (-34018)"))
        let unknown = try keepsake(
            ["keychain", "get", "--colour", "red"] + s + app, service: service)
        #expect(unknown.status == 2)
        let noService = try keepsake(["keychain", "get"] + s + app, service: nil)
        #expect(noService.stderr.contains("errSecNotAvailable (-25291)"))
    }

    @Test(
        "a missing or unknown subcommand, a stray argument and an option value that does not parse are usage errors (exit 2) naming what is wanted, before any Secret Service is reached"
    )
    func usageErrorsNameWhatIsWanted() throws {
        let cases: [([String], String)] = [
            (["keychain"], "keychain needs a subcommand: add, get, update, delete, list, sync"),
            (["lockscreen", "open"], "unknown subcommand lockscreen open: it takes set, unlock"),
            (["keychain", "get", "--service", "s", "extra"], "unexpected argument \"extra\""),
            (["keychain", "add", "--service", "s", "--accessible", "bogus"], "--accessible takes"),
            (["keychain", "get", "--server", "h", "--port", "x"], "--port takes"),
            (
                ["keychain", "add", "--service", "s", "--access-control", "face"],
                "--access-control takes"
            ),
            (["--counter", "http://example.com/", "lockscreen", "status"], "--counter takes"),
            (["--escrow", "ftp://x/", "device", "devices"], "--escrow takes"),
        ]
        for (arguments, expected) in cases {
            // No Secret Service at all: a usage error must come before anything is opened.
            let run = try keepsake(arguments, service: nil)
            #expect(run.status == 2, "\(arguments): \(run.stderr)")
            #expect(
                run.stderr.contains("keepsake: usage: \(expected)")
                    || run.stderr.contains(expected),
                "\(arguments): \(run.stderr)")
        }
    }

    @Test(
        "a --device-dir that is a file is refused with a sentence naming it (never a raw system error), and Block Store does not call it an unreachable Secret Service"
    )
    func deviceDirectoryThatIsAFile() throws {
        let service = try PrivateSecretService.shared()
        let file = Throwaway.directory("cli").appendingPathComponent("not-a-directory")
        try Data("x".utf8).write(to: file)
        let app = ["--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())"]
        let run = try keepsake(
            ["--device-dir", file.path, "blockstore", "retrieve", "--all"] + app, service: service)
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stderr.contains("\(file.path) is not a directory"), "\(run.stderr)")
        #expect(run.stderr.contains("INTERNAL_ERROR (8)"), "\(run.stderr)")
        #expect(!run.stderr.contains("lstat") && !run.stderr.contains("NSError"), "\(run.stderr)")
    }

    @Test("a secret never appears in an error message")
    func secretsStayOutOfErrors() throws {
        let service = try PrivateSecretService.shared()
        let app = ["--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())"]
        let secret = "hunter2-\(UUID().uuidString)"
        let s = ["--service", "svc", "--account", "a"]
        _ = try keepsake(["keychain", "add"] + s + app, input: Data(secret.utf8), service: service)
        let duplicate = try keepsake(
            ["keychain", "add"] + s + app, input: Data(secret.utf8), service: service)
        #expect(!duplicate.stderr.contains(secret))
        let oversize = try keepsake(
            ["keychain", "add", "--service", "big"] + app,
            input: Data(repeating: 65, count: 70_000), service: service)
        #expect(oversize.stderr.contains("errSecParam"))
        #expect(!oversize.stderr.contains("AAAAAAAA"))
    }

    @Test("an argument that is not UTF-8 is refused with errSecParam")
    func nonUTF8Argument() throws {
        // posix_spawn and waitpid (`Spawn.capture`): Foundation's Process waited here for good
        // on a shell that had exited (a full run hung on it).
        let (status, _, stderr) = try Spawn.capture(
            "/bin/sh",
            [
                "-c", "\"$0\" keychain get --service \"$(printf 'x\\377')\"",
                keepsakeExecutable.path,
            ], environment: ProcessInfo.processInfo.environment)
        let text = String(decoding: stderr, as: UTF8.self)
        #expect(status == 1)
        #expect(text.contains("errSecParam (-50)"))
    }

    @Test("app uninstall deletes the container; the Keychain item survives a reinstall")
    func uninstallKeepsKeychain() throws {
        let service = try PrivateSecretService.shared()
        let container = Throwaway.directory("container")
        try Data("x".utf8).write(to: container.appendingPathComponent("prefs.xml"))
        let app = [
            "--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())", "--container",
            container.path,
        ]
        let s = ["--service", "hint", "--account", "a"]
        #expect(
            try keepsake(["keychain", "add"] + s + app, input: Data("kept".utf8), service: service)
                .status == 0)
        #expect(try keepsake(["app", "uninstall"] + app, service: service).status == 0)
        #expect(!FileManager.default.fileExists(atPath: container.path))
        #expect(try keepsake(["keychain", "get"] + s + app, service: service).text == "kept")
    }

    @Test("several processes adding one primary key at once leave exactly one item")
    func concurrentProcesses() throws {
        let service = try PrivateSecretService.shared()
        let app = ["--app-id", "com.example.cli\(UUID().uuidString.prefix(6).lowercased())"]
        let s = ["--service", "race", "--account", "a"]
        let statuses = try (0..<8).map { _ in
            try Spawn.start(
                keepsakeExecutable.path, ["keychain", "add"] + s + app,
                environment: service.environment, input: Data("writer".utf8))
        }.map { $0.wait().status }
        #expect(statuses.filter { $0 == 0 }.count == 1)
        let list = try keepsake(["keychain", "list", "--service", "race"] + app, service: service)
        let items = try #require(try JSONSerialization.jsonObject(with: list.stdout) as? [Any])
        #expect(items.count == 1)
        #expect(
            try service.connection().search(["service": "race", "access-group": app[1]]).unlocked
                .count == 1)
    }

    @Test("keepsake demo tells the story on its own private Secret Services")
    func demo() throws {
        // How long it takes is the benchmark's to say; here, only what it tells.
        let start = ContinuousClock.now
        let run = try keepsake(["demo"], service: nil)
        print("demo: told in \(ContinuousClock.now - start)")
        // On a failure, what the demo said last too: where the story stopped.
        #expect(run.status == 0, "\(run.stderr)\n…\(run.text.suffix(1500))")
        let lines = run.text.split(separator: "\n").map(String.init)
        func line(after marker: String, containing text: String) -> Bool {
            guard let index = lines.firstIndex(where: { $0.contains(marker) }) else { return false }
            return lines[index...].contains { $0.contains(text) }
        }
        #expect(run.text.contains("Your own keyring is never touched."))
        #expect(
            line(
                after: "1. On the phone",
                containing: "keychain:   com.keepsake.recovery-hint / hint (after-first-unlock)"))
        #expect(
            line(
                after: "1. On the phone",
                containing: "blockstore: com.keepsake.recovery-hint (backed up)"))
        #expect(
            line(
                after: "1. On the phone",
                containing:
                    "cloud:      account, account-escrow, account-manifest, account-recovery, account-witness, bs-"
            ))
        #expect(
            line(
                after: "1. On the phone",
                containing:
                    "guessLimit service, countedIn software TPM (IBM SW)): 10 wrong pins in all disable the phone."
            )
        )
        #expect(
            line(
                after: "1. On the phone",
                containing:
                    "blockstore 1 here, 1 in the cloud, 0 pending; hint 2 here, 1 in the cloud, 0 pending"
            ))
        #expect(
            line(
                after: "5. A new device joins",
                containing: "the account's state vouched for by the escrow's witness"))
        #expect(
            line(
                after: "6. A device without a lock screen",
                containing:
                    "hint 2 here, - in the cloud, - pending; nothing goes to the cloud: this device has no end-to-end-encryption-capable lock screen"
            ))
        #expect(line(after: "2. The app is uninstalled", containing: "container:  (gone)"))
        #expect(
            line(
                after: "3. The app is installed again",
                containing: "\"Welcome back, your last wallet is \(demoWallet)\"."))
        #expect(
            line(
                after: "4. The phone reboots",
                containing: "after unlock:  \"Welcome back, your last wallet is \(demoWallet)\"."))
        #expect(
            line(after: "5. A new device joins", containing: "before joining: \"Create a wallet\""))
        #expect(line(after: "5. A new device joins", containing: "with a wrong pin: refused"))
        #expect(
            line(
                after: "5. A new device joins",
                containing:
                    "with the phone's pin: 1 entry restored. \"Welcome back, your last wallet is \(demoWallet)\"."
            ))
        for way in ["by approval (code ", "with the recovery key: "] {
            #expect(
                line(
                    after: "5. A new device joins",
                    containing:
                        "1 entry restored. \"Welcome back, your last wallet is \(demoWallet)\"."
                ) && run.text.contains(way), "\(way)")
        }
        #expect(
            line(
                after: "5. A new device joins",
                containing: "the laptop holds no key of the account any more."))
        #expect(
            line(
                after: "5. A new device joins",
                containing:
                    "10 wrong pins from a stranger's device, then the 11th guess — the right pin: the escrow record is destroyed"
            ))
        #expect(
            line(
                after: "6. A device without a lock screen",
                containing: "its cloud account holds: (nothing)"))
        #expect(
            line(
                after: "7. The apple profile",
                containing:
                    "after uninstall and reinstall: \"Welcome back, your last wallet is 0x77C2e4B6d8A1c3E5f7A9b2D4f6B8a0C1e3D5f7AB\"."
            )
        )
        #expect(
            line(
                after: "8. The android profile",
                containing:
                    "\"Welcome back, your last wallet is 0x3C9a1E3c5B7d9F2a4C6e8B0d2F4a6C8e0B2d4F9D\"."
            ))
        #expect(!run.text.contains("4711\n") && !run.text.contains("login-password"))
    }
}
