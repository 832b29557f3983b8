import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A private PostgreSQL server for the escrow's shared store: `initdb` into a throwaway
/// directory, the server on a loopback port of its own (trust authentication for the user
/// `keepsake`, on loopback only), a database `escrow`; optionally a synchronous standby made by
/// `pg_basebackup`. Run as `nobody` when the suite is root (PostgreSQL refuses root). Stopped at
/// the end, killed at exit, nothing left behind.
package final class PrivatePostgres: @unchecked Sendable {
    // Sendable: `process` is replaced only under `lock`; the rest is written once in init.
    package let port: UInt16
    package let dataDirectory: URL
    private let lock = NSLock()
    private var process: Process?

    /// The newest PostgreSQL installed (Debian's postgresql-NN), or nil.
    package static var binaries: URL? {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? [])
            .compactMap(Int.init).sorted()
        guard let newest = versions.last else { return nil }
        let bin = root.appendingPathComponent("\(newest)/bin")
        return FileManager.default.isExecutableFile(
            atPath: bin.appendingPathComponent("postgres").path) ? bin : nil
    }

    /// Whether this machine can run one (the suite's packages installed).
    package static var isAvailable: Bool { binaries != nil }

    /// The user the servers run as: `nobody` when this process is root (PostgreSQL refuses
    /// root, and needs a user with a passwd entry), else this process's.
    private static let runner: (uid: uid_t, gid: gid_t)? = {
        guard geteuid() == 0, let entry = getpwnam("nobody") else { return nil }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }()

    /// A `postgresql://` URI for `database` on `ports` (several: the first primary among them).
    package static func uri(ports: [UInt16], database: String = "escrow") -> String {
        let hosts = ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
        return
            "postgresql://keepsake@\(hosts)/\(database)?target_session_attrs=read-write&connect_timeout=2"
    }

    /// This server's URI.
    package var uri: String { Self.uri(ports: [port]) }

    /// A new server with a database `escrow` (an empty cluster made by `initdb`).
    package static func start() throws -> PrivatePostgres {
        let data = directory("pg-primary").appendingPathComponent("data")
        try tool(
            "initdb",
            ["-D", data.path, "-U", "keepsake", "--auth=trust", "-E", "UTF8", "--locale=C"])
        let server = try PrivatePostgres(dataDirectory: data)
        try server.sql("CREATE DATABASE escrow", database: "postgres")
        return server
    }

    /// A synchronous standby of this server (`pg_basebackup -R`, streaming), made synchronous
    /// (`synchronous_standby_names = '*'`, `synchronous_commit = on`): a commit is answered once
    /// the standby has it.
    package func standby() throws -> PrivatePostgres {
        let data = Self.directory("pg-standby").appendingPathComponent("data")
        try Self.tool(
            "pg_basebackup",
            [
                "-h", "127.0.0.1", "-p", String(port), "-U", "keepsake", "-D", data.path, "-R",
                "-X", "stream", "-c", "fast",
            ])
        let standby = try PrivatePostgres(dataDirectory: data)
        try sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        try sql("ALTER SYSTEM SET synchronous_commit = 'on'")
        try sql("SELECT pg_reload_conf()")
        let deadline = Date() + 60  // a bound for a hang, not a timing
        while Date() < deadline {
            if (try? sql("SELECT sync_state FROM pg_stat_replication")) == "sync" {
                return standby
            }
            usleep(50_000)
        }
        throw HarnessError("the standby never became synchronous")
    }

    /// Starts the server on `dataDirectory` (an `initdb`'s or a base backup's).
    private init(dataDirectory: URL) throws {
        self.dataDirectory = dataDirectory
        var started: (Process, UInt16)?
        var failure = ""
        for _ in 0..<5 where started == nil {
            let port = try Self.freePort()
            let process = try Self.launch(
                "postgres",
                [
                    "-D", dataDirectory.path, "-p", String(port), "-c",
                    "listen_addresses=127.0.0.1", "-c",
                    "unix_socket_directories=\(dataDirectory.path)", "-c", "max_connections=200",
                    "-c", "shared_buffers=64MB", "-c", "wal_sender_timeout=10s",
                ], log: dataDirectory.deletingLastPathComponent().appendingPathComponent("log"))
            if Self.waitReady(port: port, process: process) {
                started = (process, port)
            } else {
                process.killWhileRunning()
                process.waitUntilGone()
                failure =
                    (try? String(
                        contentsOf: dataDirectory.deletingLastPathComponent()
                            .appendingPathComponent("log"), encoding: .utf8)) ?? ""
            }
        }
        guard let (process, port) = started else {
            throw HarnessError("postgres did not start: \(failure.suffix(2000))")
        }
        self.process = process
        self.port = port
    }

    deinit { stop() }

    /// Runs `statement` through `psql` on `database`: its output (unaligned, tuples only).
    @discardableResult
    package func sql(_ statement: String, database: String = "escrow") throws -> String {
        try Self.tool(
            "psql",
            [
                "-h", "127.0.0.1", "-p", String(port), "-U", "keepsake", "-d", database, "-v",
                "ON_ERROR_STOP=1", "-Atc", statement,
            ]
        ).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `pg_dump` of the database as text: what someone with only a dump of it holds.
    package func dump() throws -> String {
        try Self.tool(
            "pg_dump",
            ["-h", "127.0.0.1", "-p", String(port), "-U", "keepsake", "-d", "escrow", "-a"])
    }

    /// Promotes a standby to primary (`pg_promote`, waiting until it takes writes).
    package func promote() throws {
        try sql("SELECT pg_promote(true, 60)")
    }

    /// Kills the server as a crash does: SIGKILL to the postmaster and every process it started.
    package func crash() {
        lock.withLock {
            guard let process, process.isRunning else { return }
            let pid = process.processIdentifier
            let children = Self.children(of: pid)
            kill(pid, SIGKILL)
            for child in children { kill(child, SIGKILL) }
            process.waitUntilGone()
        }
    }

    /// Stops the server (a fast shutdown; killed when it does not stop) and removes its data.
    package func stop() {
        lock.withLock {
            guard let process else { return }
            if process.isRunning {
                kill(process.processIdentifier, SIGINT)
                let deadline = Date() + 30
                while process.isRunning && Date() < deadline { usleep(20_000) }
                let children = Self.children(of: process.processIdentifier)
                process.killWhileRunning()
                for child in children { kill(child, SIGKILL) }
                process.waitUntilGone()
            }
            self.process = nil
        }
        try? FileManager.default.removeItem(at: dataDirectory.deletingLastPathComponent())
    }

    // MARK: - Running PostgreSQL's programs

    /// A directory of its own for one server (its data directory inside, and its log), the
    /// servers' user's.
    private static func directory(_ name: String) -> URL {
        if let runner { return Throwaway.reachable(name, by: runner.uid) }
        return Throwaway.directory(name)
    }

    /// `name` of the installed PostgreSQL with `arguments`, as the servers' user: its standard
    /// output; a failure throws with its standard error.
    @discardableResult
    private static func tool(_ name: String, _ arguments: [String]) throws -> String {
        let (path, argv) = try command(name, arguments)
        let (status, out, err) = try Spawn.capture(path, argv, environment: environment)
        guard status == 0 else {
            throw HarnessError(
                "\(name) failed (\(status)): \(String(decoding: err, as: UTF8.self).suffix(2000))")
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func launch(_ name: String, _ arguments: [String], log: URL) throws -> Process {
        let (path, argv) = try command(name, arguments)
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = argv
        process.environment = environment
        process.standardOutput = output
        process.standardError = output
        try process.run()
        TPMRegistry.shared.add(process)
        return process
    }

    private static func command(_ name: String, _ arguments: [String]) throws -> (
        String, [String]
    ) {
        guard let bin = binaries else {
            throw HarnessError(
                "PostgreSQL is not installed (scripts/install-system-packages: postgresql)")
        }
        let tool = bin.appendingPathComponent(name).path
        guard let runner else { return (tool, arguments) }
        return (
            "/usr/bin/setpriv",
            ["--reuid=\(runner.uid)", "--regid=\(runner.gid)", "--clear-groups", tool] + arguments
        )
    }

    private static var environment: [String: String] {
        [
            "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
            "HOME": runner == nil ? NSHomeDirectory() : "/tmp",
        ]
    }

    private static func freePort() throws -> UInt16 {
        let (socket, port) = try Loopback.listen()
        close(socket)
        return port
    }

    /// Whether the server at `port` takes connections (`pg_isready`) before it exits or a bound
    /// for a hang passes.
    private static func waitReady(port: UInt16, process: Process) -> Bool {
        let deadline = Date() + 60
        while Date() < deadline && process.isRunning {
            if (try? tool("pg_isready", ["-h", "127.0.0.1", "-p", String(port), "-q"])) != nil {
                return true
            }
            usleep(50_000)
        }
        return false
    }

    /// The processes whose parent is `pid` (the postmaster's backends).
    private static func children(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let child = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == pid ? child : nil
        }
    }
}
