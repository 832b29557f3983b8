import CloudAccount
import Foundation
import KeepsakeCLI
import KeepsakeTestSupport

/// `keepsake-dev soak --seed N [--devices 3] [--steps N] [--minutes M | --long yes]
/// [--cloud directory|apache|rclone] [--broken-commit yes]`: a chaos soak, bounded by steps (2,000
/// by default): every step, fault and kill is drawn from the seed, never from the clock, so the
/// same seed and steps replay the same run and print the same log. `--minutes M` only caps a run
/// that would take longer (the log then says where it stopped); `--long yes` is 30 minutes of
/// steps. Devices of one cloud account, each a private Secret
/// Service and the command line as a user runs it, take random steps — Keychain items put and
/// deleted (shared between the devices), Block Store entries stored and deleted (each device its
/// own), syncs, passcode changes — while the soak kills syncs (SIGKILL before a change of the
/// cloud drawn at random), kills puts, deletes and passcode changes at one of their Secret Service
/// writes, restarts the WebDAV server and a Secret Service, and freezes a Secret Service for a
/// moment. At the end every device syncs, and the soak checks: every device holds the same, and
/// what the conflict rule says — the last acknowledged write, or a write killed after it (it may
/// or may not have happened); nothing deleted comes back; every device's lock screen still answers; a new device joining with the
/// recovery key restores exactly what was last acknowledged, reading every object the manifest
/// lists. The seed and every step are printed: the same seed replays the same steps and faults.
/// `--broken-commit yes` runs the devices with a test-only fault (debug builds) that skips the
/// manifest's write at each commit: the soak must fail.
enum SoakCommand {
    static func run(_ context: Context) throws {
        try context.arguments.allowOnly(
            ["seed", "devices", "steps", "minutes", "long", "cloud", "broken-commit"])
        let seed = UInt64(try context.arguments.count("seed", default: 1, in: 0...Int(Int32.max)))
        let deviceCount = try context.arguments.count("devices", default: 3, in: 2...8)
        let long = context.arguments.value("long") == "yes"
        let steps = try context.arguments.count(
            "steps", default: long ? 1_000_000 : 2_000, in: 1...1_000_000)
        let minutes = try context.arguments.count(
            "minutes", default: long ? 30 : 24 * 60, in: 1...24 * 60)
        let backend = context.arguments.value("cloud") ?? "directory"
        let broken = context.arguments.value("broken-commit") == "yes"
        var soak = try Soak(seed: seed, devices: deviceCount, backend: backend, broken: broken)
        defer { soak.stop() }
        let deadline = Date().addingTimeInterval(TimeInterval(minutes * 60))
        var step = 0
        while step < steps && Date() < deadline {
            try soak.step(step)
            step += 1
        }
        if step < steps { print("stopped by the time cap at step \(step) (--minutes \(minutes))") }
        let problems = try soak.settleAndCheck()
        print(
            "soak seed \(seed), \(backend), \(deviceCount) devices: \(step) steps, \(soak.acknowledged) acknowledged writes, faults: \(soak.faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))"
        )
        guard problems.isEmpty else {
            for problem in problems { print("LOST: \(problem)") }
            throw HarnessError(
                "soak seed \(seed): \(problems.count) problems (replay: keepsake-dev soak --seed \(seed) --steps \(step) --cloud \(backend))"
            )
        }
        print("soak seed \(seed): nothing lost")
    }
}

/// The soak's world: the devices, the cloud, and the model of what was acknowledged.
private struct Soak {
    var random: SeededRandom
    var services: [PrivateSecretService]
    let server: PrivateWebDAV?
    let cloudArguments: [String]
    let environment: [String: String]
    var pin = "1234"
    var recoveryKey = ""
    /// What each shared Keychain item may hold at the end (nil: deleted): the last acknowledged
    /// write, and any write killed mid-way after it (its command died: it may or may not have
    /// happened).
    var keychain: [String: [String?]] = [:]
    /// Each device's last acknowledged Block Store entries (the soak's own keys, `bk…`).
    var blockStore: [Int: [String: String]] = [:]
    /// Per Block Store key, its latest write on any device (nil: a deletion), which the conflict
    /// rule says the cloud copy ends with, and a new device restores. The soak's steps are
    /// separate processes, so step order is the order of the writes' times.
    var blockStoreLatest: [String: String?] = [:]
    /// Each device's last acknowledged recovery hint (its wallet): a hint stays on its device.
    var hints: [Int: String] = [:]
    /// Whether a device joined during the run (once).
    var joinedDuringRun = false
    var acknowledged = 0
    var faults: [String: Int] = [:]
    let executable = URL(fileURLWithPath: CommandLine.arguments[0])

