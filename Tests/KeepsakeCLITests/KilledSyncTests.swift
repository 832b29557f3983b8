import Foundation
import KeepsakeTestSupport
import Testing

/// Two devices of one cloud account (a cloud directory), each with its own private Secret
/// Service, driven through the command line as a user would.
struct Pair: Sendable {
    let cloud = Throwaway.untrusted("cloud")
    let services: [PrivateSecretService]
    let trace = Throwaway.directory("trace").appendingPathComponent("changes")
    /// The account's recovery key, as `lockscreen set` showed it when it made the account.
    var recoveryKey = ""

    static func recoveryKey(_ output: String) -> String? {
        output.range(of: #"([A-Z2-7]{4}-){7}[A-Z2-7]{4}"#, options: .regularExpression).map {
            String(output[$0])
        }
    }

    init() throws {
        services = try (0..<2).map { _ in try PrivateSecretService.start() }
        let made = try run(0, ["lockscreen", "set", "--kind", "pin"], "1234\n")
        #expect(made.status == 0)
        recoveryKey = try #require(Self.recoveryKey(made.text))
        #expect(try run(1, ["lockscreen", "set", "--kind", "pin"], "5678\n").status == 0)
        let joined = try run(1, ["device", "join", "--recovery-key"], recoveryKey + "\n")
        #expect(joined.status == 0, "\(joined.stderr)")
    }

    func arguments(_ device: Int) -> [String] {
        ["--app-id", "com.example.killed", "--cloud", cloud.path]
            + deviceDirectory(of: services[device])
    }

    func run(_ device: Int, _ command: [String], _ input: String = "", dieAfter: Int? = nil)
        throws -> Run
    {
        var environment: [String: String] = [:]
        if let dieAfter { environment["KEEPSAKE_TEST_CLOUD_DIE_AFTER"] = String(dieAfter) }
        try? FileManager.default.removeItem(at: trace)
        environment["KEEPSAKE_TEST_CLOUD_TRACE"] = trace.path
        return try keepsake(
            command + arguments(device), input: Data(input.utf8), service: services[device],
            environment: environment)
    }

    /// The changes of the cloud the last command made, in order (`write kc-`, `swap account-…`).
    var changes: [String] {
        ((try? String(contentsOf: trace, encoding: .utf8)) ?? "").split(separator: "\n")
            .map(String.init)
    }
}

/// One store's part: how a round changes it on the writer, how a sync of it is run, and what a
/// device holds of it.
private struct Store: Sendable {
    var name: String
    var sync: [String]
    /// Round `round`'s changes on device 0: something added, something changed, something
    /// deleted, each acknowledged (exit 0) before the sync.
    var change: @Sendable (Pair, _ round: Int) throws -> Void
    /// What a device holds: key → value.
    var held: @Sendable (Pair, _ device: Int) throws -> [String: String]
}

private func value(_ round: Int, _ key: String) -> String { "value \(key) of round \(round)" }

private func keychainChange(_ pair: Pair, _ round: Int) throws {
    func item(_ account: String) -> [String] {
        ["--service", "killed", "--account", account, "--sync", "yes"]
    }
    let add = try pair.run(0, ["keychain", "add"] + item("a\(round)"), value(round, "a"))
    #expect(add.status == 0)
    if round >= 1 {
        let update = try pair.run(
            0, ["keychain", "update"] + item("a\(round - 1)"), value(round, "u"))
        #expect(update.status == 0)
    }
    if round >= 2 {
        #expect(try pair.run(0, ["keychain", "delete"] + item("a\(round - 2)")).status == 0)
    }
}

private func keychainHeld(_ pair: Pair, _ device: Int) throws -> [String: String] {
    var held: [String: String] = [:]
    for round in 0..<40 {
        let read = try pair.run(
            device,
            ["keychain", "get", "--service", "killed", "--account", "a\(round)", "--sync", "any"])
        if read.status == 0 { held["a\(round)"] = read.text }
    }
    return held
}

