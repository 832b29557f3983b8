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

/// Runs a program to its end with `posix_spawn` and `waitpid` directly — for a child that starts
/// daemons of its own, which Foundation's `Process` here once never reaped (its `waitUntilExit`
/// waited on for good beside a zombie). Standard input from `input` (or /dev/null), standard output
/// and error to /dev/null. Returns the exit status (or 128 + the signal).
package enum Spawn {
    package static func run(
        _ path: String, _ arguments: [String], environment: [String: String], input: URL? = nil
    ) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, input?.path ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let started = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard started == 0 else { throw HarnessError("cannot start \(path): errno \(started)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
