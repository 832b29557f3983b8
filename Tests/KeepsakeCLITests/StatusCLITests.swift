import Foundation
import KeepsakeTestSupport
import Testing

/// `keepsake status` as JSON: the account and each store.
private struct Status {
    let account: [String: Any]
    let stores: [String: [String: Any]]

    func store(_ name: String) -> [String: Any] { stores[name] ?? [:] }
    func number(_ store: String, _ field: String) -> Int? {
        self.store(store)[field] as? Int
    }
}

/// Every file under `root` (hidden ones too) with its bytes.
private func contents(_ root: URL) throws -> [String: Data] {
    var found: [String: Data] = [:]
    guard let walker = FileManager.default.enumerator(atPath: root.path) else { return found }
    for case let path as String in walker {
        let url = root.appendingPathComponent(path)
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory),
            !isDirectory.boolValue
        {
            found[path] = try Data(contentsOf: url)
        }
    }
    return found
}

@Suite("keepsake status: every store's local copy, cloud copy, last sync, pending and why not")
struct StatusCLITests {
    @Test(
        "status is right in each state: signed out, no lock screen, pin set before and after each store's sync, a rolled-back cloud; it never says backed up while nothing goes up"
    )
    func everyState() throws {
        let cloud = Throwaway.untrusted("cloud")
        let service = try PrivateSecretService.start()
        let escrow = try PrivateEscrow.of(cloud).url.absoluteString
        let local = deviceDirectory(of: service) + ["--app-id", "com.example.wallet"]
        let device = local + ["--cloud", cloud.path, "--escrow", escrow]
        func run(_ args: [String], _ input: String = "") throws -> Run {
            let result = try keepsake(args, input: Data(input.utf8), service: service)
            #expect(result.status == 0, "\(args): \(result.stderr)")
            return result
        }
        func status(_ args: [String]) throws -> Status {
            let result = try run(["status"] + args)
            let object = try #require(
                try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any],
                "\(result.text)")
            return Status(
                account: object["account"] as? [String: Any] ?? [:],
                stores: object["stores"] as? [String: [String: Any]] ?? [:])
        }

        // Signed out: local copies only, and it says why nothing goes up.
        _ = try run(["blockstore", "store", "--key", "k", "--backup"] + local, "v")
        var now = try status(local)
        #expect(now.account["signedIn"] as? Bool == false)
        #expect(now.store("blockStore")["notSyncing"] as? String == "signed out")
        #expect(now.number("blockStore", "local") == 1)
        #expect(now.store("blockStore")["cloud"] is NSNull)

        // Signed in without a lock screen: nothing goes up, and the reason names the fix.
        now = try status(device)
        #expect(now.account["signedIn"] as? Bool == true)
        #expect(now.account["endToEndEncryption"] as? Bool == false)
        let why = now.store("blockStore")["notSyncing"] as? String ?? ""
        #expect(why.contains("lock screen") && why.contains("keepsake lockscreen set"), "\(why)")
        for name in ["keychainSync", "blockStore", "keyValueStore", "autoBackup", "hint"] {
            #expect(now.store(name)["notSyncing"] as? String == why, "\(name)")
            #expect(now.store(name)["cloud"] is NSNull, "\(name)")
        }

        // A pin: the account exists, and what is here is pending until each store syncs.
        _ = try run(["lockscreen", "set", "--kind", "pin"] + device, "2468\n")
        _ = try run(
            ["keychain", "add", "--service", "s", "--account", "a", "--sync", "yes"] + device,
            "secret")
        _ = try run(["kv", "set", "--key", "wallet"] + device, "0x1")
        now = try status(device)
        #expect(now.account["joined"] as? Bool == true)
        #expect(now.account["notSyncing"] is NSNull)
        #expect(now.number("blockStore", "cloud") == 0 && now.number("blockStore", "pending") == 1)
        #expect(now.number("keychainSync", "local") == 1)
        #expect(now.number("keychainSync", "cloud") == 0)
        #expect(now.number("keychainSync", "pending") == 1)
        #expect(now.number("keyValueStore", "pending") == 1)
        #expect(now.store("blockStore")["lastSync"] is NSNull)

        _ = try run(["blockstore", "sync"] + device)
        _ = try run(["keychain", "sync"] + device)
        _ = try run(["kv", "synchronize"] + device)
        // A status reads only: no file of the device or the cloud changes (no lock, no seen
        // version, no rotation followed).
        let deviceFiles = try contents(service.deviceDirectory())
        let cloudFiles = try contents(cloud)
        now = try status(device)
        #expect(try contents(service.deviceDirectory()) == deviceFiles)
        #expect(try contents(cloud) == cloudFiles)
        let version = try #require(now.account["manifestVersion"] as? Int)
        #expect(now.number("blockStore", "cloud") == 1 && now.number("blockStore", "pending") == 0)
        #expect(now.number("keychainSync", "cloud") == 1)
        #expect(now.number("keychainSync", "pending") == 0)
        #expect(now.number("keyValueStore", "cloud") == 1)
        #expect(now.number("keyValueStore", "pending") == 0)
        for name in ["keychainSync", "blockStore", "keyValueStore"] {
            #expect(now.store(name)["lastSync"] is String, "\(name)")
        }

        // The hint: held by the keychain and Block Store, in the cloud once Block Store syncs.
        _ = try run(
            ["hint", "set", "--wallet", "0x" + String(repeating: "aB", count: 20)] + device)
        now = try status(device)
        #expect(now.number("hint", "local") == 2)
        #expect(now.number("hint", "cloud") == 0 && now.number("hint", "pending") == 1)
        _ = try run(["blockstore", "sync"] + device)
        now = try status(device)
        #expect(now.number("hint", "cloud") == 1 && now.number("hint", "pending") == 0)

        // The cloud rolled back to an older manifest: the copy is not taken, and status says so.
        let manifest = cloud.appendingPathComponent("account-manifest")
        let newer = try Data(contentsOf: manifest)
        _ = try run(["kv", "set", "--key", "wallet"] + device, "0x2")
        _ = try run(["kv", "synchronize"] + device)
        try newer.write(to: manifest)
        now = try status(device)
        let problem = now.account["problem"] as? String ?? ""
        #expect(problem.contains("older account state"), "\(problem)")
        #expect(now.store("keyValueStore")["cloud"] is NSNull)
        #expect(version > 0)
    }
}
