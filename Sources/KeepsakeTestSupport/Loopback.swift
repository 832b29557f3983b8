import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// TCP on 127.0.0.1 for the harness's own servers and relays.
package enum Loopback {
    /// The address of `port` on loopback.
    package static func address(_ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }

    /// A random port for a server the harness must tell its port (Apache, swtpm and its control
    /// port `+ 1`): below the kernel's ephemeral range (`ip_local_port_range`), where every
    /// port-0 listener (an escrow node, a relay) and every outgoing connection gets its own —
    /// there, a port another test's server already held answered in place of the one that
    /// could not bind it (a WebDAV write answered 413 by an escrow node).
    package static func randomServerPort() -> UInt16 {
        let range = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range")
        let low = range?.split(whereSeparator: \.isWhitespace).first.flatMap { UInt16($0) }
        let top = max(low ?? 32_768, 20_000)
        return UInt16.random(in: 10_000..<(top - 1))
    }

    /// A listening socket on `port` (0: any free one) and the port it got.
    package static func listen(on port: UInt16 = 0, reuseAddress: Bool = false) throws -> (
        socket: Int32, port: UInt16
    ) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("no socket") }
        if reuseAddress {
            var yes: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = Self.address(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 16) == 0 else {
            close(fd)
            throw HarnessError("cannot listen on loopback")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }
}
