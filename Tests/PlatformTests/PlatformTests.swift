import Foundation
import KeepsakeTestSupport
import Synchronization
import Testing

@testable import Platform

@Suite(
    "The blocking pool: async callers' blocking calls on threads of its own, never more than its size"
)
struct BlockingPoolTests {
    @Test(
        "40 calls that each block a moment, on a pool of 4: all finish, never more than 4 at once")
    func bounded() async throws {
        let pool = BlockingPool(size: 4)
        let running = Mutex((now: 0, most: 0, done: 0))
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            for _ in 0..<40 {
                pool.run {
                    running.withLock {
                        $0.now += 1
                        $0.most = max($0.most, $0.now)
                    }
                    usleep(5_000)
                    let all = running.withLock {
                        $0.now -= 1
                        $0.done += 1
                        return $0.done == 40
                    }
                    if all { finished.resume() }
                }
            }
        }
        #expect(running.withLock { $0.most } <= 4)
        #expect(running.withLock { $0.done } == 40)
    }

    @Test("offThePool returns the call's value and throws its typed error")
    func values() async throws {
        #expect(try await offThePool { () throws(CancellationError) in 42 } == 42)
        await #expect(throws: CancellationError.self) {
            try await offThePool { () throws(CancellationError) -> Int in throw CancellationError()
            }
        }
    }
}

@Suite(
    "A local service through its UNIX socket: who answers and where, checked before a byte is sent")
struct LocalServiceTests {
    /// A socket listening at a new path under `directory` (made with `mode`); closed at the end.
    private func listening(in mode: mode_t) throws -> (path: String, close: () -> Void) {
        let parent = Throwaway.reachable("local-service", by: 0, mode: Int(mode))
        chmod(parent.path, mode)
        let path = parent.appendingPathComponent("s.sock").path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 4) == 0 else { throw HarnessError("no socket") }
        return (path, { close(fd) })
    }

    @Test(
        "a peer other than the pinned user, a socket in a directory others may write to, a relative path: refused as not the service, nothing sent"
    )
    func refusals() throws {
        let me = geteuid()
        let (path, done) = try listening(in: 0o755)
        defer { done() }
        for peer: LocalService.Peer in [.user(me &+ 1)] {
            do {
                _ = try LocalService.exchange(
                    socket: path, peer: peer, method: "GET", target: "/", body: Data(),
                    limit: 100, timeout: 1)
                Issue.record("answered by the wrong user and taken")
            } catch {
                #expect(error.isNotTheService)
                #expect(error.message.contains("not user \(me &+ 1)"))
            }
        }
        let (loose, looseDone) = try listening(in: 0o777)
        defer { looseDone() }
        do {
            _ = try LocalService.exchange(
                socket: loose, peer: .user(me), method: "GET", target: "/", body: Data(),
                limit: 100, timeout: 1)
            Issue.record("a socket in a directory anyone may write to was taken")
        } catch {
            #expect(error.isNotTheService)
            #expect(error.message.contains("may be written by others"))
        }
        #expect(throws: LocalService.Failure.self) {
            try LocalService.exchange(
                socket: "relative.sock", peer: .anyOtherUser, method: "GET", target: "/",
                body: Data(), limit: 100, timeout: 1)
        }
    }
}
