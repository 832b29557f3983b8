import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP relay on loopback that forwards every connection to `upstream` and records every byte
/// in both directions: what a network observer between a device and a server sees.
package final class RecordingRelay: @unchecked Sendable {
    // Sendable: the listener is written once; the recording sits behind a mutex.
    package let port: UInt16
    private let listener: Int32
    private let upstream: UInt16
    private let recorded = Mutex(Data())

    /// Every byte that crossed the relay so far, both directions, in arrival order.
    package var capture: Data { recorded.withLock { $0 } }

    /// Listens on `port` (0: any free one) and forwards to `upstreamPort`.
    package init(to upstreamPort: UInt16, listeningOn requested: UInt16 = 0) throws {
        upstream = upstreamPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("no socket") }
        var address = Self.loopback(requested)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw HarnessError("cannot listen on loopback")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in acceptLoop() }.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private static func loopback(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(upstream)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            let done = Mutex(0)
            for (from, to) in [(client, server), (server, client)] {
                Thread { [self] in
                    pump(from, to)
                    shutdown(to, Int32(SHUT_WR))
                    let finished = done.withLock {
                        $0 += 1
                        return $0 == 2
                    }
                    if finished {
                        close(client)
                        close(server)
                    }
                }.start()
            }
        }
    }

    private func pump(_ from: Int32, _ to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let got = recv(from, &buffer, buffer.count, 0)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return }
            recorded.withLock { $0.append(contentsOf: buffer[0..<got]) }
            var sent = 0
            while sent < got {
                let n = buffer.withUnsafeBytes {
                    send(to, $0.baseAddress! + sent, got - sent, Int32(MSG_NOSIGNAL))
                }
                guard n > 0 else { return }
                sent += n
            }
        }
    }
}