    init(seed: UInt64, devices: Int, backend: String, broken: Bool) throws {
        random = SeededRandom(seed: seed)
        services = try (0..<devices).map { _ in try PrivateSecretService.start() }
        var environment: [String: String] = [:]
        if broken { environment["KEEPSAKE_TEST_SKIP_MANIFEST_SWITCH"] = "1" }
        self.environment = environment
        switch backend {
        case "directory":
            server = nil
            cloudArguments = ["--cloud", Throwaway.directory("soak-cloud").path]
        case "apache", "rclone":
            let server = try PrivateWebDAV.start(
                backend == "apache" ? .apache : .rclone, tls: true, passwordHash: .md5)
            self.server = server
            cloudArguments = [
                "--cloud", server.url.absoluteString, "--cloud-ca", server.caFile.path,
            ]
        default:
            throw CommandError.usage("--cloud directory | apache | rclone")
        }
        for device in 0..<devices {
            if let server {
                let login = try run(
                    device, ["cloud", "login"], "\(server.username)\n\(server.password)\n")
                guard login.status == 0 else { throw HarnessError("login: \(login.stderr)") }
            }
        }
        let made = try run(0, ["lockscreen", "set", "--kind", "pin"], "\(pin)\n")
        guard made.status == 0,
            let range = made.text.range(
                of: #"([A-Z2-7]{4}-){7}[A-Z2-7]{4}"#, options: .regularExpression)
        else { throw HarnessError("the first device made no account: \(made.stderr)") }
        recoveryKey = String(made.text[range])
        for device in 1..<devices {
            _ = try run(device, ["lockscreen", "set", "--kind", "pin"], "\(pin)\n")
            let joined = try run(device, ["device", "join", "--recovery-key"], recoveryKey + "\n")
            guard joined.status == 0 else { throw HarnessError("join: \(joined.stderr)") }
        }
    }

    func stop() {
        server?.stop()
        for service in services { service.stop() }
    }

    struct Outcome {
        var status: Int32
        var text: String
        var stderr: String
    }

    func run(
        _ device: Int, _ command: [String], _ input: String = "", dieAfter: Int? = nil,
        dieAfterWrites: Int? = nil, services: [PrivateSecretService]? = nil
    ) throws -> Outcome {
        let service = (services ?? self.services)[device]
        var environment = service.environment.merging(self.environment) { $1 }
        if let dieAfter { environment["KEEPSAKE_TEST_CLOUD_DIE_AFTER"] = String(dieAfter) }
        if let dieAfterWrites {
            environment["KEEPSAKE_TEST_SECRETS_DIE_AFTER"] = String(dieAfterWrites)
        }
        let arguments =
            command + [
                "--app-id", "com.example.soak", "--device-dir", service.deviceDirectory().path,
            ]
            + cloudArguments
        let (status, out, err) = try Spawn.capture(
            executable.path, arguments, environment: environment, input: Data(input.utf8))
        return Outcome(
            status: status, text: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self))
    }

    mutating func fault(_ name: String) { faults[name, default: 0] += 1 }

    /// What a Keychain put (`value`) or delete (nil) of `key` left: acknowledged, the item's one
    /// possible end; killed, one more possible end (and the fault `killed` counted); refused,
    /// nothing.
    mutating func settle(_ key: String, to value: String?, by outcome: Outcome, killed: String) {
        if outcome.status == 0 {
            keychain[key] = [value]
            acknowledged += 1
        } else if outcome.status == 128 + SIGKILL {
            keychain[key, default: [nil]].append(value)
            fault(killed)
        }
    }

