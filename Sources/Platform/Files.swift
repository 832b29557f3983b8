import Foundation

/// File rules every store shares: directories 0700, files 0600, writes atomic (temp file, fsync,
/// rename, fsync of the directory), so a reader sees the old or the new bytes in full.
package enum Files {
    /// Makes `url` (and missing parents) with mode 0700. A directory that already exists is left
    /// as it is — never chmodded, so a user's own directory handed in (`transfer --out DIR/f`)
    /// keeps its mode — and must be a real directory: a symlink or a file there is refused.
    package static func ensureDirectory(_ url: URL) throws {
        var status = stat()
        if lstat(url.path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFDIR else {
                throw refusal("\(url.lastPathComponent) is not a directory (a symlink or a file)")
            }
            return
        }
        try FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// Refuses a place the user does not hold alone: a directory or file (when it exists) that is
    /// a symlink, owned by another user, or writable by the group or others. What Keepsake keeps
    /// in a device directory (the guess lock, the settings, the device ID) guards the device, so a
    /// directory another user controls is never used (OpenSSH's StrictModes). A missing one is
    /// fine: Keepsake makes it 0700.
    package static func checkOwnedByUser(_ url: URL) throws {
        var status = stat()
        guard lstat(url.path, &status) == 0 else {
            if errno == ENOENT { return }
            if errno == ENOTDIR {
                throw refusal(
                    "\(url.deletingLastPathComponent().path) is not a directory: give a directory of your own (or none, for the default)"
                )
            }
            throw refusal("\(url.path) cannot be used: \(String(cString: strerror(errno)))")
        }
        if status.st_mode & S_IFMT == S_IFLNK {
            throw refusal("\(url.path) is a symlink: refusing to use it")
        }
        if status.st_uid != geteuid() {
            throw refusal(
                "\(url.path) belongs to another user (uid \(status.st_uid)): refusing to use it; use a directory of your own"
            )
        }
        if status.st_mode & 0o022 != 0 {
            throw refusal(
                "\(url.path) is writable by other users (mode \(String(status.st_mode & 0o777, radix: 8))): refusing to use it; chmod go-w it"
            )
        }
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

    /// The default cap of `read`: the largest file Keepsake writes (an Auto Backup of 25 MB,
    /// sealed) with room to spare.
    package static let defaultReadLimit = 32 * 1024 * 1024

    /// The file's bytes, or nil when it does not exist. Only a regular file is read — a symlink,
    /// FIFO, device or directory there is refused without being opened for reading (`O_NOFOLLOW`,
    /// `O_NONBLOCK`, then `fstat`) — and only up to `limit` bytes: a larger one is refused before
    /// its contents are read, so untrusted storage cannot make a reader spend its memory.
    package static func read(_ url: URL, limit: Int = defaultReadLimit) throws -> Data? {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw refusal("\(url.lastPathComponent) is a symlink") }
            throw posixError("open")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw posixError("fstat") }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw refusal("\(url.lastPathComponent) is not a regular file")
        }
        guard status.st_size <= limit else {
            throw refusal("\(url.lastPathComponent) is larger than \(limit) bytes")
        }
        // Read at most limit + 1 bytes whatever the size said (a file may grow meanwhile).
        var data = Data(count: Int(status.st_size))
        var total = 0
        while true {
            if total == data.count {
                guard data.count <= limit else {
                    throw refusal("\(url.lastPathComponent) is larger than \(limit) bytes")
                }
                data.count += min(64 * 1024, limit + 1 - data.count)
            }
            let got = data.withUnsafeMutableBytes { raw in
                Glibc.read(fd, raw.baseAddress! + total, raw.count - total)
            }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw posixError("read") }
            if got == 0 { break }
            total += got
        }
        guard total <= limit else {
            throw refusal("\(url.lastPathComponent) is larger than \(limit) bytes")
        }
        data.count = total
        return data
    }

    private static func refusal(_ message: String) -> Error {
        NSError(domain: "Keepsake.Files", code: 1, userInfo: [NSLocalizedDescriptionKey: message])
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
