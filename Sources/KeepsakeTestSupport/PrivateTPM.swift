import CloudAccount
import Device
import Escrow
import Foundation
import Synchronization
import TPM

/// A private TPM 2.0 for one test device or escrow: `swtpm` on loopback ports or a UNIX socket
/// of its own, its state in a throwaway directory, killed when this value goes (or at exit).
/// Never the machine's TPM.
package final class PrivateTPM: Sendable {
    package let directory: URL
    /// Its loopback port (0 when it listens on a UNIX socket).
    package let port: UInt16
    private let process: Mutex<Process>
    /// Its UNIX socket (control channel beside it, `.ctrl`), when it listens on one.
    package let socket: URL?
    /// The user its socket belongs to, when not this process's (a service of its own user).
    private let owner: uid_t?

    /// The TCTI string tpm2-tss connects with.
    package var tcti: String {
        socket.map { "swtpm:path=\($0.path)" } ?? "swtpm:host=127.0.0.1,port=\(port)"
    }
    /// This TPM as a device's that makes direct passcode slots on it: for tests of devices whose
    /// record holds one.
    package var directSlots: TPMConfiguration { .makingDirectSlots(tcti: tcti) }

    /// Starts swtpm. Its dictionary-attack protection is set to `maxTries` failures (swtpm's own
    /// default is 3), forgiving one every `recoverySeconds`, so that a test sees Keepsake's own
    /// limit unless it asks for the TPM's. `unixSocket`: on a UNIX socket in its own directory
    /// (0700: only this user reaches it — a service's TPM), instead of loopback ports. Its lockout
    /// authorization is then set to a random value the harness keeps (as a careful owner sets a
    /// machine's: Keepsake makes no lock-screen slot on a TPM whose lockout anyone can clear),
    /// unless `openLockout`.
    /// `owner`: the socket in a directory of that user's, under `/tmp` (a service running as
    /// a user of its own reaches it: the harness runs as root).
    package init(
        maxTries: UInt32 = 1000, recoverySeconds: UInt32 = 1, unixSocket: Bool = false,
        openLockout: Bool = false, owner: uid_t? = nil
    ) throws {
        directory =
            owner.map { Throwaway.reachable("swtpm", by: $0) } ?? Throwaway.directory("swtpm")
        self.owner = owner
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("state"), withIntermediateDirectories: true)
        let socket = unixSocket ? directory.appendingPathComponent("sock") : nil
        var started: (UInt16, Process)?
        for _ in 0..<20 {
            let port = socket == nil ? Loopback.randomServerPort() : 0
            guard socket != nil || (Self.isFree(port) && Self.isFree(port + 1)) else { continue }
            if let process = try Self.launch(directory, port: port, socket: socket) {
                started = (port, process)
                break
            }
        }
        guard let (port, process) = started else { throw HarnessError("swtpm did not start") }
        self.port = port
        self.process = Mutex(process)
        self.socket = socket
        if let owner, let socket {
            for path in [socket.path, socket.path + ".ctrl"] { chown(path, owner, owner) }
        }
        let lockout = openLockout ? nil : UUID().uuidString
        lockoutAuthorization = Mutex(lockout)
        let context = try TPMContext(tcti: tcti)
        try context.setDictionaryAttack(
            maxTries: maxTries, recoveryTime: recoverySeconds, lockoutRecovery: recoverySeconds)
        if let lockout { try context.setLockoutAuthorization(Data(lockout.utf8)) }
    }

    /// The lockout authorization the harness set (nil: empty).
    private let lockoutAuthorization: Mutex<String?>

    /// Empties the lockout authorization, as on most machines (`tpm2_changeauth -c lockout`): for
    /// tests of what a slot made on such a TPM does.
    package func clearLockoutAuthorization() throws {
        guard let old = lockoutAuthorization.withLock({ $0 }) else { return }
        let status = try Spawn.run(
            "/usr/bin/tpm2_changeauth", ["-T", tcti, "-c", "lockout", "-p", old],
            environment: ProcessInfo.processInfo.environment)
        guard status == 0 else { throw HarnessError("tpm2_changeauth -c lockout: exit \(status)") }
        lockoutAuthorization.withLock { $0 = nil }
    }

    /// swtpm on `directory`'s state, on `port` or `socket`; nil when it did not come up.
    private static func launch(_ directory: URL, port: UInt16, socket: URL?) throws -> Process? {
        let process = Process()
        process.executableURL = try PrivateSecretService.tool("swtpm")
        let channels =
            socket.map {
                [
                    "--server", "type=unixio,path=\($0.path)", "--ctrl",
                    "type=unixio,path=\($0.path).ctrl",
                ]
            } ?? [
                "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
            ]
        process.arguments =
            ["socket", "--tpm2", "--tpmstate", "dir=\(directory.path)/state"] + channels + [
                "--flags", "not-need-init,startup-clear",
            ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        if let socket { try? FileManager.default.removeItem(at: socket) }
        try process.run()
        TPMRegistry.shared.add(process)
        let ready =
            (try? PrivateSecretService.wait("swtpm", seconds: 5) {
                !process.isRunning
                    || (socket.map { accepts($0) } ?? !isFree(port))
            }) != nil
        if ready && process.isRunning { return process }
        process.killWhileRunning()
        return nil
    }

    deinit { stop() }

    package func stop() {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Kills swtpm (SIGKILL, as in a crash or power loss), keeping its state for `restart()`.
    package func kill() {
        let process = process.withLock { $0 }
        process.killWhileRunning()
        process.waitUntilGone()
    }

    /// Starts swtpm again on the same state and channels after `kill()`.
    package func restart() throws {
        for _ in 0..<20 {
            if let started = try Self.launch(directory, port: port, socket: socket) {
                process.withLock { $0 = started }
                if let owner, let socket {
                    for path in [socket.path, socket.path + ".ctrl"] { chown(path, owner, owner) }
                }
                return
            }
            usleep(100_000)  // the old one's port may be held a moment longer
        }
        throw HarnessError("swtpm did not start again")
    }

    /// A relay that records every byte a client sends this (loopback) swtpm and gets back — its
    /// command channel and, on the next port, its control channel — and the TCTI that goes
    /// through it: what someone on the TPM connection sees (and can replay:
    /// `RecordingRelay.answerFromEarlier`).
    package func recordingRelay() throws -> (relay: RecordingRelay, tcti: String) {
        var relays: (RecordingRelay, RecordingRelay)?
        for _ in 0..<20 where relays == nil {
            let port = Loopback.randomServerPort()
            if let data = try? RecordingRelay(
                to: self.port, listeningOn: port, replayingTPM: true),
                let control = try? RecordingRelay(to: self.port + 1, listeningOn: port + 1)
            {
                relays = (data, control)
            }
        }
        guard let (data, control) = relays else { throw HarnessError("no ports for a relay") }
        controlRelays.withLock { $0.append(control) }
        return (data, "swtpm:host=127.0.0.1,port=\(data.port)")
    }
    private let controlRelays = Mutex<[RecordingRelay]>([])

    /// A context on this TPM, for tests that talk to it the way an attacker would.
    package func context() throws -> TPMContext { try TPMContext(tcti: tcti) }

    /// Whether something accepts connections on the UNIX socket at `path` (its file appears at
    /// bind, a moment before it listens).
    private static func accepts(_ path: URL) -> Bool {
        let fd = Glibc.socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    private static func isFree(_ port: UInt16) -> Bool {
        let fd = Glibc.socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = Loopback.address(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// Kills every swtpm still running at exit.
final class TPMRegistry: @unchecked Sendable {
    // Sendable: `processes` is guarded by `lock`.
    static let shared = TPMRegistry()
    private let lock = NSLock()
    private var processes: [Process] = []
    private init() { atexit { TPMRegistry.shared.killAll() } }
    func add(_ process: Process) { lock.withLock { processes.append(process) } }
    func killAll() { lock.withLock { processes }.forEach { $0.killWhileRunning() } }
}

extension Process {
    /// SIGKILL, only while Foundation has not reaped the process: once it has, its pid may be
    /// another process's (the pid space here is 32768 and a full run goes round it).
    package func killWhileRunning() {
        if isRunning { kill(processIdentifier, SIGKILL) }
    }

    /// Waits until the child has exited: Foundation says so, or the kernel shows it a zombie that
    /// Foundation has not reaped yet (its `waitUntilExit` once waited on one for good here).
    /// For stopping daemons, where nothing needs the exit status.
    package func waitUntilGone() {
        let pid = processIdentifier
        while isRunning {
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")"),
                stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix(
                    "Z")
            {
                return
            }
            usleep(2000)
        }
    }
}

/// The escrow service for test cloud accounts: one private `keepsake-escrow` per cloud account
/// directory (built beside the running binary), listening on a loopback port of its own, its
/// state in a throwaway directory under a private swtpm of its own on a UNIX socket (`--tpm`),
/// started on first use and shared by every test device signed in to that account. Killed at
/// exit.
package final class PrivateEscrow: @unchecked Sendable {
    // Sendable: every property is written once in init.
    private static let escrows = Mutex<[String: PrivateEscrow]>([:])

    package let url: URL
    package let stateDirectory: URL
    /// The TPM it keeps its state under (nil: its state directory alone, `files: true`).
    package let tpm: PrivateTPM?
    private let process: Process

    package var configuration: EscrowConfiguration { EscrowConfiguration(url: url)! }

    /// The uid a guess counter runs as in the tests: a user of its own, as the systemd unit
    /// runs it (no passwd entry needed: `setpriv` takes the number).
    package static let counterUser: uid_t = 64_123

    /// Whether this process can start a guess counter as a user of its own (root, `setpriv`):
    /// a device refuses a counter that runs as its own user.
    package static var canRunCounter: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    }

    /// A device's guess counter as the unit runs it: as `counterUser`, on a UNIX socket in a
    /// directory of that user's, its state in a directory of that user's, under a TPM (swtpm)
    /// whose socket that user owns (or its state directory alone, `files`). `delays`: with the
    /// service's real delays between wrong claims (else none: the suites make tens of claims;
    /// `EscrowServiceTests` checks the delays).
    package static func counter(files: Bool = false, delays: Bool = false) throws -> PrivateEscrow {
        guard canRunCounter else {
            throw HarnessError(
                "a guess counter runs as a user of its own: the harness needs root and setpriv")
        }
        let user = counterUser
        let state = Throwaway.reachable("counter-state", by: user)
        let run = Throwaway.reachable("counter-run", by: user, mode: 0o755)
        let tpm = files ? nil : try PrivateTPM(unixSocket: true, owner: user)
        return try PrivateEscrow(
            stateDirectory: state, tpm: tpm, files: files,
            socket: run.appendingPathComponent("counter.sock"), user: user, delays: delays)
    }

    /// The escrow of the cloud account at `cloud`. Started outside the registry's lock (a
    /// start waits for a process: other tests' lookups must not wait behind it); when two tests
    /// start one for the same account at once, the first registered stays.
    package static func of(_ cloud: URL) throws -> PrivateEscrow {
        let key = cloud.standardizedFileURL.path
        if let known = escrows.withLock({ $0[key] }), known.process.isRunning { return known }
        let started = try PrivateEscrow()
        return escrows.withLock { escrows in
            if let known = escrows[key], known.process.isRunning { return known }
            escrows[key] = started
            return started
        }
    }

    /// The built `keepsake-escrow`: `KEEPSAKE_HARNESS_ESCROW` when set (scripts/demo and
    /// scripts/bench: a release build with the test hooks, which takes a private swtpm, where the
    /// release one refuses it), else beside the running executable (the test bundle,
    /// `keepsake-dev`).
    package static var executable: URL {
        if let given = ProcessInfo.processInfo.environment["KEEPSAKE_HARNESS_ESCROW"] {
            return URL(fileURLWithPath: given)
        }
        let running =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: running).deletingLastPathComponent()
            .appendingPathComponent("keepsake-escrow")
    }

    /// Starts a new escrow (on `stateDirectory` when given: a restart over the same state — then
    /// pass the `tpm` it was made with). Under a new private TPM unless `tpm` is given, or none
    /// with `files`.
    /// `tcti`: how it reaches `tpm`, when not directly (through a relay).
    /// `socket` and `user`: on that UNIX socket, as that user (`counter`). `delays`: the real
    /// delays between wrong claims.
    /// `store`: a node of the escrow whose state is that PostgreSQL store (`--store`), its rows
    /// sealed under the key in the file `serviceKey`, on a loopback port of its own. `arguments`:
    /// more of keepsake-escrow's options (`--source-limit N`).
    package init(
        stateDirectory: URL? = nil, tpm: PrivateTPM? = nil, files: Bool = false,
        tcti: String? = nil, socket: URL? = nil, user: uid_t? = nil, delays: Bool = false,
        store: (uri: String, serviceKey: URL)? = nil, arguments extra: [String] = []
    ) throws {
        self.stateDirectory = stateDirectory ?? Throwaway.directory("escrow")
        self.tpm = files || store != nil ? nil : try tpm ?? PrivateTPM(unixSocket: true)
        let process = Process()
        let arguments =
            (store.map { ["--store", $0.uri, "--service-key", $0.serviceKey.path] }
                ?? ["--state", self.stateDirectory.path])
            + (socket.map { ["--socket", $0.path] } ?? ["--listen", "127.0.0.1:0"])
            + (self.tpm.map { ["--tpm", tcti ?? $0.tcti] } ?? []) + extra
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments =
                ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "--inh-caps=-all"]
                + [Self.executable.path] + arguments
        } else {
            process.executableURL = Self.executable
            process.arguments = arguments
        }
        var environment = ProcessInfo.processInfo.environment
        if !delays { environment["KEEPSAKE_TEST_ESCROW_NO_DELAYS"] = "1" }
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        TPMRegistry.shared.add(process)
        // Its first line says where it listens.
        let reader = output.fileHandleForReading
        var line = Data()
        let deadline = Date() + 60  // a bound for a hang, not a timing
        while !line.contains(UInt8(ascii: "\n")) && Date() < deadline && process.isRunning {
            // Waited for with a bound: a read alone blocks past the deadline when the escrow
            // never writes (a TPM that never answers its first command).
            var ready = pollfd(fd: reader.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let left = Int32(max(0, min(1_000, deadline.timeIntervalSinceNow * 1_000)))
            guard poll(&ready, 1, left) >= 0 || errno == EINTR else { break }
            if ready.revents == 0 { continue }
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        try? reader.close()
        let text = String(decoding: line, as: UTF8.self)
        guard let start = text.range(of: "listening on "),
            let end = text.range(of: " (state", range: start.upperBound..<text.endIndex),
            let url = URL(string: String(text[start.upperBound..<end.lowerBound]))
        else {
            // Gone before this returns: it may hold the state directory's lock until it exits,
            // and the caller may start another escrow on that directory next.
            process.killWhileRunning()
            process.waitUntilGone()
            // The shipped (release) keepsake-escrow refuses a private TPM emulator: the demo and
            // the benchmark need the build with the harness's hooks, which scripts/demo makes.
            let missing = !FileManager.default.isExecutableFile(atPath: Self.executable.path)
            let refusedEmulator = text.contains("--tpm takes the machine's TPM")
            let what =
                missing || refusedEmulator
                ? " — run scripts/demo (or scripts/bench), which builds the keepsake-escrow these need, or build it yourself: swift build -c release --product keepsake-escrow --scratch-path .build/harness-escrow -Xswiftc -DKEEPSAKE_TEST_HOOKS, then KEEPSAKE_HARNESS_ESCROW=$PWD/.build/harness-escrow/release/keepsake-escrow"
                : ""
            throw HarnessError(
                "keepsake-escrow did not start (\(Self.executable.path)): \(text)\(what)")
        }
        self.url = url
        self.process = process
    }

    deinit { stop() }

    /// Kills it (SIGKILL: as in a crash); its state stays for a restart.
    package func stop() {
        process.killWhileRunning()
        process.waitUntilGone()
    }

    package var isRunning: Bool { process.isRunning }
}
