@testable import BlockStore
import CloudAccount
import Foundation
import KeepsakeTestSupport
import Platform
import Testing

/// Block Store's cloud copy under the one conflict rule (`SyncVersion`). Entries do not sync
/// between devices (Google's Block Store does not): what the rule decides is which device's write
/// the cloud keeps, which is what every new device restores.
@Suite("Block Store's cloud copy follows the one conflict rule")
struct BlockStoreConflictTests {
    private static func joined(_ cloud: URL, first: Bool) throws -> Phone {
        let phone = try Phone(cloud: cloud)
        try phone.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        if !first { try phone.account.join(passcode: "1234") }
        return phone
    }

    /// What the cloud holds for `key`: its bytes, "deleted" for a deletion marker, nil for none.
    private static func cloudCopy(_ phone: Phone, _ key: String, app: String = "com.example.wallet")
        throws -> String?
    {
        let session = try #require(try phone.account.cloudSession(forUpload: false))
        let keys = CloudEntries(session.key)
        let name = keys.name(appID: app, key: key)
        guard let bytes = try session.read(name) else { return nil }
        let (entry, _) = try keys.open(bytes, name: name)
        return entry.deleted ? "deleted" : String(decoding: entry.bytes, as: UTF8.self)
    }

    private static func put(
        _ phone: Phone, _ key: String, _ value: String, app: String = "com.example.wallet"
    ) throws {
        try phone.client(app).storeBytes(
            StoreBytesData(bytes: Data(value.utf8), key: key, shouldBackupToCloud: true))
        waitForTheNextMillisecond()
    }

    private static func delete(_ phone: Phone, _ key: String, app: String = "com.example.wallet")
        throws
    {
        _ = try phone.client(app).deleteBytes(DeleteBytesRequest(keys: [key]))
        waitForTheNextMillisecond()
    }

    @Test(
        "an earlier write synced later does not replace a later one, and a delete of a key this device never synced stands against an earlier write elsewhere"
    )
    func laterWriteKeepsTheCloud() throws {
        let cloud = newCloud()
        let a = try Self.joined(cloud, first: true)
        _ = try a.sync.sync()
        let b = try Self.joined(cloud, first: false)

        // B writes first, A later; A syncs first, B last: the cloud keeps A's (the later write).
        try Self.put(b, "k", "from-B")
        try Self.put(a, "k", "from-A")
        _ = try a.sync.sync()
        #expect(try b.sync.sync().uploaded == 0)
        #expect(try Self.cloudCopy(a, "k") == "from-A")
        // B's own entry stays B's: Block Store keeps each device's entries its own.
        #expect(
            try b.client().retrieveBytes(RetrieveBytesRequest(keys: ["k"]))["k"]
                == Data("from-B".utf8))

