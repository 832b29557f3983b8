import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import KeyValueStore
import Keychain
import Platform
import Preferences
import Testing

// The cloud account is untrusted storage. Whoever holds it can move any object under another
// object's name — another item, another app, another store — or copy in an object of another
// account. Every store must refuse such an object, never hand out another's bytes.

private let appIDs = ["com.example.wallet", "com.example.other"]
private let blockStoreKeys = ["k1", "k2"]
private let keychainAccounts = ["a1", "a2"]

/// What the writer of `account` stored under `app` in `store` for `key`: unique per place, so a
/// value read anywhere else gives the swap away.
private func value(_ account: String, _ app: String, _ store: String, _ key: String) -> String {
    "\(account)|\(app)|\(store)|\(key)"
}

private func backupRules() throws -> BackupConfiguration {
    try BackupConfiguration.parse(
        try Data(
            contentsOf: fixturesDirectory.appendingPathComponent(
                "backup-rules/data_extraction_rules.xml")), allowBackup: true)
}

/// A device of one cloud account with two apps, each using all four stores.
private struct Member {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }

    init(cloud: URL) throws {
        // KeePassXC saving at exit only: its save after every change crashed it under these
        // hundreds of writes on a busy machine (see `PrivateSecretService.start`); never restarted.
        service = try PrivateSecretService.start()
        // Hundreds of operations beside the whole parallel suite on two cores: a bound of 20 s,
        // not 5 (the bound itself is the fault suites' business).
        account = service.account(cloud: cloud, timeout: .seconds(20))
    }

    func app(_ id: String) throws -> App {
        try App(id: id, container: service.root.appendingPathComponent("containers/\(id)"))
    }

    /// Stores a value in every store of every app and syncs it all to the cloud.
    func writeEverything(account: String) throws {
        for id in appIDs {
            let app = try app(id)
            let blockStore = BlockStoreClient(app: app, device: device)
            for key in blockStoreKeys {
                try blockStore.storeBytes(
                    StoreBytesData(
                        bytes: Data(value(account, id, "bs", key).utf8), key: key,
                        shouldBackupToCloud: true))
            }
            let kv = UbiquitousKeyValueStore(app: app, account: self.account)
            kv.set(value(account, id, "kv", "hint"), forKey: "hint")
            #expect(kv.synchronize())
            var prefs = try SharedPreferences(app: app, name: "recovery_hint")
            prefs.putString(value(account, id, "ab", "hint"), forKey: "hint")
            try prefs.commit()
            #expect(
                try AutoBackup(app: app, account: self.account, configuration: backupRules())
                    .backup()
                    .cloud)
            let keychain = Keychain(app: app, device: device)
            for name in keychainAccounts {
                try keychain.add(
                    GenericPasswordAttributes(
                        service: "s", account: name, synchronizable: true,
                        accessible: .afterFirstUnlock),
                    data: Data(value(account, id, "kc", name).utf8))
            }
        }
        #expect(try BlockStoreSync(account: self.account).sync().uploaded == 4)
        #expect(try KeychainSync(account: self.account).sync().uploaded == 4)
    }

    /// Reads one store's cloud objects as a joined device does, and checks every value it then
    /// holds is the one stored in that very place by account `account`. Returns whether the
    /// cloud was refused (an error, or `synchronize()` false, for some app) and how many values
    /// the device then holds.
    func readAndCheck(_ prefix: String, account: String) throws -> (refused: Bool, held: Int) {
        var refused = false
        var held = 0
        switch prefix {
        case "bs-":
            do { _ = try BlockStoreSync(account: self.account).restore() } catch { refused = true }
            for id in appIDs {
                let all = try BlockStoreClient(app: try app(id), device: device).retrieveBytes(
                    RetrieveBytesRequest(retrieveAll: true))
                held += all.count
                for (key, bytes) in all {
                    #expect(String(decoding: bytes, as: UTF8.self) == value(account, id, "bs", key))
                }
            }
        case "kv-":
            for id in appIDs {
                let kv = UbiquitousKeyValueStore(app: try app(id), account: self.account)
                if !kv.synchronize() { refused = true }
                if let read = kv.string(forKey: "hint") {
                    held += 1
                    #expect(read == value(account, id, "kv", "hint"))
                }
            }
        case "ab-":
            for id in appIDs {
                let app = try app(id)
                try device.uninstall(app)  // a fresh install restores before first launch
                do {
                    try AutoBackup(app: app, account: self.account, configuration: backupRules())
                        .restoreIfNeeded()
                } catch { refused = true }
                if let read = try SharedPreferences(app: app, name: "recovery_hint").string(
                    forKey: "hint")
                {
                    held += 1
                    #expect(read == value(account, id, "ab", "hint"))
                }
            }
        case "kc-":
            do { _ = try KeychainSync(account: self.account).sync() } catch { refused = true }
            for id in appIDs {
                let keychain = Keychain(app: try app(id), device: device)
                for name in keychainAccounts {
                    let query = GenericPasswordQuery(
                        service: "s", account: name, synchronizable: .yes)
                    if let data = try keychain.dataIfPresent(matching: query) {
                        held += 1
                        #expect(
                            String(decoding: data, as: UTF8.self) == value(account, id, "kc", name))
                    }
                }
            }
        default:
            Issue.record("unknown cloud object kind \(prefix)")
        }
        return (refused, held)
    }
}