    mutating func step(_ index: Int) throws {
        let device = random.below(services.count)
        let roll = random.below(100)
        let key = "k\(random.below(6))"
        var said = "step \(index): device \(device) "
        defer { print(said) }
        switch roll {
        case 0..<30:  // a Keychain item put: updated where the device holds it, else added
            let value = "v\(index)"
            let item = ["--service", "soak", "--account", key, "--sync", "yes"]
            // One put in six is killed at one of its first Secret Service writes.
            let kill = random.chance(17) ? random.below(3) : nil
            var outcome = try run(
                device, ["keychain", "update"] + item, value, dieAfterWrites: kill)
            if outcome.status != 0 && outcome.status != 128 + SIGKILL {
                outcome = try run(device, ["keychain", "add"] + item, value, dieAfterWrites: kill)
            }
            settle(key, to: value, by: outcome, killed: "put killed")
            said +=
                "keychain put \(key)=\(value)\(kill.map { " (killed before write \($0))" } ?? ""): \(outcome.status == 0 ? "ok" : outcome.status == 128 + SIGKILL ? "killed" : "refused")"
        case 30..<40:
            let kill = random.chance(17) ? random.below(2) : nil
            let outcome = try run(
                device,
                ["keychain", "delete", "--service", "soak", "--account", key, "--sync", "yes"],
                dieAfterWrites: kill)
            settle(key, to: nil, by: outcome, killed: "delete killed")
            said +=
                "keychain delete \(key)\(kill.map { " (killed before write \($0))" } ?? ""): \(outcome.status == 0 ? "ok" : outcome.status == 128 + SIGKILL ? "killed" : "not there")"
        case 40..<50:
            let value = "b\(index)"
            let outcome = try run(
                device, ["blockstore", "store", "--key", "b\(key)", "--backup"], value)
            if outcome.status == 0 {
                blockStore[device, default: [:]]["b\(key)"] = value
                blockStoreLatest["b\(key)"] = .some(value)
                acknowledged += 1
            }
            said += "blockstore store b\(key)=\(value): \(outcome.status)"
        case 50..<55:
            let outcome = try run(device, ["blockstore", "delete", "--key", "b\(key)"])
            // A deletion of a key the device holds is a write; of one it does not hold, nothing.
            if outcome.status == 0, blockStore[device, default: [:]]["b\(key)"] != nil {
                blockStore[device, default: [:]]["b\(key)"] = nil
                blockStoreLatest["b\(key)"] = .some(nil)
            }
            said += "blockstore delete b\(key): \(outcome.status)"
        case 55..<80:  // a sync, killed at a random change of the cloud two times in five
            let store = random.chance(50) ? ["keychain", "sync"] : ["blockstore", "sync"]
            let kill = random.chance(40) ? random.below(10) : nil
            let outcome = try run(device, store, dieAfter: kill)
            if outcome.status == 128 + SIGKILL { fault("sync killed") }
            said +=
                "\(store.joined(separator: " "))\(kill.map { " (killed before change \($0))" } ?? ""): \(outcome.status)"
        case 80..<83 where device == 0:  // a passcode change (every other device follows it)
            let next = String(1000 + random.below(9000))
            // One in four is killed at one of its Secret Service writes: the pin is then the old
            // one or the new one, whichever the device record says (an unlock tells).
            let kill = random.chance(25) ? random.below(4) : nil
            let outcome = try run(
                0, ["lockscreen", "set", "--kind", "pin"], "\(pin)\n\(next)\n",
                dieAfterWrites: kill)
            if outcome.status == 0 {
                pin = next
            } else if outcome.status == 128 + SIGKILL {
                fault("passcode change killed")
                if try run(0, ["lockscreen", "unlock"], "\(next)\n").status == 0 { pin = next }
            }
            said +=
                "passcode change\(kill.map { " (killed before write \($0))" } ?? ""): \(outcome.status)"
        case 83..<88 where server != nil:
            server!.kill()
            try server!.relaunch()
            fault("server restarted")
            said += "WebDAV server restarted"
        case 88..<92:
            try services[device].restart()
            fault("Secret Service restarted")
            said += "Secret Service restarted"
        case 80..<83 where device != 0:  // a hint set
            let wallet = "0x" + String(format: "%040x", index)
            let outcome = try run(device, ["hint", "set", "--wallet", wallet])
            if outcome.status == 0 {
                hints[device] = wallet
                acknowledged += 1
            }
            said += "hint set \(wallet): \(outcome.status)"
        case 96..<98 where !joinedDuringRun:  // a new device joins the account
            joinedDuringRun = true
            let service = try PrivateSecretService.start()
            services.append(service)
            let joiner = services.count - 1
            if let server {
                _ = try run(
                    joiner, ["cloud", "login"], "\(server.username)\n\(server.password)\n")
            }
            _ = try run(joiner, ["lockscreen", "set", "--kind", "pin"], "\(pin)\n")
            let joined = try run(
                joiner, ["device", "join", "--recovery-key"], recoveryKey + "\n")
            guard joined.status == 0 else {
                throw HarnessError("step \(index): a new device's join failed: \(joined.stderr)")
            }
            // What it restored is its own from now on.
            blockStore[joiner] = try blockStoreEntries(joiner)
            fault("device joined")
            said = "step \(index): device \(joiner) joined the account"
        case 92..<96:  // frozen for a moment while a sync waits on it
            let service = services[device]
            service.freeze()
            let thaw = Thread {
                usleep(300_000)
                service.thaw()
            }
            thaw.start()
            let outcome = try run(device, ["keychain", "sync"])
            fault("Secret Service frozen")
            said += "keychain sync, Secret Service frozen 0.3 s: \(outcome.status)"
        default:
            let outcome = try run(device, ["keychain", "sync"])
            said += "keychain sync: \(outcome.status)"
        }
    }