        // B adds and deletes a key it never synced, after A wrote it: the deletion is the later
        // write, so the cloud copy becomes a marker, and A's next syncs do not bring it back.
        try Self.put(a, "n", "from-A")
        _ = try a.sync.sync()
        try Self.put(b, "n", "from-B")
        try Self.delete(b, "n")
        #expect(try b.sync.sync().removed == 1)
        _ = try a.sync.sync()
        #expect(try Self.cloudCopy(a, "n") == "deleted")
        let c = try Self.joined(cloud, first: false)
        #expect(try c.sync.restore() == 1)  // "k" only
        #expect(
            try c.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [
                "k": Data("from-A".utf8)
            ])

        // A write later than the deletion wins over it.
        try Self.put(a, "n", "again")
        #expect(try a.sync.sync().uploaded == 1)
        #expect(try Self.cloudCopy(b, "n") == "again")
    }

    @Test("a write made before a deletion elsewhere and synced after it does not undo it")
    func olderWriteAfterDeletion() throws {
        let cloud = newCloud()
        let a = try Self.joined(cloud, first: true)
        _ = try a.sync.sync()
        let b = try Self.joined(cloud, first: false)
        try Self.put(a, "k", "old")  // not synced yet
        try Self.put(b, "k", "b")
        _ = try b.sync.sync()
        try Self.delete(b, "k")
        _ = try b.sync.sync()
        #expect(try a.sync.sync().uploaded == 0)
        #expect(try Self.cloudCopy(a, "k") == "deleted")
        // A restore on B brings nothing back: its own deletion is later than anything held.
        #expect(try b.sync.restore() == 0)
    }

    @Test(
        "a deletion stopped between its marker and the entry's removal reads as deleted, and syncs as a deletion"
    )
    func deletionStoppedHalfway() throws {
        let cloud = newCloud()
        let phone = try Self.joined(cloud, first: true)
        try Self.put(phone, "k", "v")
        #expect(try phone.sync.sync().uploaded == 1)
        // What a process killed inside `deleteBytes` leaves: the marker written, the entry not
        // yet removed.
        let layout = try LocalLayout(device: phone.device, app: try phone.app())
        let name = layout.name("k")
        let entry = try #require(try layout.read(name))
        try Files.writeAtomically(
            layout.seal(entry.tombstone(modified: SyncClock.now(), writer: "")),
            to: layout.tombstoneFile(name))
        #expect(FileManager.default.fileExists(atPath: layout.file(name).path))
        #expect(try phone.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [:])
        #expect(try phone.sync.sync().removed == 1)
        #expect(try Self.cloudCopy(phone, "k") == "deleted")
        // A store after it is the later write again.
        try Self.put(phone, "k", "back")
        #expect(
            try phone.client().retrieveBytes(RetrieveBytesRequest(keys: ["k"])) == [
                "k": Data("back".utf8)
            ])
        #expect(try phone.sync.sync().uploaded == 1)
    }

    @Test(
        "two devices storing one key at the same millisecond: the cloud keeps the higher writer's")
    func sameMillisecond() throws {
        let cloud = newCloud()
        let phones = [try Self.joined(cloud, first: true), try Self.joined(cloud, first: false)]
        _ = try phones[0].sync.sync()
        let higher = try phones[0].device.deviceID() > phones[1].device.deviceID() ? 0 : 1
        for first in [0, 1] {
            let key = "tie-\(first)"
            try SyncClock.$pinned.withValue(SyncClock.now() + 1) {
                for device in [0, 1] { try Self.put(phones[device], key, "from-\(device)") }
            }
            for device in [first, 1 - first] { _ = try phones[device].sync.sync() }
            #expect(try Self.cloudCopy(phones[0], key) == "from-\(higher)")
        }
    }

    @Test(
        "convergence: concurrent stores and deletes from three devices, synced in every order, leave the cloud copy the rule says"
    )
    func convergence() throws {
        let cloud = newCloud()
        let phones = [
            try Self.joined(cloud, first: true), try Self.joined(cloud, first: false),
            try Self.joined(cloud, first: false),
        ]
        _ = try phones[0].sync.sync()
        // (device, value) — nil value: the device deletes. Made in this order, a millisecond
        // apart: the last is the latest write, which the cloud must end with.
        let schedules: [[(Int, String?)]] = [
            [(0, "a"), (1, "b"), (1, nil)],
            [(0, "a"), (1, "b"), (0, nil)],
            [(0, "a"), (1, "b")],
            [(1, "b"), (1, nil), (0, "a")],
            [(0, "a"), (2, "c"), (1, "b"), (2, nil)],
        ]
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        var cases = 0
        for (s, schedule) in schedules.enumerated() {
            for (o, order) in orders.enumerated() {
                // One app per schedule: six keys each, within Google's 16 entries per app.
                let key = "key-\(o)"
                let app = "com.example.schedule\(s)"
                for (device, value) in schedule {
                    if let value {
                        try Self.put(phones[device], key, value, app: app)
                    } else {
                        // A delete of a key the device never held deletes nothing: make it hold
                        // one first, as an app that deletes what it wrote.
                        if try phones[device].client(app).retrieveBytes(
                            RetrieveBytesRequest(keys: [key])
                        ).isEmpty {
                            try Self.put(phones[device], key, "briefly", app: app)
                        }
                        try Self.delete(phones[device], key, app: app)
                    }
                }
                for _ in 0..<2 {
                    for device in order { _ = try phones[device].sync.sync() }
                }
                let expected = schedule.last!.1 ?? "deleted"
                let seen = try Self.cloudCopy(phones[0], key, app: app)
                #expect(
                    seen == expected, "\(schedule) synced in the order \(order): \(seen ?? "nil")")
                // A second round changes nothing: the cloud copy is settled.
                for device in order { #expect(try phones[device].sync.sync() == .init()) }
                cases += 1
            }
        }
        print("Block Store convergence: \(cases) cases (5 schedules × 6 orders of 3 devices)")
    }
}