/// The cloud account's objects by name.
private func snapshot(_ cloud: URL) throws -> [String: Data] {
    var objects: [String: Data] = [:]
    for name in Files.list(cloud) {
        objects[name] = try Data(contentsOf: cloud.appendingPathComponent(name))
    }
    return objects
}

private func put(_ objects: [String: Data], into cloud: URL) throws {
    for name in Files.list(cloud) { try Files.remove(cloud.appendingPathComponent(name)) }
    for (name, bytes) in objects { try bytes.write(to: cloud.appendingPathComponent(name)) }
}

private func kind(_ name: String) -> String { String(name.prefix(3)) }

@Suite(
    "Cloud objects moved between items, apps, stores and accounts",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct CloudObjectSwapTests {
    @Test(
        "every swapped, foreign, truncated, extended or flipped cloud object is refused by all four stores, never read as another's"
    )
    func swapsAreRefused() throws {
        let cloudA = Throwaway.untrusted("cloud")
        let cloudB = Throwaway.untrusted("cloud")
        let writerA = try Member(cloud: cloudA)
        let writerB = try Member(cloud: cloudB)
        for (writer, account) in [(writerA, "A"), (writerB, "B")] {
            try writer.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
            try writer.writeEverything(account: account)
        }
        let original = try snapshot(cloudA)
        let foreign = try snapshot(cloudB)
        let names = original.keys.filter { !$0.hasPrefix("account") }.sorted()
        let kinds = ["bs-", "kv-", "ab-", "kc-"]
        #expect(
            Dictionary(grouping: names, by: kind).mapValues(\.count) == [
                "bs-": 4, "kv-": 2, "ab-": 2, "kc-": 4,
            ])

        // Each trial replaces some objects of account A and names the kind it attacks.
        var trials: [(label: String, kind: String, changes: [String: Data])] = []
        for (index, first) in names.enumerated() {
            for second in names[(index + 1)...] where kind(first) == kind(second) {
                trials.append(
                    (
                        "swap \(first.prefix(7)) ⇄ \(second.prefix(7))", kind(first),
                        [first: original[second]!, second: original[first]!]
                    ))
            }
            for other in kinds where other != kind(first) {
                let victim = names.first { kind($0) == other }!
                trials.append(
                    (
                        "\(first.prefix(7)) moved to \(other) store", other,
                        [victim: original[first]!]
                    ))
            }
            let stranger = foreign.keys.sorted().first { kind($0) == kind(first) }!
            trials.append(
                (
                    "another account's \(kind(first)) object", kind(first),
                    [first: foreign[stranger]!]
                ))
            let bytes = original[first]!
            trials.append(("truncated by one byte", kind(first), [first: bytes.dropLast()]))
            trials.append(("cut in half", kind(first), [first: bytes.prefix(bytes.count / 2)]))
            trials.append(("extended by one byte", kind(first), [first: bytes + [0]]))
            trials.append(("emptied", kind(first), [first: Data()]))
            for step in 0..<8 {
                var flipped = bytes
                flipped[flipped.startIndex + step * (bytes.count - 1) / 7] ^= 0x20
                trials.append(("bit flip #\(step)", kind(first), [first: flipped]))
            }
        }

        let reader = try Member(cloud: cloudA)
        try reader.account.setLockScreen(.pin, passcode: "5555", currentPasscode: nil)
        try reader.account.join(passcode: "1234")
        var refused = 0
        for trial in trials {
            try put(original.merging(trial.changes) { $1 }, into: cloudA)
            // The manifest alone would refuse every trial; vouched for, each store's own sealing
            // must refuse it too.
            try reader.account.vouchForCloudAsIs()
            if try reader.readAndCheck(trial.kind, account: "A").refused {
                refused += 1
            } else {
                Issue.record("\(trial.label): accepted")
            }
        }
        try put(original, into: cloudA)
        try reader.account.vouchForCloudAsIs()
        // Untouched, every store reads back every value in full.
        let held = try kinds.map { try reader.readAndCheck($0, account: "A") }
        #expect(held.map(\.refused) == [false, false, false, false])
        #expect(held.map(\.held) == [4, 2, 2, 4])
        print("tamper: \(refused) of \(trials.count) swapped or damaged cloud objects refused")
        #expect(refused == trials.count)
    }
}

