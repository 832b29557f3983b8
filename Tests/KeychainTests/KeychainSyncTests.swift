import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Keychain

private struct SyncPhone {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }
    let keychain: Keychain

    init(cloud: URL) throws {
        service = try PrivateSecretService.start()
        account = service.account(cloud: cloud)
        keychain = Keychain(
            app: try App(
                id: "com.example.wallet", container: service.root.appendingPathComponent("c")),
            device: account.device)
    }

    func add(
        _ account: String, _ data: String, sync: Bool = true,
        accessible: Accessibility = .afterFirstUnlock
    ) throws {
        try keychain.add(
            GenericPasswordAttributes(
                service: "s", account: account, synchronizable: sync, accessible: accessible),
            data: Data(data.utf8))
    }

    func read(_ account: String) -> String? {
        (try? keychain.dataIfPresent(
            matching: GenericPasswordQuery(service: "s", account: account, synchronizable: .yes)))
            .flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
    }

    func sync() throws -> KeychainSync.Report { try KeychainSync(account: account).sync() }

    func delete(_ account: String) throws {
        try keychain.delete(
            matching: GenericPasswordQuery(service: "s", account: account, synchronizable: .yes))
    }

    /// A phone with the pin 1234 that joined the account on `cloud` (made by the first).
    static func joined(_ cloud: URL, first: Bool) throws -> SyncPhone {
        let phone = try SyncPhone(cloud: cloud)
        try phone.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        if !first { try phone.account.join(passcode: "1234") }
        return phone
    }
}

/// One change in a convergence case: a device puts a value or deletes the item.
private enum Change: CustomStringConvertible {
    case put(Int, String)
    case delete(Int)

    var description: String {
        switch self {
        case .put(let device, let value): "\(device) puts \(value)"
        case .delete(let device): "\(device) deletes"
        }
    }
}

private func cloudObjects(_ cloud: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).filter {
        $0.hasPrefix("kc-")
    }
}