private func kvChange(_ pair: Pair, _ round: Int) throws {
    #expect(try pair.run(0, ["kv", "set", "--key", "k\(round)"], value(round, "k")).status == 0)
    if round >= 1 {
        let update = try pair.run(0, ["kv", "set", "--key", "k\(round - 1)"], value(round, "u"))
        #expect(update.status == 0)
    }
    if round >= 2 {
        #expect(try pair.run(0, ["kv", "remove", "--key", "k\(round - 2)"]).status == 0)
    }
}

private func kvHeld(_ pair: Pair, _ device: Int) throws -> [String: String] {
    var held: [String: String] = [:]
    for round in 0..<40 {
        let read = try pair.run(device, ["kv", "get", "--key", "k\(round)"])
        if read.status == 0, !read.stdout.isEmpty { held["k\(round)"] = read.text }
    }
    return held
}

private func blockStoreChange(_ pair: Pair, _ round: Int) throws {
    let store = try pair.run(
        0, ["blockstore", "store", "--key", "b\(round)", "--backup"], value(round, "b"))
    #expect(store.status == 0)
    if round >= 1 {
        let update = try pair.run(
            0, ["blockstore", "store", "--key", "b\(round - 1)", "--backup"], value(round, "u"))
        #expect(update.status == 0)
    }
    if round >= 2 {
        #expect(try pair.run(0, ["blockstore", "delete", "--key", "b\(round - 2)"]).status == 0)
    }
}

private func blockStoreEntries(_ read: Run) -> [String: String] {
    let json = (try? JSONSerialization.jsonObject(with: read.stdout)) as? [String: String]
    return (json ?? [:]).compactMapValues {
        Data(base64Encoded: $0).map { String(decoding: $0, as: UTF8.self) }
    }
}

private func blockStoreHeld(_ pair: Pair, _ device: Int) throws -> [String: String] {
    blockStoreEntries(try pair.run(device, ["blockstore", "retrieve", "--all"]))
}

private let stores: [Store] = [
    Store(
        name: "keychain", sync: ["keychain", "sync"], change: keychainChange, held: keychainHeld),
    Store(name: "key-value store", sync: ["kv", "synchronize"], change: kvChange, held: kvHeld),
    Store(
        name: "Block Store", sync: ["blockstore", "sync"], change: blockStoreChange,
        held: blockStoreHeld),
]

