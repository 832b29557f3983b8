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
    /// Kept for as long as this reader lives: the descriptor closes with it.
    private let handle: FileHandle

    /// Starts reading `handle` (the read end of the child's pipe) at once.
    package init(_ handle: FileHandle) {
        self.handle = handle
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
        try start(path, arguments, environment: environment, input: input).wait()
    }

    /// Starts a program with `input` on its standard input (fed on a thread of its own, so a
    /// child that reads it late or not at all never holds the caller) and its standard output and
    /// error read beside it; `Child.wait()` reaps it.
    package static func start(
        _ path: String, _ arguments: [String], environment: [String: String], input: Data = Data(),
        keepingInputOpen: Bool = false
    ) throws -> Child {
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
        let feeder = stdinPipe[1]
        let child = Child(
            pid: pid, stdout: ChildOutput(out), stderr: ChildOutput(err),
            input: keepingInputOpen ? feeder : nil)
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
            if !keepingInputOpen { close(feeder) }
            child.fed.signal()
        }.start()
        return child
    }

    /// A child started by `Spawn.start`, until `wait()` reaps it.
    package final class Child: @unchecked Sendable {
        // Sendable: `status` sits behind a mutex, `outcome` behind `waiting`; the readers are
        // thread-safe.
        package let pid: pid_t
        private let stdout: ChildOutput
        private let stderr: ChildOutput
        fileprivate let fed = DispatchSemaphore(value: 0)
        /// The exit status once reaped: until then the pid is this child's (a zombie's at worst).
        private let status = Mutex<Int32?>(nil)
        private let waiting = NSLock()
        private var outcome: (status: Int32, stdout: Data, stderr: Data)?

        /// Standard input's write end, while the caller keeps it open (`keepingInputOpen`).
        private let input: Mutex<Int32?>

        fileprivate init(pid: pid_t, stdout: ChildOutput, stderr: ChildOutput, input: Int32?) {
            self.pid = pid
            self.stdout = stdout
            self.stderr = stderr
            self.input = Mutex(input)
        }

        /// Closes standard input when it was kept open (`keepingInputOpen`): the child reads its
        /// end.
        package func closeInput() {
            input.withLock {
                if let fd = $0 { close(fd) }
                $0 = nil
            }
        }

        /// Sends `signal` (SIGKILL unless told) — only while the child is not reaped, so the pid
        /// can never be another process's.
        package func kill(_ signal: Int32 = SIGKILL) {
            status.withLock { if $0 == nil { _ = Glibc.kill(pid, signal) } }
        }

        /// Waits for the child to end (once; later calls answer the same): its exit status (or
        /// 128 + the signal that ended it) and what it wrote.
        @discardableResult
        package func wait() -> (status: Int32, stdout: Data, stderr: Data) {
            waiting.lock()
            defer { waiting.unlock() }
            if let outcome { return outcome }
            closeInput()  // a child still reading its input would never end
            // Waits for the end without reaping, then reaps under the lock `kill` takes.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            let ended = status.withLock { ended in
                if ended == nil { ended = Spawn.reap(pid) }
                return ended!
            }
            fed.wait()
            let done = (ended, stdout.finish(), stderr.finish())
            outcome = done
            return done
        }
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
    fileprivate static func reap(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
