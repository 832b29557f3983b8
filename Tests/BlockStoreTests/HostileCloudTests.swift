import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

/// The peak resident memory of this process so far, in bytes.
private func peakResidentBytes() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss * 1024
}

/// Whoever holds the cloud plants what a file-sync engine never would: huge objects, symlinks,
/// FIFOs. Every read is bounded by its kind's cap, of regular files only.
@Suite("The cloud read as hostile: size caps, regular files only")
struct HostileCloudTests {
    @Test(
        "a planted 1 GiB account object is refused before it is read: the joining device's memory does not grow"
    )
    func hugeObjectRefusedUnread() throws {
        // Not a kept (swept) cloud: its sparse gigabytes hold nothing but zeros.
        let cloud = Throwaway.directory("huge-cloud")
        defer { try? FileManager.default.removeItem(at: cloud) }
        for name in ["account", "account-escrow", "account-recovery"] {
            let huge = cloud.appendingPathComponent(name)
            _ = FileManager.default.createFile(atPath: huge.path, contents: nil)
            let handle = try FileHandle(forWritingTo: huge)
            try handle.truncate(atOffset: 1 << 30)  // sparse: 1 GiB to whoever reads it
            try handle.close()
        }
        let before = peakResidentBytes()
        let phone = try Phone(cloud: cloud)
        try phone.account.setLockScreen(.pin, passcode: "2468", currentPasscode: nil)
        #expect(throws: (any Error).self) { try phone.sync.join(passcode: "2468") }
        #expect(throws: (any Error).self) {
            try phone.account.join(
                recoveryKey: "AAAA-BBBB-CCCC-DDDD-EEEE-FFFF-GGGG-HHHH")
        }
        #expect(peakResidentBytes() - before < 200 * 1024 * 1024)
        // A huge entry object is refused the same way.
        let entry = cloud.appendingPathComponent("bs-" + String(repeating: "a", count: 64))
        _ = FileManager.default.createFile(atPath: entry.path, contents: nil)
        let entryHandle = try FileHandle(forWritingTo: entry)
        try entryHandle.truncate(atOffset: 1 << 30)
        try entryHandle.close()
        #expect(throws: (any Error).self) {
            _ = try CloudDirectory(cloud).read(entry.lastPathComponent)
        }
        #expect(peakResidentBytes() - before < 200 * 1024 * 1024)
    }

    @Test(
        "a symlink, a FIFO or a directory in place of a cloud object is refused, never followed or waited on"
    )
    func onlyRegularFiles() throws {
        let cloud = newCloud()
        let storage = CloudDirectory(cloud)
        let outside = Throwaway.directory("outside").appendingPathComponent("secret")
        try Data("not the cloud's".utf8).write(to: outside)
        try FileManager.default.createSymbolicLink(
            at: cloud.appendingPathComponent("bs-link"), withDestinationURL: outside)
        #expect(throws: (any Error).self) { _ = try storage.read("bs-link") }
        #expect(mkfifo(cloud.appendingPathComponent("account-key").path, 0o600) == 0)
        let start = ContinuousClock.now
        #expect(throws: (any Error).self) { _ = try storage.read("account-key") }
        #expect(ContinuousClock.now - start < Pace.scaled(.seconds(5)))  // not waited on
        try FileManager.default.createDirectory(
            at: cloud.appendingPathComponent("kv-dir"), withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { _ = try storage.read("kv-dir") }
        #expect(try storage.read("kv-absent") == nil)
    }

    @Test(
        "an existing directory handed to Keepsake keeps its mode; a symlink in its place is refused"
    )
    func directoriesNotChmodded() throws {
        let mine = Throwaway.directory("user-dir")
        chmod(mine.path, 0o755)
        let storage = CloudDirectory(mine)
        try storage.write("bundle", Data("sealed elsewhere".utf8))
        var status = stat()
        stat(mine.path, &status)
        #expect(status.st_mode & 0o777 == 0o755)
        let link = Throwaway.directory("links").appendingPathComponent("cloud")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: mine)
        #expect(throws: (any Error).self) { try CloudDirectory(link).write("x", Data("x".utf8)) }
    }
}
