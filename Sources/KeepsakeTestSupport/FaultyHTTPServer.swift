import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A deliberately bad HTTP server on loopback, for fault injection only (the real path is
/// `PrivateWebDAV`): every request is answered by `behaviour`, which may answer with any status,
/// stall, drop the connection, or stream a body of any size. Records what it was asked.
package final class FaultyHTTPServer: @unchecked Sendable {
    // Sendable: the socket and thread are owned here; mutable state sits behind mutexes.
    package struct Request: Sendable {
        package var method: String
        package var path: String
        package var headers: [String: String]
    }

    package enum Answer: Sendable {
        /// A response with a body (Content-Length set).
        case respond(status: Int, headers: [String: String], body: Data)
        /// Waits, then answers as given.
        indirect case after(seconds: Double, Answer)
        /// Announces `announced` bytes (or none: close-delimited), then streams zeros until
        /// `sent` bytes went or the client hung up.
        case stream(announced: Int?, sent: Int)
        /// Closes the connection without a word.
        case hangUp
        /// Announces `announced` bytes, then sends one every `interval` seconds (a trickle).
        case trickle(announced: Int, interval: Double)
    }

    package let port: Int
    private let listener: Int32
    private let behaviour: @Sendable (Request) -> Answer
    private let log = Mutex<[Request]>([])
    private let running = Mutex(true)

    package var url: URL { URL(string: "http://127.0.0.1:\(port)/dav/account/")! }
    package var requests: [Request] { log.withLock { $0 } }

    package init(_ behaviour: @escaping @Sendable (Request) -> Answer) throws {
        self.behaviour = behaviour
        let (fd, port) = try Loopback.listen(reuseAddress: true)
        listener = fd
        self.port = Int(port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    package func stop() {
        guard
            running.withLock({ running in
                defer { running = false }
                return running
            })
        else {
            return
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while running.withLock({ $0 }) {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            // Close-on-exec: no process the tests start meanwhile keeps the connection.
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            var noPipe: Int32 = 1
            setsockopt(connection, SOL_SOCKET, SO_KEEPALIVE, &noPipe, socklen_t(4))
            Thread { [self] in serve(connection) }.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        while let request = readRequest(connection) {
            log.withLock { $0.append(request) }
            guard answer(behaviour(request), on: connection) else { return }
        }
    }

    /// Reads one request's head and body (by Content-Length); nil when the client is gone.
    private func readRequest(_ connection: Int32) -> Request? {
        var head = Data()
        var byte: UInt8 = 0
        while !head.hasSuffix(Data("\r\n\r\n".utf8)) {
            guard recv(connection, &byte, 1, 0) == 1, head.count < 65536 else { return nil }
            head.append(byte)
        }
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let first = lines[0].split(separator: " ")
        guard first.count >= 2 else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() where line.contains(":") {
            let parts = line.split(separator: ":", maxSplits: 1)
            headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        var remaining = Int(headers["content-length"] ?? "0") ?? 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        while remaining > 0 {
            let got = recv(connection, &buffer, min(remaining, buffer.count), 0)
            guard got > 0 else { return nil }
            remaining -= got
        }
        return Request(method: String(first[0]), path: String(first[1]), headers: headers)
    }

    /// Sends `answer`; false when the connection is over.
    private func answer(_ answer: Answer, on connection: Int32) -> Bool {
        switch answer {
        case .hangUp:
            return false
        case .after(let seconds, let then):
            Thread.sleep(forTimeInterval: seconds)
            return self.answer(then, on: connection)
        case .respond(let status, let headers, let body):
            var text = "HTTP/1.1 \(status) Status\r\nContent-Length: \(body.count)\r\n"
            for (name, value) in headers { text += "\(name): \(value)\r\n" }
            text += "\r\n"
            return write(Data(text.utf8) + body, to: connection)
        case .stream(let announced, let sent):
            var text = "HTTP/1.1 200 OK\r\n"
            if let announced {
                text += "Content-Length: \(announced)\r\n"
            } else {
                text += "Connection: close\r\n"
            }
            text += "\r\n"
            guard write(Data(text.utf8), to: connection) else { return false }
            let chunk = Data(count: 65536)
            var left = sent
            while left > 0 {
                guard write(chunk.prefix(left), to: connection) else { return false }
                left -= min(left, chunk.count)
            }
            return false
        case .trickle(let announced, let interval):
            let head = "HTTP/1.1 200 OK\r\nContent-Length: \(announced)\r\n\r\n"
            guard write(Data(head.utf8), to: connection) else { return false }
            for _ in 0..<announced {
                Thread.sleep(forTimeInterval: interval)
                guard running.withLock({ $0 }), write(Data("x".utf8), to: connection) else {
                    return false
                }
            }
            return false
        }
    }

    private func write(_ data: Data, to connection: Int32) -> Bool {
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let sent = send(
                    connection, bytes.baseAddress! + offset, bytes.count - offset,
                    Int32(MSG_NOSIGNAL))
                if sent <= 0 { return false }
                offset += sent
            }
            return true
        }
    }
}

extension Data {
    fileprivate func hasSuffix(_ suffix: Data) -> Bool {
        count >= suffix.count && self[(endIndex - suffix.count)...] == suffix
    }
}
