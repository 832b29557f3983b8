import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Collects what a child process writes to a pipe, on a thread of its own, and stops at end of
/// stream — or once the child has exited and the pipe stays quiet for a moment, because a
/// grandchild the child left running (a daemon it started) may hold the pipe's write end open
/// for ever: reading to end of file would then wait for that daemon, not for the child.
package final class ChildOutput: @unchecked Sendable {
    // Sendable: `data` and `exited` sit behind mutexes; the thread owns the descriptor's reads.
    private let data = Mutex(Data())
    private let exited = Mutex(false)
    private let done = DispatchSemaphore(value: 0)

    /// Starts reading `handle` (the read end of the child's pipe) at once.
    package init(_ handle: FileHandle) {
        let fd = handle.fileDescriptor
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var quietAfterExit = 0
            while true {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, 100)
                if ready < 0 && errno == EINTR { continue }
                if ready > 0 {
                    let got = read(fd, &buffer, buffer.count)
                    if got < 0 && errno == EINTR { continue }
                    guard got > 0 else { break }  // end of stream
                    data.withLock { $0.append(contentsOf: buffer[0..<got]) }
                    quietAfterExit = 0
                } else if exited.withLock({ $0 }) {
                    quietAfterExit += 1
                    if quietAfterExit >= 3 { break }  // exited, and 300 ms without a byte
                }
            }
            done.signal()
        }.start()
    }

    /// What was written, once the child has exited (call after `waitUntilExit`).
    package func finish() -> Data {
        exited.withLock { $0 = true }
        done.wait()
        return data.withLock { $0 }
    }
}
