import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import KeyValueStore
import Platform
import Synchronization
import Testing

/// A device for key-value store tests, signed in to `cloud` when given.
private final class Changes: Sendable {
    let list = Mutex<[KVExternalChange]>([])
}

private struct Mac {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }
    let app: App
    private let changes = Changes()

    init(cloud: URL?) throws {
        service = try PrivateSecretService.start()
        account = service.account(cloud: cloud)
        app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
    }

    func store(on account: CloudAccount? = nil) -> UbiquitousKeyValueStore {
        let changes = self.changes
        return UbiquitousKeyValueStore(app: app, account: account ?? self.account) { change in
            changes.list.withLock { $0.append(change) }
        }
    }

    var posted: [KVExternalChange] { changes.list.withLock { $0 } }

    /// Two devices of one new account on `cloud`: the first makes it (pin 1234), the second
    /// (pin 5678) joins with the first's passcode.
    static func joinedPair(_ cloud: URL) throws -> (Mac, Mac) {
        let one = try Mac(cloud: cloud)
        try one.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let two = try Mac(cloud: cloud)
        try two.account.setLockScreen(.pin, passcode: "5678", currentPasscode: nil)
        try two.account.join(passcode: "1234")
        return (one, two)
    }
}

@Suite(
    "Ubiquitous key-value store",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct KeyValueStoreTests {
    @Test(
        "two devices synchronizing at once, 20 rounds each with keys of their own, lose no update: each ends with every key of both"
    )
    func concurrentDevices() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try Mac(cloud: cloud)
        let two = try Mac(cloud: cloud)
        try one.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try two.account.setLockScreen(.pin, passcode: "5678", currentPasscode: nil)
        try two.account.join(passcode: "1234")
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            let mac = index == 0 ? one : two
            let store = mac.store()
            for round in 0..<20 {
                store.set("\(index)-\(round)", forKey: "d\(index)-k\(round)")
                if !store.synchronize() { failures.withLock { $0 += 1 } }
            }
        }
        #expect(failures.withLock { $0 } == 0)
        for mac in [one, two] {
            let store = mac.store()
            #expect(store.synchronize())
            for index in 0..<2 {
                for round in 0..<20 {
                    #expect(store.string(forKey: "d\(index)-k\(round)") == "\(index)-\(round)")
                }
            }
        }
    }

    @Test(
        "1024 keys fit, a 1025th is a quota violation that changes nothing",
        .enabled(
            if: PrivateSecretService.runsKeepsakesOwnRules,
            "Keepsake's own rule: gnome-keyring pass"))
    func keyLimit() throws {
        let mac = try Mac(cloud: nil)
        let store = mac.store()
        for index in 0..<1024 { store.set(.int(Int64(index)), forKey: "k\(index)") }
        #expect(store.dictionaryRepresentation.count == 1024)
        store.set(.int(1), forKey: "k1024")
        #expect(store.object(forKey: "k1024") == nil)
        #expect(
            mac.posted == [KVExternalChange(reason: .quotaViolationChange, changedKeys: ["k1024"])])
        store.set(.int(-1), forKey: "k0")  // overwriting stays within the quota
        #expect(store.object(forKey: "k0") == .int(-1))
    }

    @Test(
        "1 MB in all: a write over it changes nothing; keys are at most 64 UTF-8 bytes",
        .enabled(
            if: PrivateSecretService.runsKeepsakesOwnRules,
            "Keepsake's own rule: gnome-keyring pass"))
    func byteLimits() throws {
        let mac = try Mac(cloud: nil)
        let store = mac.store()
        store.set(.data(Data(count: 1_048_576 - 3)), forKey: "big")
        #expect(store.data(forKey: "big")?.count == 1_048_573)
        store.set(.data(Data(count: 1)), forKey: "x")
        #expect(store.object(forKey: "x") == nil)
        store.removeObject(forKey: "big")
        store.set("v", forKey: String(repeating: "é", count: 33))  // 66 bytes
        #expect(store.dictionaryRepresentation.isEmpty)
        store.set("v", forKey: String(repeating: "k", count: 64))
        #expect(store.dictionaryRepresentation.count == 1)
        #expect(mac.posted.map(\.reason) == [.quotaViolationChange, .quotaViolationChange])
    }

    @Test("signed out, values live in a cache outside the container: they survive uninstall")
    func signedOutCache() throws {
        let mac = try Mac(cloud: nil)
        mac.store().set("0x8A…3F", forKey: "hint")
        #expect(mac.store().synchronize() == false)
        try mac.device.uninstall(mac.app)
        #expect(mac.store().string(forKey: "hint") == "0x8A…3F")
        let files = try FileManager.default.subpathsOfDirectory(atPath: mac.device.directory.path)
        for file in files where file.hasSuffix("cache") {
            let bytes = try Data(contentsOf: mac.device.directory.appendingPathComponent(file))
            #expect(bytes.range(of: Data("0x8A…3F".utf8)) == nil)
        }
    }

    @Test(
        "synchronize exchanges with the account; the other device gets an initial-sync, then server changes"
    )
    func twoDevices() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (one, two) = try Mac.joinedPair(cloud)
        one.store().set("first", forKey: "hint")
        #expect(one.store().synchronize())
        let storeTwo = two.store()
        #expect(storeTwo.synchronize())
        #expect(storeTwo.string(forKey: "hint") == "first")
        #expect(two.posted == [KVExternalChange(reason: .initialSyncChange, changedKeys: ["hint"])])
        one.store().set("second value", forKey: "hint")
        #expect(one.store().synchronize())
        #expect(storeTwo.synchronize())
        #expect(storeTwo.string(forKey: "hint") == "second value")
        #expect(two.posted.last == KVExternalChange(reason: .serverChange, changedKeys: ["hint"]))
        // Nothing of it in clear in the cloud.
        for name in try FileManager.default.contentsOfDirectory(atPath: cloud.path) {
            let bytes = try Data(contentsOf: cloud.appendingPathComponent(name))
            #expect(bytes.range(of: Data("second value".utf8)) == nil && !name.contains("hint"))
        }
    }

    @Test("a remote change newer than a pending local write wins; an older one does not")
    func newerWins() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (one, two) = try Mac.joinedPair(cloud)
        let local = two.store()
        local.set("pending local", forKey: "a")  // older
        waitForTheNextMillisecond()
        one.store().set("newer remote", forKey: "a")
        #expect(one.store().synchronize())
        #expect(local.synchronize())
        #expect(local.string(forKey: "a") == "newer remote")
        one.store().set("older remote", forKey: "b")
        #expect(one.store().synchronize())
        waitForTheNextMillisecond()
        local.set("newer local", forKey: "b")
        #expect(local.synchronize())
        #expect(local.string(forKey: "b") == "newer local")
        #expect(one.store().synchronize())
        #expect(one.store().string(forKey: "b") == "newer local")
    }

    @Test(
        "two devices setting one key at the same millisecond both end with the higher writer's, whichever synchronizes first"
    )
    func sameMillisecond() throws {
        for first in [0, 1] {
            let (one, two) = try Mac.joinedPair(Throwaway.untrusted("cloud"))
            let stores = [one.store(), two.store()]
            let higher = try one.device.deviceID() > two.device.deviceID() ? 0 : 1
            SyncClock.$pinned.withValue(SyncClock.now() + 1) {
                stores[0].set("from-0", forKey: "tie")
                stores[1].set("from-1", forKey: "tie")
            }
            for device in [first, 1 - first, first] { #expect(stores[device].synchronize()) }
            #expect(
                stores.map { $0.string(forKey: "tie") }
                    == Array(repeating: "from-\(higher)", count: 2))
        }
    }

    @Test("signed-out values are reconciled at sign-in")
    func reconcileAtSignIn() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try Mac(cloud: cloud)
        try one.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        one.store().set("from the account", forKey: "remote")
        #expect(one.store().synchronize())
        // A device that used the store signed out, then signs in (same device directory and
        // Secret Service, now with the cloud).
        let two = try Mac(cloud: nil)
        two.store().set("written signed out", forKey: "local")
        let signedIn = two.service.account(cloud: cloud)
        try signedIn.setLockScreen(.pin, passcode: "9999", currentPasscode: nil)
        try signedIn.join(passcode: "1234")
        let store = UbiquitousKeyValueStore(app: two.app, account: signedIn)
        #expect(store.synchronize())
        #expect(store.string(forKey: "remote") == "from the account")
        #expect(store.string(forKey: "local") == "written signed out")
        #expect(one.store().synchronize())
        #expect(one.store().string(forKey: "local") == "written signed out")
    }

    @Test(
        "external changes name their reason: initial sync with a first account, server change after, account change with another account"
    )
    func changeReasons() throws {
        let accountA = Throwaway.untrusted("cloud")
        let accountB = Throwaway.untrusted("cloud")
        let writerA = try Mac(cloud: accountA)
        try writerA.account.setLockScreen(.pin, passcode: "1111", currentPasscode: nil)
        writerA.store().set("from A", forKey: "k")
        #expect(writerA.store().synchronize())
        let writerB = try Mac(cloud: accountB)
        try writerB.account.setLockScreen(.pin, passcode: "2222", currentPasscode: nil)
        writerB.store().set("from B", forKey: "b")
        #expect(writerB.store().synchronize())

        let mac = try Mac(cloud: accountA)
        try mac.account.setLockScreen(.pin, passcode: "9999", currentPasscode: nil)
        try mac.account.join(passcode: "1111")
        #expect(mac.store().synchronize())
        waitForTheNextMillisecond()
        writerA.store().set("from A again", forKey: "k")
        #expect(writerA.store().synchronize())
        #expect(mac.store().synchronize())
        // The same device signs in to account B (joining with a device of B's passcode).
        let moved = mac.service.account(cloud: accountB)
        try moved.join(passcode: "2222")
        #expect(mac.store(on: moved).synchronize())
        #expect(mac.store(on: moved).string(forKey: "b") == "from B")
        #expect(
            mac.posted == [
                KVExternalChange(reason: .initialSyncChange, changedKeys: ["k"]),
                KVExternalChange(reason: .serverChange, changedKeys: ["k"]),
                KVExternalChange(reason: .accountChange, changedKeys: ["b"]),
            ])
    }

    @Test(
        "what is pending: keys written since the last synchronize that reached the cloud, and why one did not"
    )
    func pendingKeys() throws {
        let cloud = Throwaway.untrusted("cloud")
        let mac = try Mac(cloud: cloud)
        mac.store().set("v", forKey: "k")
        mac.store().removeObject(forKey: "gone")  // nothing there: nothing pending
        #expect(mac.store().pendingKeys == ["k"])
        // No end-to-end encryption yet: not synchronized, and it says why.
        #expect(throws: KeyValueStoreError(.noCloudAccount, "")) {
            try mac.store().checkedSynchronize()
        }
        #expect(mac.store().pendingKeys == ["k"])
        try mac.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try mac.store().checkedSynchronize()
        #expect(mac.store().pendingKeys.isEmpty)
        mac.store().set("w", forKey: "k")
        mac.store().removeObject(forKey: "k")
        #expect(mac.store().pendingKeys == ["k"])
        #expect(mac.store().synchronize())
        #expect(mac.store().pendingKeys.isEmpty)
    }

    @Test("without end-to-end encryption nothing reaches the cloud")
    func noE2EE() throws {
        let cloud = Throwaway.untrusted("cloud")
        let mac = try Mac(cloud: cloud)
        mac.store().set("v", forKey: "k")
        #expect(mac.store().synchronize() == false)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
    }

    @Test("every kind of value survives the sealed cache, non-finite doubles included")
    func everyValueKind() throws {
        let mac = try Mac(cloud: nil)
        let values: [String: KVValue] = [
            "s": .string("wallet ✓"), "d": .data(Data([0, 255, 7])), "i": .int(.min),
            "b": .bool(true), "x": .double(-0.5), "inf": .double(.infinity),
            "-inf": .double(-.infinity),
        ]
        for (key, value) in values { mac.store().set(value, forKey: key) }
        mac.store().set(.double(.nan), forKey: "nan")
        let reread = mac.store().dictionaryRepresentation  // a new instance reads the cache
        #expect(reread.filter { $0.key != "nan" } == values)
        guard case .double(let nan)? = reread["nan"] else {
            Issue.record("NaN was not kept")
            return
        }
        #expect(nan.isNaN)
    }

    @Test("a cache file copied to another app or another device reads as empty, never as theirs")
    func movedCache() throws {
        let mac = try Mac(cloud: nil)
        let other = try Mac(cloud: nil)
        mac.store().set("mine", forKey: "hint")
        let cache = { (device: Device, app: App) in
            device.appDataDirectory(app, store: "kvstore").appendingPathComponent("cache")
        }
        let stolen = try Data(contentsOf: cache(mac.device, mac.app))
        let otherApp = try App(
            id: "com.example.other", container: mac.service.root.appendingPathComponent("other"))
        for (device, app) in [(mac.device, otherApp), (other.device, other.app)] {
            try Files.writeAtomically(stolen, to: cache(device, app))
            #expect(
                UbiquitousKeyValueStore(app: app, device: device).dictionaryRepresentation == [:])
        }
        #expect(mac.store().string(forKey: "hint") == "mine")
    }
}
