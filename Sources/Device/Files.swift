import Foundation

/// File rules every store shares: directories 0700, files 0600, writes atomic (temp file, fsync,
/// rename, fsync of the directory), so a reader sees the old or the new bytes in full.
package enum Files {
    package static func ensureDirectory(_ url: URL) throws {
        try FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(url.path, 0o700)
    }

    package static func writeAtomically(_ data: Data, to url: URL) throws {
        let directory = url.deletingLastPathComponent()
        try ensureDirectory(directory)
        let temporary = directory.appendingPathComponent(
            ".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw posixError("open") }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(temporary.path) }
        }
        try data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
                guard written > 0 else { throw posixError("write") }
                offset += written
            }
        }
        guard fsync(fd) == 0 else { throw posixError("fsync") }
        guard rename(temporary.path, url.path) == 0 else { throw posixError("rename") }
        ok = true
        let directoryFD = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// The file's bytes, or nil when it does not exist.
    package static func read(_ url: URL) throws -> Data? {
        do {
            return try Data(contentsOf: url)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return nil
        }
    }

    package static func remove(_ url: URL) throws {
        if unlink(url.path) != 0 && errno != ENOENT { throw posixError("unlink") }
    }

    package static func list(_ directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { !$0.hasPrefix(".") }.sorted()
    }

    private static func posixError(_ call: String) -> Error {
        NSError(
            domain: NSPOSIXErrorDomain, code: Int(errno),
            userInfo: [
                NSLocalizedDescriptionKey: "\(call) failed: \(String(cString: strerror(errno)))"
            ])
    }
}

/// An exclusive advisory lock (flock) on a lock file, shared by every process of the user; held
/// until the value is released. The stores take one around read-modify-write sequences.
package final class FileLock {
    private let fd: Int32

    /// Creates the file (0600, its directory 0700) when needed and waits for the lock.
    package init(_ file: URL) throws {
        try Files.ensureDirectory(file.deletingLastPathComponent())
        fd = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw NSError(
                domain: NSPOSIXErrorDomain, code: Int(errno),
                userInfo: [NSLocalizedDescriptionKey: "the lock file could not be opened"])
        }
        flock(fd, LOCK_EX)
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
