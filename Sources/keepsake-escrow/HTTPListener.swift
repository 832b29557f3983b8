import Escrow
import Foundation
import Platform
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A small HTTP/1.1 listener for the escrow: one request per connection (`Connection: close`),
/// everything bounded — a request head of at most 8 KiB, a body of at most `maximumBody` bytes
/// (Content-Length only), 1 s to send it on a UNIX socket (5 s over TCP, behind a proxy), at
/// most 64 connections at once and, on a UNIX socket, at most 4 of one local user's (more are
/// closed at once): one user's flood of connections, half-open or not, leaves room for every
/// other user's. Each request is handed to `handle` on the connection's own thread, with who
/// sent it (`SO_PEERCRED` on a UNIX socket).
final class HTTPListener: @unchecked Sendable {
    // Sendable: `listener` is written once in init; the connection counts are under a lock.
    typealias Handler =
        @Sendable (
            _ method: String, _ path: String, _ body: Data, _ caller: EscrowCaller,
            _ source: String?
        ) -> (status: Int, body: Data)

    /// The TCP port (0 on a UNIX socket).
    let port: UInt16
    private let listener: Int32
    private let maximumBody: Int
    private let handle: Handler
    /// On a UNIX socket: callers are local users, told apart by uid.
    private let isLocal: Bool
    private let connections = Mutex((total: 0, byUser: [UInt32: Int]()))
    /// Behind a reverse proxy on this machine (`--trust-forwarded-for`): a request from loopback
    /// comes from the address the proxy appended to `X-Forwarded-For`, and one without it is
    /// refused. Set before `run`.
    var trustsForwardedFor = false
    private static let maximumConnections = 64
    private static let maximumPerUser = 4

    init(host: String, port: UInt16, maximumBody: Int, handle: @escaping Handler) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw ListenerError("--listen: \(host) is not an IPv4 address")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ListenerError("no socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ListenerError("cannot listen on \(host):\(port): \(reason)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.listener = fd
        self.port = UInt16(bigEndian: address.sin_port)
        self.maximumBody = maximumBody
        self.handle = handle
        self.isLocal = false
    }

