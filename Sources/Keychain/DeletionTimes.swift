import Device
import Foundation
import Platform
import SecretService

/// When items were deleted on this device (its directory's `keychain-sync/deletions`: a line
/// `<Secret Service path of the item> <ms since 1970>` each — paths, never what the items were),
/// so that the next sync dates its tombstone at the deletion, not at the sync: an update another
/// device made between the two is later than the deletion and wins, as the later write should.
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
            if parts.count == 2, let ms = Int64(parts[1]) { times[String(parts[0])] = ms }
        }
        return times
    }

    /// Notes `paths` as deleted now (best effort: without the note, a tombstone is dated at the
    /// sync that finds the deletion).
    func note(_ paths: [ItemPath]) {
        guard !paths.isEmpty else { return }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var times = read()
        for path in paths { times[path.rawValue] = now }
        write(times)
    }

    /// Keeps only the notes of `paths` (those a sync may still need).
    func keep(only paths: Set<String>) {
        let times = read()
        let kept = times.filter { paths.contains($0.key) }
        if kept.count != times.count { write(kept) }
    }

    private func write(_ times: [String: Int64]) {
        let text = times.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)\n" }.joined()
        try? Files.writeAtomically(Data(text.utf8), to: file)
    }
}