    /// Every device syncs (three rounds: a change the last device brings up reaches the first
    /// in the next round, and a tombstone it answers with in the one after), then the model is
    /// checked — the conflict rule's outcome: steps run one after another, so the last
    /// acknowledged write is the latest — and every device must hold the same; the problems found.
    mutating func settleAndCheck() throws -> [String] {
        var problems: [String] = []
        for round in 0..<3 {
            for device in services.indices {
                for store in [["keychain", "sync"], ["blockstore", "sync"]] {
                    let outcome = try run(device, store)
                    print(
                        // The status only: how the settling syncs split their work between
                        // rounds follows the providers' own timing; where they end is checked.
                        "settle \(round): device \(device) \(store.joined(separator: " ")): \(outcome.status)\(Self.skipped(outcome.text).map { " skipped: \($0)" } ?? "")"
                    )
                    if outcome.status != 0 {
                        problems.append(
                            "round \(round): device \(device) \(store.joined(separator: " ")) failed: \(outcome.stderr)"
                        )
                    }
                }
            }
        }
        var endings: [String: String?] = [:]
        for device in services.indices {
            if try run(device, ["lockscreen", "status"]).status != 0 {
                problems.append("device \(device): its lock screen does not answer")
            }
            for (key, expected) in keychain.sorted(by: { $0.key < $1.key }) {
                let read = try run(
                    device,
                    ["keychain", "get", "--service", "soak", "--account", key, "--sync", "any"])
                let held = read.status == 0 ? read.text : nil
                if !expected.contains(held) {
                    let said = expected.map { $0 ?? "its deletion" }.joined(separator: " or ")
                    problems.append(
                        "device \(device) holds \(key)=\(held ?? "nothing"), the last acknowledged write was \(said)"
                    )
                }
                // Every device the same, whichever of the possible ends it is.
                if let first = endings[key], first != held {
                    problems.append(
                        "device \(device) holds \(key)=\(held ?? "nothing"), device 0 holds \(first ?? "nothing"): the devices differ"
                    )
                }
                if endings[key] == nil { endings[key] = .some(held) }
            }
            let entries = try blockStoreEntries(device)
            if entries != blockStore[device, default: [:]] {
                problems.append(
                    "device \(device)'s Block Store holds \(entries), acknowledged \(blockStore[device, default: [:]])"
                )
            }
        }
        for (device, wallet) in hints {
            let read = try run(device, ["hint", "get"])
            let hint =
                (try? JSONSerialization.jsonObject(with: Data(read.text.utf8))) as? [String: Any]
            if hint?["lastWallet"] as? String != wallet {
                problems.append(
                    "device \(device)'s hint reads \(read.text), its last acknowledged wallet was \(wallet)"
                )
            }
        }
        // A new device restores what was acknowledged, reading every object the manifest lists.
        let newcomer = try PrivateSecretService.start()
        defer { newcomer.stop() }
        if let server {
            _ = try run(
                0, ["cloud", "login"], "\(server.username)\n\(server.password)\n",
                services: [newcomer])
        }
        _ = try run(0, ["lockscreen", "set", "--kind", "pin"], "2468\n", services: [newcomer])
        let joined = try run(
            0, ["device", "join", "--recovery-key"], recoveryKey + "\n", services: [newcomer])
        if joined.status != 0 { problems.append("a new device's join failed: \(joined.stderr)") }
        // It restores, per key, the latest write on any device: deleted keys not at all.
        let restored = try blockStoreEntries(0, services: [newcomer])
        let latest = blockStoreLatest.compactMapValues { $0 }
        if restored != latest {
            problems.append(
                "a new device restored \(restored.sorted { $0.key < $1.key }), the latest writes were \(latest.sorted { $0.key < $1.key })"
            )
        }
        let synced = try run(0, ["keychain", "sync"], services: [newcomer])
        if synced.status != 0 { problems.append("a new device's sync failed: \(synced.stderr)") }
        return problems
    }

    /// Why a sync exchanged nothing, as its answer says (nil: it exchanged).
    static func skipped(_ text: String) -> String? {
        ((try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any])?["skipped"]
            as? String
    }

    func blockStoreEntries(_ device: Int, services: [PrivateSecretService]? = nil) throws
        -> [String: String]
    {
        let read = try run(device, ["blockstore", "retrieve", "--all"], services: services)
        let json =
            (try? JSONSerialization.jsonObject(with: Data(read.text.utf8))) as? [String: String]
        // The soak's own entries (a hint keeps one of its own beside them).
        return (json ?? [:]).filter { $0.key.hasPrefix("bk") }.compactMapValues {
            Data(base64Encoded: $0).map { String(decoding: $0, as: UTF8.self) }
        }
    }
}
