import Dispatch
import Foundation
import KeepsakeTestSupport
import Synchronization
import Testing

private func status(_ service: PrivateSecretService, _ extra: [String] = []) throws -> [String: Any]
{
    let run = try keepsake(["lockscreen", "status"] + extra, service: service)
    return try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any] ?? [:]
}

private func setPin(
    _ pin: String, current: String? = nil, _ service: PrivateSecretService, _ extra: [String] = []
)
    throws -> Run
{
    let input = (current.map { $0 + "\n" } ?? "") + pin + "\n"
    return try keepsake(
        ["lockscreen", "set", "--kind", "pin"] + extra, input: Data(input.utf8), service: service)
}

/// Attacks on the lock screen from other processes of the same user, through the command line.
@Suite(
    "The lock screen against another process of the same user",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct LockScreenAttackTests {
    @Test("N wrong passcodes at once from N processes leave N counted")
    func parallelGuessesAllCounted() throws {
        let service = try PrivateSecretService.start()
        #expect(try setPin("9173", service).status == 0)
        #expect(try keepsake(["device", "reboot"], service: service).status == 0)
        let processes = 6
        let statuses = Mutex<[Int32]>([])
        DispatchQueue.concurrentPerform(iterations: processes) { index in
            let run = try? keepsake(
                ["lockscreen", "unlock"], input: Data("000\(index)\n".utf8), service: service)
            statuses.withLock { $0.append(run?.status ?? -1) }
        }
        #expect(statuses.withLock { $0 }.allSatisfy { $0 == 1 })
        let after = try status(service)
        #expect(after["failedAttempts"] as? Int == processes)
        #expect(after["guessLimit"] as? String == "software")
        print(
            "attack: \(processes) parallel wrong passcodes, \(after["failedAttempts"] ?? "?") counted"
        )
    }

    @Test("a passcode change racing wrong guesses never brings the old passcode back")
    func changeRacingGuesses() throws {
        let service = try PrivateSecretService.start()
        #expect(try setPin("1111", service).status == 0)
        let changed = Mutex<Int32>(-1)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            if index == 0 {
                let run = try? setPin("2222", current: "1111", service)
                changed.withLock { $0 = run?.status ?? -1 }
            } else {
                _ = try? keepsake(
                    ["lockscreen", "unlock"], input: Data("99\(index)9\n".utf8), service: service)
            }
        }
        #expect(changed.withLock { $0 } == 0)
        #expect(try keepsake(["device", "reboot"], service: service).status == 0)
        // Each unlock sits out the delay the wrong guesses earned (under its 5 s longest wait).
        let old = try keepsake(
            ["lockscreen", "unlock"], input: Data("1111\n".utf8), service: service)
        #expect(old.status == 1)
        #expect(old.stderr.contains("errSecAuthFailed"))
        let new = try keepsake(
            ["lockscreen", "unlock"], input: Data("2222\n".utf8), service: service)
        #expect(new.status == 0, "\(new.stderr)")
    }

    @Test(
        "the shipped keepsake reads no cost or delay from the environment",
        .enabled(
            if: PrivateSecretService.runsKeepsakesOwnRules,
            "Keepsake's own rule: gnome-keyring pass"))
    func shippedBinaryHasNoKnobs() throws {
        let service = try PrivateSecretService.start()
        let knobs = ["KEEPSAKE_RETRY_BASE_MS": "0", "KEEPSAKE_ARGON2_COST": "minimum"]
        let set = try keepsake(
            ["lockscreen", "set", "--kind", "pin"], input: Data("3141\n".utf8), service: service,
            environment: knobs, executable: shippedKeepsakeExecutable)
        #expect(set.status == 0, "\(set.stderr)")
        #expect(try keepsake(["device", "reboot"], service: service).status == 0)
        let start = Date()
        for guess in ["0000", "0001"] {
            let run = try keepsake(
                ["lockscreen", "unlock"], input: Data((guess + "\n").utf8), service: service,
                environment: knobs, executable: shippedKeepsakeExecutable)
            #expect(run.status == 1)
        }
        // The second guess sat out the real first delay (one second), knobs or not.
        #expect(Date().timeIntervalSince(start) >= 1.0)
        #expect(try status(service)["failedAttempts"] as? Int == 2)
    }

    @Test("a passcode that is not UTF-8 is refused with errSecParam and not counted")
    func invalidUTF8OnStandardInput() throws {
        let service = try PrivateSecretService.start()
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "password"], input: Data("pass\u{FF}word\n".utf8),
                service: service
            ).status == 0)
        for bytes in [Data([0x70, 0x61, 0xFF, 0x73, 0x73, 0x0A]), Data([0xC3, 0x28, 0x0A])] {
            let run = try keepsake(["lockscreen", "unlock"], input: bytes, service: service)
            #expect(run.status == 1)
            #expect(run.stderr.contains("errSecParam (-50)"))
        }
        #expect(try status(service)["failedAttempts"] as? Int == 0)
    }

    @Test("the command line is not dumpable: core size 0 while it holds a passcode")
    func notDumpable() throws {
        let service = try PrivateSecretService.start()
        let process = try Spawn.start(
            shippedKeepsakeExecutable.path, ["lockscreen", "unlock"],
            environment: service.environment, keepingInputOpen: true)
        // It waits on standard input now; look at it from outside.
        var limits = ""
        for _ in 0..<100 {
            limits =
                (try? String(
                    contentsOfFile: "/proc/\(process.pid)/limits", encoding: .utf8))
                ?? ""
            if limits.contains("Max core file size")
                && limits.range(of: #"Max core file size\s+0\s+0"#, options: .regularExpression)
                    != nil
            {
                break
            }
            usleep(20_000)
        }
        process.wait()
        #expect(
            limits.range(of: #"Max core file size\s+0\s+0"#, options: .regularExpression) != nil)
    }

    @Test(
        "with --tpm and no --counter a lock screen is refused, naming the guess counter service: a TPM the user's processes reach counts no guesses; nothing is changed"
    )
    func tpmThroughTheCommandLine() throws {
        let tpm = try PrivateTPM()
        let service = try PrivateSecretService.start()
        let option = ["--tpm", tpm.tcti]
        // A pin of 15 digits, which standard error's numbers (a port, an exit status: 5 digits at
        // most) cannot hold; with its newline it is one 16-byte window of the sweep's secrets, no
        // window of digits alone (docs/testing.md, "Checks that could pass or fail by chance").
        let pin = "606060606060606"
        let refused = try setPin(pin, service, option)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("keepsake-escrow --tpm"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--counter"), "\(refused.stderr)")
        #expect(!refused.stderr.contains(pin))
        #expect(try status(service, option)["kind"] as? String == "none")
        #expect(try status(service, option)["guessLimit"] as? String == "software")
        // Without --tpm the software path, as the status says.
        #expect(try setPin(pin, service).status == 0)
        #expect(try status(service)["guessLimit"] as? String == "software")
    }

    @Test(
        "with --counter the shipped keepsake's guesses are counted by the service (a user of its own, on its socket): status says service and countedIn a software TPM (the service's swtpm), wrong pins are counted there and stay spent, the right one unlocks and tells the owner; without a counter, lockscreen set says the passcode is guessable offline and how to install the counter"
    )
    func counterThroughTheShippedCommandLine() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let option = ["--counter", counter.url.absoluteString]
        let set = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + option + deviceDirectory(of: service),
            input: Data("6060\n".utf8), service: service, executable: shippedKeepsakeExecutable)
        #expect(set.status == 0, "\(set.stderr)")
        #expect(!set.stderr.contains("counted in software"))
        func status() throws -> [String: Any] {
            let run = try keepsake(
                ["lockscreen", "status"] + option + deviceDirectory(of: service), service: service,
                executable: shippedKeepsakeExecutable)
            return try #require(
                try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        }
        #expect(try status()["guessLimit"] as? String == "service")
        #expect(try status()["countedIn"] as? String == "software TPM (IBM SW)")
        _ = try keepsake(
            ["device", "reboot"] + option + deviceDirectory(of: service), service: service,
            executable: shippedKeepsakeExecutable)
        let wrong = try keepsake(
            ["lockscreen", "unlock"] + option + deviceDirectory(of: service),
            input: Data("1111\n".utf8), service: service, executable: shippedKeepsakeExecutable)
        #expect(wrong.status == 1 && wrong.stderr.contains("errSecAuthFailed"))
        #expect(try status()["failedAttempts"] as? Int == 1)
        // The shipped binary's first wrong-passcode delay (a second) is sat out by the unlock
        // itself.
        let right = try keepsake(
            ["lockscreen", "unlock"] + option + deviceDirectory(of: service),
            input: Data("6060\n".utf8), service: service, executable: shippedKeepsakeExecutable)
        #expect(right.status == 0, "\(right.stderr)")
        // The owner is told; the wrong one comes back with that report, and only then.
        #expect(
            right.stderr.contains(
                "keepsake: 1 wrong passcode since your last unlock, the last at 20"))
        #expect(try status()["state"] as? String == "unlocked")
        #expect(try status()["failedAttempts"] as? Int == 0)
        _ = try keepsake(
            ["device", "reboot"] + option + deviceDirectory(of: service), service: service,
            executable: shippedKeepsakeExecutable)  // its runtime keyring goes with the test

        // Installed (its socket where the installer puts it; here where the test build is told
        // to look), a new lock screen uses it with no option, and status says so.
        let socket = try #require(counter.configuration.socket)
        let installed = try PrivateSecretService.start()
        let byDefault = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + deviceDirectory(of: installed),
            input: Data("7070\n".utf8), service: installed,
            environment: ["KEEPSAKE_TEST_COUNTER_SOCKET": socket],
            executable: shippedKeepsakeExecutable)
        #expect(byDefault.status == 0, "\(byDefault.stderr)")
        let statusByDefault = try keepsake(
            ["lockscreen", "status"] + deviceDirectory(of: installed), service: installed,
            environment: ["KEEPSAKE_TEST_COUNTER_SOCKET": socket],
            executable: shippedKeepsakeExecutable)
        #expect(
            statusByDefault.text.contains("\"guessLimit\":\"service\""), "\(statusByDefault.text)")
        _ = try keepsake(
            ["device", "reboot"] + deviceDirectory(of: installed), service: installed,
            environment: ["KEEPSAKE_TEST_COUNTER_SOCKET": socket],
            executable: shippedKeepsakeExecutable)

        // Without one: the software path, and the user is told what that means and what to do.
        let bare = try PrivateSecretService.start()
        let software = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + deviceDirectory(of: bare),
            input: Data("8080\n".utf8), service: bare, executable: shippedKeepsakeExecutable)
        #expect(software.status == 0, "\(software.stderr)")
        #expect(
            software.stderr.contains("counted in software")
                && software.stderr.contains("guess it offline")
                && software.stderr.contains("scripts/install-guess-counter"))
    }
}
