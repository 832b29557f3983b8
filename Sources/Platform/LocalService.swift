import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.1 request to a service of this machine through its UNIX socket, after the kernel
/// said who answers (`SO_PEERCRED`) and the socket's path was checked: whoever can put a socket
/// at that path is the service, so every directory from `/` down to it must belong to root or
/// to the service's user and let nobody else write in it (a sticky directory, as `/tmp`, only
/// where the next one down is theirs). Nothing is sent before both checks pass.
package enum LocalService {
    /// Who is allowed to answer.
    package enum Peer: Sendable, Equatable {
        /// The user the device registered with (as `Answer.peer` said then).
        case user(uid_t)
        /// Any user but the caller's own (a process of the caller's user is never the service),
        /// or root, at a registration; the answer says which one it was.
        case anyOtherUser
    }

    package struct Answer {
        package var status: Int
        package var body: Data
        /// The uid of the process that answered (the service, or root's socket activation).
        package var peer: uid_t
    }

    package struct Failure: Error {
        package var message: String
        /// The peer or the path is not the service's: nothing was sent.
        package var isNotTheService: Bool
    }

    /// `method` `target` with `body`, at most `limit` bytes of answer, within `timeout`.
    package static func exchange(
        socket path: String, peer: Peer, method: String, target: String, body: Data,
        limit: Int, timeout: TimeInterval
    ) throws(Failure) -> Answer {
        guard path.hasPrefix("/"), path.utf8.count < 108 else {
            throw Failure(message: "\(path): not an absolute socket path", isNotTheService: false)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("no socket") }
        defer { close(fd) }
        var time = timeval(
            tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        let connected = UnixSocketAddress.with(path) { connect(fd, $0, $1) }
        guard connected == 0 else { throw failure("\(path): the service does not answer") }
        guard let answering = peerUser(fd) else {
            throw failure("\(path): who answers is unknown")
        }
        try check(peer: answering, expected: peer, path: path)
        var request = Data(
            ("\(method) \(target) HTTP/1.1\r\nHost: localhost\r\n"
                + "Content-Type: application/octet-stream\r\nContent-Length: \(body.count)\r\n"
                + "Connection: close\r\n\r\n").utf8)
        request.append(body)
        var offset = 0
        while offset < request.count {
            let sent = request.withUnsafeBytes {
                send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { throw failure("\(path): the request was not taken") }
            offset += sent
        }
        var answer = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = Date() + timeout
        while true {
            let got = recv(fd, &chunk, chunk.count, 0)
            if got < 0 && errno == EINTR { continue }
            if got == 0 { break }
            guard got > 0, Date() < deadline else { throw failure("\(path): no whole answer") }
            answer.append(contentsOf: chunk[0..<got])
            guard answer.count <= limit + 8192 else {
                throw Failure(
                    message: "\(path): an answer over \(limit) bytes", isNotTheService: false)
            }
        }
        return try parse(answer, limit: limit, path: path, peer: answering)
    }

    /// The peer's uid against what is expected, and the socket's path against the peer.
    private static func check(peer uid: uid_t, expected: Peer, path: String) throws(Failure) {
        switch expected {
        case .user(let pinned) where pinned != uid:
            throw Failure(
                message:
                    "\(path) is answered by user \(uid), not user \(pinned) that this device registered with",
                isNotTheService: true)
        // Root is never an impostor (it reads every keyring anyway), and root's is the
        // listening side of a socket systemd made: answered by root, the service is root's.
        case .anyOtherUser where uid == geteuid() && uid != 0:
            throw Failure(
                message:
                    "\(path) is answered by a process of this user (\(uid)): not a service of its own",
                isNotTheService: true)
        default: break
        }
        // Every directory down to the socket: root's or the peer's, written by nobody else.
        var directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var below: stat?
        while true {
            var info = stat()
            guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
                throw Failure(message: "\(directory): not a directory", isNotTheService: true)
            }
            let trusted = info.st_uid == 0 || info.st_uid == uid
            let othersWrite = info.st_mode & (S_IWGRP | S_IWOTH) != 0
            let sticky = info.st_mode & S_ISVTX != 0
            let nextIsTrusted = below.map { $0.st_uid == 0 || $0.st_uid == uid } ?? false
            guard trusted, !othersWrite || (sticky && nextIsTrusted) else {
                throw Failure(
                    message:
                        "\(path): \(directory) may be written by others than root and the service's user (\(uid)): anyone could answer there",
                    isNotTheService: true)
            }
            if directory == "/" { return }
            below = info
            directory = URL(fileURLWithPath: directory).deletingLastPathComponent().path
        }
    }

    /// The uid of the process at the other end of the UNIX socket `fd`, as the kernel says
    /// (`SO_PEERCRED`: taken at connect, not forgeable by the peer); nil when it does not say.
    package static func peerUser(_ fd: Int32) -> uid_t? {
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            return nil
        }
        return credentials.uid
    }

    private static func parse(_ answer: Data, limit: Int, path: String, peer: uid_t)
        throws(Failure) -> Answer
    {
        guard let end = answer.range(of: Data("\r\n\r\n".utf8)) else {
            throw Failure(message: "\(path): not an HTTP answer", isNotTheService: false)
        }
        let head = String(decoding: answer[..<end.lowerBound], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let statusLine = lines.first?.split(separator: " ") ?? []
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."),
            let status = Int(statusLine[1]), (100...599).contains(status)
        else { throw Failure(message: "\(path): not an HTTP answer", isNotTheService: false) }
        let body = Data(answer[end.upperBound...])
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2,
                parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "content-length"
            else { continue }
            guard Int(parts[1].trimmingCharacters(in: .whitespaces)) == body.count else {
                throw Failure(message: "\(path): an answer cut short", isNotTheService: false)
            }
        }
        guard body.count <= limit else {
            throw Failure(message: "\(path): an answer over \(limit) bytes", isNotTheService: false)
        }
        return Answer(status: status, body: body, peer: peer)
    }

    private static func failure(_ message: String) -> Failure {
        Failure(message: "\(message) (\(String(cString: strerror(errno))))", isNotTheService: false)
    }
}

/// `struct ucred` of `<sys/socket.h>` (behind `_GNU_SOURCE`, so not in Swift's Glibc): what
/// `SO_PEERCRED` fills in.
private struct PeerCredentials {
    var pid: pid_t = 0
    var uid: uid_t = 0
    var gid: gid_t = 0
}
