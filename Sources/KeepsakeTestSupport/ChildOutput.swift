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

/// Children started with `posix_spawn` and reaped with `waitpid` directly — for a child that starts
/// daemons of its own, which Foundation's `Process` here once never reaped (its `waitUntilExit`
/// waited on for good beside a zombie). Exit statuses read as Foundation's `terminationStatus`
/// does: the exit code, or the signal that ended the child.
package enum Spawn {
    /// Runs a program to its end: standard input from `input` (or /dev/null), standard output and
    /// error to /dev/null. Returns its exit status.
    package static func run(
        _ path: String, _ arguments: [String], environment: [String: String], input: URL? = nil
    ) throws -> Int32 {
        let pid = try launch(path, arguments, environment: environment) { actions in
            posix_spawn_file_actions_addopen(&actions, 0, input?.path ?? "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        return reap(pid)
    }

    /// Runs a program to its end, `input` on its standard input, and returns its exit status with
    /// what it wrote to standard output and error — read beside it (`ChildOutput`), so a daemon it
    /// leaves running cannot hold the caller on a pipe.
    package static func capture(
        _ path: String, _ arguments: [String], environment: [String: String], input: Data = Data()
    ) throws -> (status: Int32, stdout: Data, stderr: Data) {
        signal(SIGPIPE, SIG_IGN)  // a child that exits before reading its input
        var stdinPipe: [Int32] = [0, 0]
        var stdoutPipe: [Int32] = [0, 0]
        var stderrPipe: [Int32] = [0, 0]
        guard pipe(&stdinPipe) == 0, pipe(&stdoutPipe) == 0, pipe(&stderrPipe) == 0 else {
            throw HarnessError("no pipes")
        }
        // Close-on-exec, so no other child started meanwhile keeps them (the child gets its own
        // copies through dup2, which clears the flag).
        for fd in stdinPipe + stdoutPipe + stderrPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let launched = Result { () throws -> pid_t in
            try launch(path, arguments, environment: environment) { actions in
                posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
                posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
                posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
            }
        }
        // The child's ends are the child's now; ours close with the handles.
        close(stdinPipe[0])
        close(stdoutPipe[1])
        close(stderrPipe[1])
        let out = FileHandle(fileDescriptor: stdoutPipe[0], closeOnDealloc: true)
        let err = FileHandle(fileDescriptor: stderrPipe[0], closeOnDealloc: true)
        let pid: pid_t
        do { pid = try launched.get() } catch {
            close(stdinPipe[1])
            throw error
        }
        let outReader = ChildOutput(out)
        let errReader = ChildOutput(err)
        // The input on a thread of its own: a child that reads it late (or not at all) never
        // holds this one.
        let feeder = stdinPipe[1]
        let fed = DispatchSemaphore(value: 0)
        Thread {
            input.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(feeder, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { break }
                    offset += n
                }
            }
            close(feeder)
            fed.signal()
        }.start()
        let status = reap(pid)
        fed.wait()
        return (status, outReader.finish(), errReader.finish())
    }

    /// Starts `path` with the file actions `setUp` adds; returns its pid.
    private static func launch(
        _ path: String, _ arguments: [String], environment: [String: String],
        _ setUp: (inout posix_spawn_file_actions_t) -> Void
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        setUp(&actions)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let started = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard started == 0 else { throw HarnessError("cannot start \(path): errno \(started)") }
        return pid
    }

    /// Waits for `pid` to end; its exit status, or 128 + the signal that ended it (as a shell
    /// says it: a child killed by SIGHUP is 129, never mistaken for an exit with status 1).
    private static func reap(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