@Suite(
    "The account manifest guards every store: rollback, drop and resurrection",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct CloudManifestTests {
    @Test(
        "for each kind of object (Block Store, key-value store, Auto Backup, Keychain sync): a dropped object and a rolled-back account are refused, a planted one never read; nothing wrong is read",
        arguments: ["bs-", "kv-", "ab-", "kc-"])
    func refused(_ prefix: String) throws {
        let cloud = Throwaway.untrusted("cloud")
        let writer = try Member(cloud: cloud)
        try writer.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try writer.writeEverything(account: "A")
        let before = try snapshot(cloud)
        // One more write: the manifest moves on.
        let kv = UbiquitousKeyValueStore(app: try writer.app(appIDs[0]), account: writer.account)
        kv.set(value("A", appIDs[0], "kv", "hint"), forKey: "hint")
        #expect(kv.synchronize())
        let reader = try Member(cloud: cloud)
        try reader.account.setLockScreen(.pin, passcode: "5555", currentPasscode: nil)
        try reader.account.join(passcode: "1234")
        #expect(try reader.readAndCheck(prefix, account: "A").refused == false)
        var current = try snapshot(cloud)  // as the reader left it (a sync may write)
        let victim = try #require(current.keys.sorted().first { $0.hasPrefix(prefix) })

        // Planted under a name the manifest does not list: nothing of it is read, by a restore
        // or an upload; an upload leaves a young stray alone (it may be another sync's upload
        // that its manifest does not list yet, or a dead writer's) and removes it once it has
        // been one for StrayObjects.age: its first sighting aged here, then another sync.
        let planted = prefix + String(repeating: "5a", count: 32)
        try put(current.merging([planted: current[victim]!]) { $1 }, into: cloud)
        let outcome = try reader.readAndCheck(prefix, account: "A")
        #expect(outcome.refused == false, "planted \(prefix)")
        if prefix == "kv-" || prefix == "kc-" {
            let strays = reader.device.directory.appendingPathComponent("cloud-strays")
            let aged = String(decoding: try Data(contentsOf: strays), as: UTF8.self)
                .replacingOccurrences(of: #" [0-9]+\n"#, with: " 0\n", options: .regularExpression)
            try Data(aged.utf8).write(to: strays)
            #expect(try reader.readAndCheck(prefix, account: "A").refused == false)
            #expect(Files.list(cloud).contains(planted) == false, "planted \(prefix) left")
        } else {
            try put(current, into: cloud)
        }
        current = try snapshot(cloud)

        // Dropped (the syncs of the other objects may move the manifest on meanwhile).
        try Files.remove(cloud.appendingPathComponent(victim))
        #expect(try reader.readAndCheck(prefix, account: "A").refused, "dropped \(prefix)")
        try current[victim]!.write(to: cloud.appendingPathComponent(victim))

        // The whole account as it was before the last write (every object and the manifest,
        // each genuine): rolled back, refused.
        try put(before, into: cloud)
        #expect(try reader.readAndCheck(prefix, account: "A").refused, "rolled back \(prefix)")
        print("manifest: \(prefix) dropped, planted and rolled back: refused")
    }
}