    /// On a UNIX socket at `path` (a stale socket there replaced), which every user may connect
    /// to: who answers is what a device checks (`SO_PEERCRED`), and only the service's user (or
    /// root) can make the directory it is in.
    init(unixSocket path: String, maximumBody: Int, handle: @escaping Handler) throws {
        guard path.hasPrefix("/"), path.utf8.count < 108 else {
            throw ListenerError("--socket: \(path) is not an absolute path under 108 bytes")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ListenerError("no socket: \(String(cString: strerror(errno)))") }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK else {
                close(fd)
                throw ListenerError("--socket: \(path) exists and is not a socket")
            }
            unlink(path)
        }
        let bound = UnixSocketAddress.with(path) { bind(fd, $0, $1) }
        guard bound == 0, chmod(path, 0o666) == 0, listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ListenerError("cannot listen on \(path): \(reason)")
        }
        self.listener = fd
        self.port = 0
        self.maximumBody = maximumBody
        self.handle = handle
        self.isLocal = true
    }

    /// On the socket systemd passed (socket activation: `LISTEN_FDS=1` for this process, the
    /// socket at file descriptor 3); nil when none was passed.
    init?(activatedWith environment: [String: String], maximumBody: Int, handle: @escaping Handler)
    {
        guard environment["LISTEN_PID"].flatMap(Int32.init) == getpid(),
            environment["LISTEN_FDS"] == "1"
        else { return nil }
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        self.listener = 3
        self.port = 0
        self.maximumBody = maximumBody
        self.handle = handle
        self.isLocal = true
    }

    /// Accepts connections until the process ends.
    func run() -> Never {
        while true {
            var peer = sockaddr_in()
            var peerLength = socklen_t(MemoryLayout<sockaddr_in>.size)
            let connection = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listener, $0, &peerLength)
                }
            }
            guard connection >= 0 else { continue }
            // Over TCP, where the request came from (its IPv4 address).
            let address: String? =
                isLocal || peer.sin_family != sa_family_t(AF_INET)
                ? nil : String(cString: inet_ntoa(peer.sin_addr))
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            let uid = isLocal ? LocalService.peerUser(connection) : nil
            if isLocal && uid == nil {
                close(connection)
                continue
            }
            let caller = uid.map(EscrowCaller.user) ?? .network
            guard admit(caller) else {
                close(connection)
                continue
            }
            let thread = Thread { [self] in
                serve(connection, caller, from: address)
                close(connection)
                release(caller)
            }
            thread.stackSize = 512 * 1024
            thread.start()
        }
    }

    /// Takes a place for one connection of `caller`'s, when there is one.
    private func admit(_ caller: EscrowCaller) -> Bool {
        connections.withLock { open in
            guard open.total < Self.maximumConnections else { return false }
            if case .user(let uid) = caller {
                guard open.byUser[uid, default: 0] < Self.maximumPerUser else { return false }
                open.byUser[uid, default: 0] += 1
            }
            open.total += 1
            return true
        }
    }

    private func release(_ caller: EscrowCaller) {
        connections.withLock { open in
            open.total -= 1
            if case .user(let uid) = caller {
                open.byUser[uid, default: 1] -= 1
                if open.byUser[uid] == 0 { open.byUser[uid] = nil }
            }
        }
    }

    /// Serves one request. `address`: the TCP peer's; behind a reverse proxy on this machine
    /// (`trustsForwardedFor`, a loopback peer) the request's source is the address the proxy
    /// appended to `X-Forwarded-For` (its last entry, which no client sets past a proxy that
    /// appends), grouped as `source(_:)` says.
    private func serve(_ connection: Int32, _ caller: EscrowCaller, from address: String?) {
        // A local caller sends its few hundred bytes at once: a second is plenty, and a
        // half-open connection is closed within it.
        let seconds = isLocal ? 1 : 5
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(
            connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(
            connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let deadline = Date() + Double(seconds)
        var buffer = Data()
        var headEnd: Range<Data.Index>?
        while headEnd == nil {
            guard buffer.count < 8192, Date() < deadline, receive(connection, into: &buffer) else {
                return reply(
                    connection, 400, Data("a request head of at most 8 KiB, in \(seconds) s".utf8))
            }
            headEnd = buffer.range(of: Data("\r\n\r\n".utf8))
        }
        let head = String(decoding: buffer[..<headEnd!.lowerBound], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
            return reply(connection, 400, Data("not an HTTP/1.x request".utf8))
        }
        var length = 0
        var forwardedFor: String?
        for line in lines {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            if name == "x-forwarded-for" {
                forwardedFor =
                    value.split(separator: ",").last.map {
                        String($0.trimmingCharacters(in: .whitespaces).prefix(64))
                    }
            }
            if name == "transfer-encoding" {
                return reply(connection, 411, Data("a body with Content-Length only".utf8))
            }
            if name == "content-length" {
                guard let parsed = Int(value), parsed >= 0, parsed <= maximumBody else {
                    return reply(
                        connection, 413, Data("a body of at most \(maximumBody) bytes".utf8))
                }
                length = parsed
            }
        }
        var body = Data(buffer[headEnd!.upperBound...])
        while body.count < length {
            guard Date() < deadline, receive(connection, into: &body) else {
                return reply(
                    connection, 400, Data("the body did not arrive in \(seconds) s".utf8))
            }
        }
        guard body.count == length else {
            return reply(connection, 400, Data("more bytes than Content-Length".utf8))
        }
        var source = address.map(Self.source)
        if trustsForwardedFor, address?.hasPrefix("127.") == true {
            guard let forwarded = forwardedFor.map(Self.source), !forwarded.isEmpty else {
                return reply(
                    connection, 400,
                    Data("a request through the proxy names its client (X-Forwarded-For)".utf8))
            }
            source = forwarded
        }
        let answer = handle(String(requestLine[0]), String(requestLine[1]), body, caller, source)
        reply(connection, answer.status, answer.body)
    }

    /// A client's address as one source: an IPv4 address without a port; an IPv6 address by its
    /// /64 (one subscriber's prefix: its addresses are one source).
    static func source(_ text: String) -> String {
        var text = text.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {  // [v6]:port
            text = String(text[text.index(after: text.startIndex)..<close])
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0.prefix(8)) }
            return "v6:" + bytes.map { String(format: "%02x", $0) }.joined() + "::/64"
        }
        if let colon = text.lastIndex(of: ":") { text = String(text[..<colon]) }  // v4:port
        var v4 = in_addr()
        return inet_pton(AF_INET, text, &v4) == 1 ? text : ""
    }

    /// Reads what arrived; false at end of stream, an error or the receive timeout.
    private func receive(_ connection: Int32, into buffer: inout Data) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = recv(connection, &chunk, chunk.count, 0)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return false }
            buffer.append(contentsOf: chunk[0..<got])
            return true
        }
    }

    private func reply(_ connection: Int32, _ status: Int, _ body: Data) {
        let reason =
            [
                200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
                410: "Gone", 411: "Length Required", 413: "Content Too Large",
                503: "Service Unavailable",
            ][status] ?? "Error"
        var message = Data(
            ("HTTP/1.1 \(status) \(reason)\r\nContent-Type: application/octet-stream\r\n"
                + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n").utf8)
        message.append(body)
        message.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let sent = send(
                    connection, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if sent < 0 && errno == EINTR { continue }
                guard sent > 0 else { return }
                offset += sent
            }
        }
    }
}

struct ListenerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