@Suite(
    "Synchronizable Keychain items through the cloud account",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct KeychainSyncTests {
    @Test("without an E2EE-capable lock screen nothing is uploaded and the item stays local")
    func noE2EE() throws {
        let cloud = Throwaway.untrusted("cloud")
        let phone = try SyncPhone(cloud: cloud)
        try phone.add("a", "secret")
        #expect(try phone.sync().skipped != nil)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
        #expect(phone.read("a") == "secret")
    }

    @Test(
        "a new device joins with the old passcode and gets synchronizable items; this-device-only and non-synchronizable stay home"
    )
    func join() throws {
        let cloud = Throwaway.untrusted("cloud")
        let old = try SyncPhone(cloud: cloud)
        try old.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try old.add("synced", "travels")
        try old.add("local", "stays", sync: false)
        try old.add(
            "device-only", "stays too", sync: false, accessible: .afterFirstUnlockThisDeviceOnly)
        #expect(try old.sync().uploaded == 1)
        #expect(cloudObjects(cloud).count == 1)
        for name in cloudObjects(cloud) {
            let bytes = try Data(contentsOf: cloud.appendingPathComponent(name))
            for plain in ["travels", "synced", "com.example.wallet"] {
                #expect(bytes.range(of: Data(plain.utf8)) == nil)
            }
        }
        let new = try SyncPhone(cloud: cloud)
        try new.account.setLockScreen(.pin, passcode: "5555", currentPasscode: nil)
        #expect(try new.sync().skipped != nil)  // not joined yet
        #expect(throws: DeviceError.self) { try new.account.join(passcode: "0000") }
        try new.account.join(passcode: "1234")
        #expect(try new.sync().downloaded == 1)
        #expect(new.read("synced") == "travels")
        #expect(
            try new.keychain.dataIfPresent(
                matching: GenericPasswordQuery(service: "s", account: "local")) == nil)
        let item = try new.keychain.item(
            matching: GenericPasswordQuery(service: "s", account: "synced", synchronizable: .yes))
        let original = try old.keychain.item(
            matching: GenericPasswordQuery(service: "s", account: "synced", synchronizable: .yes))
        #expect(item.attributes.creationDate == original.attributes.creationDate)
    }

    @Test("updates propagate, the last writer wins, and deletions propagate")
    func updatesAndDeletions() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try SyncPhone(cloud: cloud)
        try one.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let two = try SyncPhone(cloud: cloud)
        try two.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try two.account.join(passcode: "1234")
        try one.add("a", "v1")
        _ = try one.sync()
        _ = try two.sync()
        #expect(two.read("a") == "v1")
        // Both change it; two writes last, and wins on both devices.
        try one.keychain.update(
            matching: GenericPasswordQuery(service: "s", account: "a", synchronizable: .yes),
            with: GenericPasswordChanges(data: Data("from one".utf8)))
        waitForTheNextMillisecond()
        try two.keychain.update(
            matching: GenericPasswordQuery(service: "s", account: "a", synchronizable: .yes),
            with: GenericPasswordChanges(data: Data("from two".utf8)))
        _ = try one.sync()
        _ = try two.sync()
        _ = try one.sync()
        #expect(one.read("a") == "from two")
        #expect(two.read("a") == "from two")
        // A deletion on one reaches two.
        try one.keychain.delete(
            matching: GenericPasswordQuery(service: "s", account: "a", synchronizable: .yes))
        #expect(try one.sync().deleted == 1)
        _ = try two.sync()
        #expect(two.read("a") == nil)
        _ = try one.sync()
        #expect(one.read("a") == nil)  // the tombstone does not resurrect anything
    }

    @Test(
        "a deletion is dated when it was made, not at the next sync: an update another device made after it wins, and one made before it is deleted"
    )
    func deletionDatedAtTheDeletion() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try SyncPhone(cloud: cloud)
        try one.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let two = try SyncPhone(cloud: cloud)
        try two.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try two.account.join(passcode: "1234")
        let query = { (account: String) in
            GenericPasswordQuery(service: "s", account: account, synchronizable: .yes)
        }
        try one.add("later", "v1")
        try one.add("earlier", "v1")
        _ = try one.sync()
        _ = try two.sync()
        // "later": deleted on one, then updated on two — the update is the later write.
        try one.keychain.delete(matching: query("later"))
        waitForTheNextMillisecond()
        try two.keychain.update(
            matching: query("later"), with: GenericPasswordChanges(data: Data("kept".utf8)))
        // "earlier": updated on two, then deleted on one — the deletion is the later write.
        try two.keychain.update(
            matching: query("earlier"), with: GenericPasswordChanges(data: Data("gone".utf8)))
        waitForTheNextMillisecond()
        try one.keychain.delete(matching: query("earlier"))
        _ = try two.sync()
        _ = try one.sync()  // its sync comes after two's update, whatever the deletions' dates
        _ = try two.sync()
        #expect(one.read("later") == "kept")
        #expect(two.read("later") == "kept")
        #expect(one.read("earlier") == nil)
        #expect(two.read("earlier") == nil)
    }

    @Test(
        "a device that saw an item only as a tombstone downloads it when another device writes it again, never deletes it a second time"
    )
    func writtenAgainAfterATombstone() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try SyncPhone(cloud: cloud)
        try one.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let two = try SyncPhone(cloud: cloud)
        try two.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try two.account.join(passcode: "1234")
        try one.add("a", "first")
        _ = try one.sync()
        try one.keychain.delete(
            matching: GenericPasswordQuery(service: "s", account: "a", synchronizable: .yes))
        _ = try one.sync()
        _ = try two.sync()  // sees the tombstone only
        try one.add("a", "again")
        _ = try one.sync()
        _ = try two.sync()
        _ = try one.sync()
        #expect(two.read("a") == "again")
        #expect(one.read("a") == "again")
    }

    @Test(
        "a delete of an item this device never synced is the later write, and wins on every device (added on A and synced; added and deleted on B; then B, A, B sync)"
    )
    func deleteOfANeverSyncedItem() throws {
        let cloud = Throwaway.untrusted("cloud")
        let a = try SyncPhone.joined(cloud, first: true)
        let b = try SyncPhone.joined(cloud, first: false)
        try a.add("k1", "from-A")
        _ = try a.sync()
        waitForTheNextMillisecond()
        try b.add("k1", "from-B")
        waitForTheNextMillisecond()
        try b.delete("k1")
        _ = try b.sync()
        _ = try a.sync()
        _ = try b.sync()
        #expect(a.read("k1") == nil)
        #expect(b.read("k1") == nil)
    }

    @Test(
        "two devices writing one item at the same millisecond both end with the higher writer's, whichever syncs first; a deletion at the same millisecond too"
    )
    func sameMillisecond() throws {
        for first in [0, 1] {
            let cloud = Throwaway.untrusted("cloud")
            let phones = [
                try SyncPhone.joined(cloud, first: true), try SyncPhone.joined(cloud, first: false),
            ]
            let higher = try phones[0].device.deviceID() > phones[1].device.deviceID() ? 0 : 1
            let pinned = SyncClock.now() + 1
            try SyncClock.$pinned.withValue(pinned) {
                try phones[0].add("tie", "from-0")
                try phones[1].add("tie", "from-1")
            }
            for device in [first, 1 - first, first] { _ = try phones[device].sync() }
            #expect(phones.map { $0.read("tie") } == Array(repeating: "from-\(higher)", count: 2))
            // The lower writer deletes, the higher writer updates, at one later millisecond.
            waitForTheNextMillisecond()
            try SyncClock.$pinned.withValue(SyncClock.now() + 1) {
                try phones[1 - higher].delete("tie")
                try phones[higher].keychain.update(
                    matching: GenericPasswordQuery(
                        service: "s", account: "tie", synchronizable: .yes),
                    with: GenericPasswordChanges(data: Data("kept".utf8)))
            }
            for device in [first, 1 - first, first] { _ = try phones[device].sync() }
            #expect(phones.map { $0.read("tie") } == ["kept", "kept"])
        }
    }

    @Test(
        "convergence: concurrent changes from three devices, synced in every order, end the same on every device and as the rule says (the latest write wins, a deletion included)"
    )
    func convergence() throws {
        let cloud = Throwaway.untrusted("cloud")
        let phones = [
            try SyncPhone.joined(cloud, first: true), try SyncPhone.joined(cloud, first: false),
            try SyncPhone.joined(cloud, first: false),
        ]
        // Each schedule's changes are made in this order, a millisecond apart: the last is the
        // latest write, which the rule says every device ends with.
        let schedules: [[Change]] = [
            [.put(0, "a"), .put(1, "b"), .delete(1)],
            [.put(0, "a"), .put(1, "b"), .delete(0)],
            [.put(0, "a"), .put(1, "b")],
            [.put(1, "b"), .delete(1), .put(0, "a")],
            [.put(0, "a"), .put(2, "c"), .put(1, "b"), .delete(2)],
        ]
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        var cases = 0
        for (s, schedule) in schedules.enumerated() {
            for (o, order) in orders.enumerated() {
                let name = "item-\(s)-\(o)"
                for change in schedule {
                    switch change {
                    case .put(let device, let value):
                        if phones[device].read(name) == nil {
                            try phones[device].add(name, value)
                        } else {
                            try phones[device].keychain.update(
                                matching: GenericPasswordQuery(
                                    service: "s", account: name, synchronizable: .yes),
                                with: GenericPasswordChanges(data: Data(value.utf8)))
                        }
                    case .delete(let device): try phones[device].delete(name)
                    }
                    waitForTheNextMillisecond()
                }
                // Every device syncs in this order, then in rounds until a whole round changes
                // nothing (as devices that keep syncing do): at most 4.
                for device in order { _ = try phones[device].sync() }
                var rounds = 0
                while rounds < 4 {
                    rounds += 1
                    var changed = false
                    for device in order {
                        let report = try phones[device].sync()
                        changed =
                            changed || report.uploaded + report.downloaded + report.deleted > 0
                    }
                    if !changed { break }
                }
                #expect(rounds < 4, "\(schedule) in the order \(order) did not settle")
                let expected: String? =
                    switch schedule.last! {
                    case .put(_, let value): value
                    case .delete: nil
                    }
                let ends = phones.map { $0.read(name) }
                #expect(
                    ends == [expected, expected, expected],
                    "\(schedule) synced in the order \(order): \(ends)")
                cases += 1
            }
        }
        print(
            "convergence: \(cases) cases (5 schedules × 6 orders of 3 devices), every device the same"
        )
    }
}
