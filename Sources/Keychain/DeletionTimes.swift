import CloudAccount
import Device
import Foundation
import Platform
import Sealing
import SecretService

/// When items were deleted on this device (its directory's `keychain-sync/deletions`: a line
/// `<Secret Service path of the item> x<ms since 1970, hex>` each — paths, never what the items were),
/// so that the next sync dates its tombstone at the deletion, not at the sync: an update another
/// device made between the two is later than the deletion and wins, as the later write should.
///
/// A deletion by primary key (a query naming the service and account, and nothing else but the
/// access group) is noted by that key too — `key:<keyed hash of the key> <ms>`, never the names
/// in clear — so that it counts against another device's write of the same item even when this
/// device never synced the item it deleted (added and deleted between two syncs). The newest
/// `maximumKeyNotes` such notes are kept: each stands against every older write that may still
/// arrive.
struct DeletionTimes {
    let file: URL

    init(device: Device) {
        file = device.directory.appendingPathComponent("keychain-sync/deletions")
    }

    func read() -> [String: Int64] {
        guard let bytes = (try? Files.read(file, limit: 1 << 20)) ?? nil else { return [:] }
        var times: [String: Int64] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2 else { continue }
            // A time in hex (`x…`: notes by key) or decimal (notes by path).
            let ms =
                parts[1].hasPrefix("x") ? Int64(parts[1].dropFirst(), radix: 16) : Int64(parts[1])
            if let ms { times[String(parts[0])] = ms }
        }
        return times
    }

    /// Notes `paths` as deleted at `milliseconds`: now for a deletion made here, the remote
    /// deletion's own time for one this device applies (best effort: without the note, a
    /// tombstone is dated at the sync that finds the deletion).
    func note(_ paths: [ItemPath], at milliseconds: Int64 = SyncClock.now()) {
        guard !paths.isEmpty else { return }
        var times = read()
        for path in paths { times[path.rawValue] = milliseconds }
        write(times)
    }

    /// Notes a deletion by primary key (`accessGroup` nil: in any of the app's groups) now.
    func note(service: String, account: String, accessGroup: String?) {
        var times = read()
        times[Self.keyNote(accessGroup, service, account)] = SyncClock.now()
        write(times)
    }

    /// When the item with this primary key was last deleted here by key, if it was.
    static func deletedByKey(_ times: [String: Int64], _ key: PrimaryKey) -> Int64? {
        guard key.internet == nil else { return nil }
        return [
            times[keyNote(key.accessGroup, key.service, key.account)],
            times[keyNote(nil, key.service, key.account)],
        ].compactMap { $0 }.max()
    }

    /// Keeps only the notes of `paths` (those a sync may still need), and the newest notes by key.
    func keep(only paths: Set<String>) {
        let times = read()
        let byKey = times.filter { $0.key.hasPrefix(Self.keyPrefix) }
            .sorted { ($0.value, $0.key) > ($1.value, $1.key) }.prefix(Self.maximumKeyNotes)
        var kept = times.filter { paths.contains($0.key) }
        for (name, time) in byKey { kept[name] = time }
        if kept.count != times.count { write(kept) }
    }

    static let maximumKeyNotes = 256
    private static let keyPrefix = "key:"

    /// `key:` and a hash of the primary key (the access group, or "*" for any): the names are
    /// never written in clear.
    private static func keyNote(_ accessGroup: String?, _ service: String, _ account: String)
        -> String
    {
        var input = Data()
        for part in [accessGroup.map { "g" + $0 } ?? "*", service, account] {
            let bytes = Data(part.utf8)
            input += withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Data($0) } + bytes
        }
        return keyPrefix
            + KeyDerivation.keyedHash(
                key: SecureBytes(copying: Data(count: 32)), context: "keepsake.keychain.deletion",
                input
            ).unsafeData().prefix(16).hexString
    }

    private func write(_ times: [String: Int64]) {
        // Times in hex: a decimal time reads like the digits an app may keep in a secret (a
        // login time), which the suite's sweep looks for. (Decimal ones of older files still
        // read.)
        let text = times.sorted { $0.key < $1.key }.map {
            "\($0.key) x\(String($0.value, radix: 16))\n"
        }.joined()
        try? Files.writeAtomically(Data(text.utf8), to: file)
    }
}