@Suite(
    "Faults: a sync killed between each pair of its cloud writes",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct KilledSyncTests {
    @Test(
        "for the Keychain, the key-value store and Block Store: a sync SIGKILLed before each change of the cloud in its own recorded sequence leaves a whole state another device reads, and the next syncs of both devices complete and deliver every acknowledged write",
        arguments: [0, 1, 2])
    func killedAtEveryPoint(_ index: Int) throws {
        let store = stores[index]
        let pair = try Pair()
        // The first round, unkilled: its sequence is the one every later round repeats.
        try store.change(pair, 0)
        #expect(try pair.run(0, store.sync).status == 0)
        #expect(try pair.run(1, store.sync).status == 0)
        var round = 1
        var killPoint = 0
        var sequence: [String] = []
        while round < 40 {
            try store.change(pair, round)
            let expected = try store.held(pair, 0)
            #expect(expected.count >= 2, "\(store.name): the writer holds \(expected)")
            let killed = try pair.run(0, store.sync, dieAfter: killPoint)
            if killed.status == 0 {
                // Every point of this round's sequence was a kill point before: all covered.
                sequence = pair.changes
                break
            }
            #expect(
                killed.status == 128 + SIGKILL, "\(store.name) at \(killPoint): \(killed.stderr)")
            // Another device reads a whole state: its sync opens and checks every object it reads.
            let reader = try pair.run(1, store.sync)
            #expect(reader.status == 0, "\(store.name), killed at \(killPoint): \(reader.stderr)")
            // The killed device's next sync completes; then the other device's brings it all.
            let healed = try pair.run(0, store.sync)
            #expect(healed.status == 0, "\(store.name), after \(killPoint): \(healed.stderr)")
            #expect(try pair.run(1, store.sync).status == 0)
            if store.name != "Block Store" {
                #expect(try store.held(pair, 1) == expected, "\(store.name) after \(killPoint)")
            }
            #expect(try store.held(pair, 0) == expected)
            killPoint += 1
            round += 1
        }
        #expect(!sequence.isEmpty && killPoint >= sequence.count, "\(sequence)")
        print("\(store.name): killed at each of \(killPoint) points of \(sequence)")
        // Block Store delivers by restore: a new device of the account gets exactly what was
        // acknowledged last.
        if store.name == "Block Store" {
            let expected = try store.held(pair, 0)
            let third = try PrivateSecretService.start()
            let newcomer =
                ["--app-id", "com.example.killed", "--cloud", pair.cloud.path]
                + deviceDirectory(of: third)
            #expect(
                try keepsake(
                    ["lockscreen", "set", "--kind", "pin"] + newcomer, input: Data("2468\n".utf8),
                    service: third
                ).status == 0)
            let joined = try keepsake(
                ["device", "join", "--recovery-key"] + newcomer,
                input: Data((pair.recoveryKey + "\n").utf8), service: third)
            #expect(joined.status == 0, "\(joined.stderr)")
            let read = try keepsake(["blockstore", "retrieve", "--all"] + newcomer, service: third)
            #expect(blockStoreEntries(read) == expected)
        }
    }

    @Test(
        "a sync killed after it applied another device's deletion, before it recorded it, does not later date that deletion at its next sync: a write made since, elsewhere, wins (found by soak seed 4 on Apache)"
    )
    func appliedDeletionKeepsItsTime() throws {
        let pair = try Pair()
        func item(_ account: String) -> [String] {
            ["--service", "applied", "--account", account, "--sync", "yes"]
        }
        var killedAfterTheDelete = 0
        for dieAfter in 0..<4 {
            let account = "k\(dieAfter)"
            #expect(try pair.run(0, ["keychain", "add"] + item(account), "first").status == 0)
            #expect(try pair.run(0, ["keychain", "sync"]).status == 0)
            #expect(try pair.run(1, ["keychain", "sync"]).status == 0)
            #expect(try pair.run(1, ["keychain", "delete"] + item(account)).status == 0)
            #expect(try pair.run(1, ["keychain", "sync"]).status == 0)
            // Device 0's sync dies at one of its cloud changes — an upload of its own gives it
            // some after the loop that applies the deletion — its local deletion made.
            #expect(
                try pair.run(0, ["keychain", "add"] + item("own\(dieAfter)"), "own").status == 0)
            let killed = try pair.run(0, ["keychain", "sync"], dieAfter: dieAfter)
            if killed.status == 128 + SIGKILL,
                try pair.run(0, ["keychain", "get"] + item(account)).status != 0
            {
                killedAfterTheDelete += 1
            }
            // A write after the deletion, on the other device: the latest write of the item.
            waitForTheNextMillisecond()
            #expect(try pair.run(1, ["keychain", "add"] + item(account), "later").status == 0)
            #expect(try pair.run(1, ["keychain", "sync"]).status == 0)
            for device in [0, 1, 0, 1] {
                #expect(try pair.run(device, ["keychain", "sync"]).status == 0)
            }
            for device in [0, 1] {
                let read = try pair.run(device, ["keychain", "get"] + item(account))
                #expect(
                    read.text == "later",
                    "killed before change \(dieAfter): device \(device) reads \(read.text)")
            }
        }
        // At least one kill point fell between the local deletion and the record of it.
        #expect(killedAfterTheDelete > 0)
    }
}
