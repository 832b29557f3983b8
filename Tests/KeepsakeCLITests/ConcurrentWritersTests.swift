import Foundation
import KeepsakeTestSupport
import Synchronization
import Testing

/// Two devices writing the same items at once, as two people with one account would: each device
/// puts and deletes a small set of Keychain items and key-value entries, while its own syncs and
/// a third stream of syncs (on either device, half of them killed mid-way) run beside them.
/// At the end every device is the same, and each item ends with a write no other acknowledged
/// write is certainly later than — never a value an acknowledged deletion came after.
@Suite("Two devices writing the same items at once, with syncs run concurrently and killed")
struct ConcurrentWritersTests {
    /// An acknowledged write: its key, its value (nil: deleted), and the wall-clock interval
    /// (ms) in which the command ran — its version lies inside.
    struct Write: Sendable {
        var key: String
        var value: String?
        var start: Int64
        var end: Int64
    }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    private static let keychainKeys = ["k0", "k1", "k2"]
    private static let kvKeys = ["v0", "v1", "v2"]

    private static func item(_ key: String) -> [String] {
        ["--service", "concurrent", "--account", key, "--sync", "yes"]
    }

    /// One device's writer: `operations` puts and deletes, a sync every few, from a seeded
    /// sequence (the interleaving with the other device is the machine's).
    private static func writer(
        _ pair: Pair, device: Int, seed: UInt64, operations: Int,
        into writes: borrowing Mutex<[Write]>
    ) throws {
        var random = SeededRandom(seed: seed)
        for index in 0..<operations {
            let start = now()
            switch random.below(10) {
            case 0..<4:
                let key = keychainKeys[random.below(keychainKeys.count)]
                let value = "d\(device)-\(index)"
                var run = try pair.run(device, ["keychain", "update"] + item(key), value)
                if run.status != 0 {
                    run = try pair.run(device, ["keychain", "add"] + item(key), value)
                }
                if run.status == 0 {
                    writes.withLock {
                        $0.append(Write(key: key, value: value, start: start, end: now()))
                    }
                }
            case 4..<6:
                let key = keychainKeys[random.below(keychainKeys.count)]
                if try pair.run(device, ["keychain", "delete"] + item(key)).status == 0 {
                    writes.withLock {
                        $0.append(Write(key: key, value: nil, start: start, end: now()))
                    }
                }
            case 6..<8:
                let key = kvKeys[random.below(kvKeys.count)]
                let value = "d\(device)-\(index)"
                if try pair.run(device, ["kv", "set", "--key", key], value).status == 0 {
                    writes.withLock {
                        $0.append(Write(key: key, value: value, start: start, end: now()))
                    }
                }
            case 8:
                let key = kvKeys[random.below(kvKeys.count)]
                // A removal of a key the device does not hold is still a dated removal.
                if try pair.run(device, ["kv", "remove", "--key", key]).status == 0 {
                    writes.withLock {
                        $0.append(Write(key: key, value: nil, start: start, end: now()))
                    }
                }
            default:
                _ = try pair.run(
                    device, random.chance(50) ? ["keychain", "sync"] : ["kv", "synchronize"])
            }
        }
    }

    /// What a device holds of every key (nil: nothing).
    private static func held(_ pair: Pair, _ device: Int) throws -> [String: String?] {
        var held: [String: String?] = [:]
        for key in keychainKeys {
            let read = try pair.run(device, ["keychain", "get"] + item(key))
            held[key] = read.status == 0 ? .some(read.text) : .some(nil)
        }
        for key in kvKeys {
            let read = try pair.run(device, ["kv", "get", "--key", key])
            held[key] = read.status == 0 && !read.stdout.isEmpty ? .some(read.text) : .some(nil)
        }
        return held
    }

    @Test(
        "every device ends the same, each item with a write no acknowledged write is certainly later than, and no deletion undone"
    )
    func concurrentWriters() throws {
        let pair = try Pair()
        let writes = Mutex<[Write]>([])
        let killed = Mutex(0)
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { lane in
            do {
                if lane < 2 {
                    try Self.writer(
                        pair, device: lane, seed: 54 + UInt64(lane), operations: 60, into: writes)
                } else {
                    // Syncs on either device beside the writers, half killed mid-way (where they change anything).
                    var random = SeededRandom(seed: 99)
                    for _ in 0..<30 {
                        let device = random.below(2)
                        let sync =
                            random.chance(50) ? ["keychain", "sync"] : ["kv", "synchronize"]
                        let dieAfter = random.chance(50) ? random.below(2) : nil
                        let run = try pair.run(device, sync, dieAfter: dieAfter)
                        if run.status == 128 + SIGKILL { killed.withLock { $0 += 1 } }
                    }
                }
            } catch {
                failures.withLock { $0.append("lane \(lane): \(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        // Both devices sync until a whole round changes nothing.
        for _ in 0..<3 {
            for device in [0, 1, 0, 1] {
                for sync in [["keychain", "sync"], ["kv", "synchronize"]] {
                    let run = try pair.run(device, sync)
                    #expect(run.status == 0, "\(sync) on \(device): \(run.stderr)")
                }
            }
        }
        let ends = try (0..<2).map { try Self.held(pair, $0) }
        #expect(ends[0] == ends[1], "the devices differ: \(ends[0]) vs \(ends[1])")
        let all = writes.withLock { $0 }
        var undone = 0
        for key in Self.keychainKeys + Self.kvKeys {
            let writesOfKey = all.filter { $0.key == key }
            guard !writesOfKey.isEmpty else { continue }
            let end = ends[0][key] ?? nil
            // The writes the end could be: with that value, and no write certainly later.
            let candidates = writesOfKey.filter { write in
                write.value == end && !writesOfKey.contains { $0.start > write.end }
            }
            #expect(
                !candidates.isEmpty,
                "\(key) ends as \(end ?? "deleted"); its writes: \(writesOfKey.map { "\($0.value ?? "delete")@\($0.start)-\($0.end)" })"
            )
            if end != nil, candidates.isEmpty,
                writesOfKey.contains(where: { $0.value == nil })
            {
                undone += 1
            }
        }
        #expect(undone == 0)
        print(
            "concurrent writers: \(all.count) acknowledged writes on 2 devices, \(killed.withLock { $0 }) syncs killed, every device the same"
        )
    }
}
