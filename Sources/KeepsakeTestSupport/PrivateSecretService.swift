import Device
import Foundation
import Sealing
import SecretService
import Synchronization

/// A private D-Bus session with its own Secret Service provider (gnome-keyring, KeePassXC or
/// KWallet) on a throwaway HOME: the device's Secret Service in tests, the demo and benchmarks.
/// Never touches the user's own keyring.
///
/// The bus has no service activation, so a killed daemon stays dead (as a test of "no Secret
/// Service" needs) until `start()`/`restart()` runs it again.
package final class PrivateSecretService: @unchecked Sendable {
    // Sendable: the mutable process handles are guarded by `state`.

    /// The throwaway root holding HOME, XDG_DATA_HOME, XDG_RUNTIME_DIR and the bus socket.
    package let root: URL
    /// `unix:path=…` of the private bus; what `DBUS_SESSION_BUS_ADDRESS` should be.
    package let busAddress: String
    /// The login collection's master password (what `--unlock` was given).
    package let masterPassword: String
    /// KeePassXC only: whether it saves its database a moment after each change (its default, and
    /// the suites'), or only when it exits. Under a long run of writes KeePassXC 2.7.4 segfaults in
    /// the pooled thread of such a save now and then (the kernel log says so); the benchmark,
    /// which times the calls and not the saves after them, runs it without.
    package let savesAfterEveryChange: Bool
    /// What KeePassXC asks a person (the harness's KeePassXC only).
    package let keepassxcConfirmations: KeePassXCConfirmations

    /// What KeePassXC's Secret Service integration asks a person before it answers a client.
    package enum KeePassXCConfirmations: Sendable {
        /// Nothing: every confirmation and notification off (headless use).
        case off
        /// KeePassXC's own defaults: a client's first access to each item it did not make is
        /// confirmed by a person, a search while the database is locked opens an unlock dialog
        /// and waits in it, deletes are confirmed, uses are notified.
        case asInstalled
        /// Its defaults with the access confirmation off, as the README asks of a user.
        case accessUnconfirmed

        var settings: String {
            switch self {
            case .off:
                "ShowNotification=false\nConfirmAccessItem=false\nConfirmDeleteItem=false\n"
                    + "UnlockBeforeSearch=false"
            case .asInstalled: ""
            case .accessUnconfirmed: "ConfirmAccessItem=false"
            }
        }
    }

    private struct State {
        /// Runs at stop, while the daemons still answer (test devices drop their runtime keys).
        var atStop: [@Sendable () -> Void] = []
        /// The test devices made on this service (`device(_:…)`), rebooted when it stops.
        var devices: [Device] = []
        var bus: Daemon?
        var keyring: Daemon?
    }
    private let state = Mutex(State())

    package var home: URL { root.appendingPathComponent("home") }
    package var dataHome: URL { root.appendingPathComponent("data") }
    package var runtimeDirectory: URL { root.appendingPathComponent("run") }
    /// Where gnome-keyring keeps its keyring files (the "disk" of the Secret Service).
    package var keyringsDirectory: URL { dataHome.appendingPathComponent("keyrings") }

    /// The files the provider keeps its items in (gnome-keyring's keyring files, KeePassXC's
    /// database).
    package func storageFiles() throws -> [URL] {
        // At exit only, KeePassXC's file would hold nothing written since it started.
        precondition(
            provider != .keepassxc || savesAfterEveryChange,
            "start KeePassXC with savesAfterEveryChange to read its file")
        return switch provider {
        case .gnomeKeyring:
            try FileManager.default.contentsOfDirectory(
                at: keyringsDirectory, includingPropertiesForKeys: nil)
        case .keepassxc: [root.appendingPathComponent("keepsake.kdbx")]
        case .kwallet: [dataHome.appendingPathComponent("kwalletd/kdewallet.kwl")]
        }
    }

    /// The environment a child process (e.g. the `keepsake` CLI) needs to use this service.
    package var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = home.path
        env["XDG_DATA_HOME"] = dataHome.path
        env["XDG_RUNTIME_DIR"] = runtimeDirectory.path
        env["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        env.removeValue(forKey: "DISPLAY")
        env.removeValue(forKey: "WAYLAND_DISPLAY")
        return env
    }

    /// A new connection (its own D-Bus connection and session) to this service.
    package func connection(timeout: Duration = .seconds(5)) -> SecretServiceConnection {
        SecretServiceConnection(busAddress: busAddress, timeout: timeout)
    }

    /// The Secret Service providers the harness can run privately.
    package enum Provider: String, Sendable, CaseIterable {
        case gnomeKeyring = "gnome-keyring"
        case keepassxc
        case kwallet
    }

    /// The provider tests run on: `KEEPSAKE_TEST_PROVIDER` (read by this test-support target
    /// only, never by the shipped library), gnome-keyring by default. `scripts/test` runs the
    /// provider-neutral suites again on each other provider.
    package static let defaultProvider: Provider =
        ProcessInfo.processInfo.environment["KEEPSAKE_TEST_PROVIDER"].flatMap(
            Provider.init(rawValue:))
        ?? .gnomeKeyring

    /// Whether this pass runs the suites that test a rule of Keepsake's own rather than the
    /// provider's part in it — a hostile cloud, the cloud account's sync, joins and rotation, a
    /// format, guess counting, the TPM and the escrow, the process's memory: the gnome-keyring
    /// pass runs every suite; the other providers' passes (`scripts/test`)
    /// skip those, whose outcome the provider does not decide.
    package static let runsKeepsakesOwnRules = defaultProvider == .gnomeKeyring

    /// Which provider this one is.
    package let provider: Provider

    /// Starts a bus and an unlocked provider (gnome-keyring's secrets component, or KeePassXC
    /// with its Secret Service integration on a database of its own).
    ///
    /// KeePassXC saves its database at exit only unless `savesAfterEveryChange` (as users run
    /// it): a test that restarts its provider (whose SIGTERM does not reliably reach the save at
    /// exit) or reads its file on disk asks for that save. The others do not: with it, 2.7.4
    /// segfaults now and then in the save's thread under writes on a busy machine (its own race;
    /// kernel log `Thread (pooled)… segfault … libQt5Core`), and the test's provider is gone
    /// from under it. (Only KeePassXC reads this setting.)
    package static func start(
        masterPassword: String = "keepsake-test", provider: Provider = defaultProvider,
        savesAfterEveryChange: Bool = false, keepassxcConfirmations: KeePassXCConfirmations = .off
    ) throws -> PrivateSecretService {
        _ = SuiteSweep.begin
        let service = try PrivateSecretService(
            masterPassword: masterPassword, provider: provider,
            savesAfterEveryChange: savesAfterEveryChange,
            keepassxcConfirmations: keepassxcConfirmations)
        try service.startBus()
        try service.startKeyring()
        Registry.shared.add(service)
        return service
    }

    private init(
        masterPassword: String, provider: Provider, savesAfterEveryChange: Bool,
        keepassxcConfirmations: KeePassXCConfirmations
    ) throws {
        self.provider = provider
        self.savesAfterEveryChange = savesAfterEveryChange
        self.keepassxcConfirmations = keepassxcConfirmations
        let base = FileManager.default.temporaryDirectory
            .appendingPathComponent("keepsake-ss-\(UUID().uuidString.prefix(8))")
        _ = Registry.shared
        root = base
        self.masterPassword = masterPassword
        busAddress = "unix:path=\(base.appendingPathComponent("run/bus").path)"
        for directory in [home, dataHome, runtimeDirectory] {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
    }

    deinit { stop() }

    private func startBus() throws {
        let config = root.appendingPathComponent("bus.conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>\(busAddress)</listen>
          <auth>EXTERNAL</auth>
          <!-- The limits of Debian's standard session.conf: without them dbus-daemon allows only
               128 outstanding calls per connection, and libsecret's searches of many items fail. -->
          <limit name="max_incoming_bytes">1000000000</limit>
          <limit name="max_outgoing_bytes">1000000000</limit>
          <limit name="max_message_size">1000000000</limit>
          <limit name="max_completed_connections">100000</limit>
          <limit name="max_incomplete_connections">10000</limit>
          <limit name="max_connections_per_user">100000</limit>
          <limit name="max_names_per_connection">50000</limit>
          <limit name="max_match_rules_per_connection">50000</limit>
          <limit name="max_replies_per_connection">50000</limit>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """.write(to: config, atomically: true, encoding: .utf8)
        let bus = try Daemon(
            "\(try Self.tool("dbus-daemon").path) --config-file=\(config.path) --nofork --nosyslog",
            environment: environment)
        state.withLock { $0.bus = bus }
        let socket = runtimeDirectory.appendingPathComponent("bus").path
        try Self.wait("the private D-Bus to listen") {
            FileManager.default.fileExists(atPath: socket)
        }
    }

    /// Starts gnome-keyring; with `fileSizeLimit` (blocks, `ulimit -f`) its writes beyond it fail
    /// with EFBIG, as on a full disk.
    private func startKeyring(fileSizeLimit: Int? = nil) throws {
        if provider == .keepassxc { return try KeePassXCLaunch(service: self).start() }
        if provider == .kwallet { return try KWalletLaunch(service: self).start() }
        var env = environment
        env["KEEPSAKE_MASTER_PASSWORD"] = masterPassword
        let limit = fileSizeLimit.map { "trap '' XFSZ; ulimit -f \($0); " } ?? ""
        let keyring = try Daemon(
            limit + "printf %s \"$KEEPSAKE_MASTER_PASSWORD\" | env -u KEEPSAKE_MASTER_PASSWORD "
                + "\(try Self.tool("gnome-keyring-daemon").path) --foreground --unlock --components=secrets",
            environment: env)
        state.withLock { $0.keyring = keyring }
        let probe = connection(timeout: .seconds(2))
        try Self.wait("gnome-keyring to own org.freedesktop.secrets") {
            (try? probe.search(["keepsake-probe": "1"])) != nil
        }
    }

    /// The environment KWallet's tools run in (its daemon, gdbus).
    var kwalletEnvironment: [String: String] {
        var env = environment
        env["QT_QPA_PLATFORM"] = "offscreen"
        env["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        return env
    }

    /// Runs a tool on this service's bus; throws unless it exits 0.
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) throws -> Data {
        let (status, data, _) = try Spawn.capture(
            try Self.tool(tool).path, arguments, environment: kwalletEnvironment)
        guard status == 0 else { throw HarnessError("\(tool) failed") }
        return data
    }

    /// Locks the default collection (`Secret.Service.Lock`, its prompt performed where the
    /// provider answers with one that completes on its own), and returns once the collection says
    /// it is locked: KeePassXC answers the call before its database has locked, which on a busy
    /// machine left the next calls of a test reading an unlocked one.
    package func lock() throws {
        let connection = connection()
        try connection.lock(.default)
        try Self.wait("the default collection to lock", seconds: 30) {
            (try? connection.isLocked(.default)) == true
        }
    }

    /// Unlocks the default collection with the master password, without a prompt: gnome-keyring
    /// through its own interface; KeePassXC, which unlocks only through a dialog, by starting it
    /// again on its database with the password (as a user's login would).
    package func unlock() throws {
        switch provider {
        case .gnomeKeyring:
            try connection().unlock(.login, masterPassword: Data(masterPassword.utf8))
        case .keepassxc:
            stopProvider()
            try startKeyring()
        case .kwallet:
            try KWalletLaunch(service: self).start()
        }
    }

    /// Whether the provider's process is still there.
    package var isProviderAlive: Bool { state.withLock { $0.keyring?.isAlive ?? false } }

    /// Kills the provider (SIGKILL): the bus stays, and once this returns nothing owns
    /// `org.freedesktop.secrets` (the bus lets go of a dead daemon's names a moment after it
    /// goes; a program taking the name at once was refused it now and then).
    package func kill() {
        stopProvider()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, nameIsOwned { usleep(20_000) }
    }

    /// Takes `daemon` as the provider's process (a launch's).
    func adopt(_ daemon: Daemon) { state.withLock { $0.keyring = daemon } }

    func stopProvider() {
        let keyring = state.withLock { state -> Daemon? in
            defer { state.keyring = nil }
            return state.keyring
        }
        keyring?.stop()
    }

    /// Whether something owns `org.freedesktop.secrets` on the private bus.
    private var nameIsOwned: Bool {
        guard state.withLock({ $0.bus }) != nil,
            let reply = try? run(
                "gdbus",
                [
                    "call", "--session", "--timeout", "2", "--dest", "org.freedesktop.DBus",
                    "--object-path", "/org/freedesktop/DBus", "--method",
                    "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.secrets",
                ])
        else { return false }
        return String(decoding: reply, as: UTF8.self).contains("true")
    }

    /// Freezes gnome-keyring (SIGSTOP): calls reach it and never get an answer.
    package func freeze() {
        state.withLock { $0.keyring }?.signal(SIGSTOP)
    }

    /// Thaws a frozen gnome-keyring (SIGCONT).
    package func thaw() {
        state.withLock { $0.keyring }?.signal(SIGCONT)
    }

    /// A reboot of the Secret Service: the daemon is killed, the runtime directory cleared (all
    /// that was memory-backed is forgotten) and the daemon started again, unlocking the login
    /// collection from disk with the master password as a login would. With `fileSizeLimit`
    /// (blocks) the new daemon runs as on a full disk: its writes beyond the limit fail.
    /// `afterDeath`: the daemon died already, and what it had not saved is gone anyway.
    package func restart(fileSizeLimit: Int? = nil, afterDeath: Bool = false) throws {
        // A restart's SIGTERM does not reliably reach KeePassXC's save at exit.
        precondition(
            provider != .keepassxc || savesAfterEveryChange || afterDeath,
            "start KeePassXC with savesAfterEveryChange to restart it")
        if provider == .kwallet {
            // kwalletd5 writes a wallet to disk when it closes it (a session's end): as at logout.
            _ = try? run(
                "gdbus",
                [
                    "call", "--session", "--timeout", "5", "--dest", "org.kde.kwalletd5",
                    "--object-path", "/modules/kwalletd5", "--method",
                    "org.kde.KWallet.closeAllWallets",
                ])
        }
        if provider != .gnomeKeyring {
            // A reboot shuts KeePassXC (or kwalletd5) down cleanly: it finishes saving its database (which it
            // does a moment after each change) before it exits.
            state.withLock { $0.keyring }?.terminate()
        }
        kill()
        let runtime = runtimeDirectory.path
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: runtime)) ?? []
        where entry != "bus" {
            try? FileManager.default.removeItem(atPath: runtime + "/" + entry)
        }
        try startKeyring(fileSizeLimit: fileSizeLimit)
    }

    /// Runs `body` when this service stops, before its daemons go.
    package func atStop(_ body: @escaping @Sendable () -> Void) {
        state.withLock { $0.atStop.append(body) }
    }

    /// Reboots `device` when this service stops (unless it keeps its runtime state).
    package func rebootAtStop(_ device: Device) {
        state.withLock { $0.devices.append(device) }
    }

    /// Stops both daemons and deletes the throwaway directories; the devices on it are rebooted
    /// (their kernel keyrings unlinked) unless `keepingRuntimeState` — a device moving to another
    /// provider keeps its runtime state, as a real machine's would.
    package func stop(keepingRuntimeState: Bool = false) {
        let (pending, devices) = state.withLock { state in
            defer {
                state.atStop = []
                state.devices = []
            }
            return (state.atStop, state.devices)
        }
        pending.forEach { $0() }
        if !keepingRuntimeState { for device in devices { try? device.reboot() } }
        // The device on this service (the command line's too) leaves no keyring behind.
        if !keepingRuntimeState, state.withLock({ $0.bus }) != nil {
            Device.forgetRuntimeState(on: connection(timeout: .seconds(2)))
        }
        stopProvider()
        let bus = state.withLock { state -> Daemon? in
            defer { state.bus = nil }
            return state.bus
        }
        bus?.stop()
        try? FileManager.default.removeItem(at: root)
    }

    // MARK: - Helpers

    package static func tool(_ name: String) throws -> URL {
        for directory in ["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin"] {
            let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw HarnessError("\(name) is not installed (apt-get install dbus gnome-keyring)")
    }

    static func wait(_ what: String, seconds: Double = 10, until ready: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !ready() {
            if Date() > deadline { throw HarnessError("timed out waiting for \(what)") }
            usleep(20_000)
        }
    }
}

/// A harness failure (a missing tool, a daemon that did not come up).
package struct HarnessError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

extension HarnessError {
    /// What a service that now and then fails to start on a busy machine gets: `attempt` up to
    /// three times, `afterFailure` (stopping what it half started) after each that throws; the
    /// last failure is thrown.
    package static func retrying<T>(
        _ attempt: () throws -> T, afterFailure: () -> Void
    ) throws -> T {
        var tries = 0
        while true {
            do { return try attempt() } catch {
                afterFailure()
                tries += 1
                if tries == 3 { throw error }
            }
        }
    }
}

/// Stops every service this process started that is still alive when it exits, so no test run
/// leaves a daemon behind. (A service stops when its last reference goes: keep the value that
/// owns it alive for as long as the test uses the Keychain or Device made from it.)
final class Registry: @unchecked Sendable {
    // Sendable: `services` is guarded by `lock`.
    static let shared = Registry()
    private let lock = NSLock()
    private var services: [WeakService] = []
    private struct WeakService { weak var service: PrivateSecretService? }

    private init() {
        atexit { Registry.shared.stopAll() }
    }

    func add(_ service: PrivateSecretService) {
        lock.withLock {
            services.removeAll { $0.service == nil }
            services.append(WeakService(service: service))
        }
    }

    private var directories: [URL] = []
    private var exits: [@Sendable () -> Void] = []

    func removeAtExit(_ directory: URL) { lock.withLock { directories.append(directory) } }

    /// Runs `body` when the process exits, before the throwaway directories go.
    func atExit(_ body: @escaping @Sendable () -> Void) { lock.withLock { exits.append(body) } }

    func stopAll() {
        let all = lock.withLock { services.compactMap(\.service) }
        all.forEach { $0.stop() }
        lock.withLock { exits }.forEach { $0() }
        for directory in lock.withLock({ directories }) {
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

/// A daemon run under a `sh` guard that kills it when the process that started it is gone, so
/// that a test process that dies (crash, SIGKILL, timeout) never leaves a daemon behind.
///
/// The daemon's pid is only signalled while its guard runs. The daemon is the guard's child: its
/// pid stays its own until the guard reaps it, and the guard ends within a second of that (its
/// `kill -0` fails). A pid signalled later may belong to anyone: the pid space here is 32768 and
/// the suites go through it in about six minutes.
///
/// The daemon's standard output and error go to a log file; a daemon that ends other than by the
/// harness's SIGKILL or SIGTERM is said on standard error with its status (133: SIGTRAP, GLib's
/// fatal error; 139: SIGSEGV) and the last lines it wrote, so that a provider gone under a test
/// shows why.
package final class Daemon: @unchecked Sendable {
    // Sendable: immutable after init; `stop()` is idempotent.
    package let pid: Int32
    private let guardProcess: Process
    private let logDirectory: URL

    package init(_ command: String, environment: [String: String]) throws {
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        logDirectory = Throwaway.directory("daemon")
        let log = logDirectory.appendingPathComponent("log")
        shell.arguments = [
            "-c",
            """
            \(command) >"$1" 2>&1 & echo $!
            while kill -0 $PPID 2>/dev/null && kill -0 $! 2>/dev/null; do sleep 1; done
            if kill -0 $PPID 2>/dev/null; then
              wait $!; status=$?
              case $status in 137|143) ;; *)
                echo "harness: pid $! ($0) ended, status $status; its last output:" >&2
                tail -c 2000 "$1" >&2;;
              esac
            fi
            kill -9 $! 2>/dev/null; wait; rm -rf "${1%/log}"
            """,
            command.split(separator: " ").first { $0.hasPrefix("/") }.map(String.init) ?? "daemon",
            log.path,
        ]
        shell.environment = environment
        let output = Pipe()
        shell.standardInput = FileHandle.nullDevice
        shell.standardOutput = output
        shell.standardError = FileHandle.standardError
        try shell.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty,
            byte != Data("\n".utf8)
        {
            line.append(byte)
        }
        guard let pid = Int32(String(decoding: line, as: UTF8.self)) else {
            throw HarnessError("could not start: \(command)")
        }
        self.pid = pid
        self.guardProcess = shell
    }

    /// Sends `signal` to the daemon while its pid is still its own; false once it is gone.
    @discardableResult
    package func signal(_ signal: Int32) -> Bool {
        guard guardProcess.isRunning else { return false }
        return Foundation.kill(pid, signal) == 0
    }

    /// SIGTERMs the daemon and waits up to five seconds for it to exit on its own.
    func terminate() {
        signal(SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while isAlive, Date() < deadline { usleep(10_000) }
    }

    /// SIGKILLs the daemon, waits until it is gone, then ends its guard.
    package func stop() {
        if signal(SIGCONT), signal(SIGKILL) {
            let deadline = Date().addingTimeInterval(5)
            while isAlive, Date() < deadline { usleep(5_000) }
        }
        if guardProcess.isRunning { guardProcess.terminate() }
        try? FileManager.default.removeItem(at: logDirectory)
    }

    /// True while the process exists and is not a zombie (a zombie waiting to be reaped is dead).
    package var isAlive: Bool {
        guard guardProcess.isRunning,
            let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(close, offsetBy: 2)] != "Z"
    }

    deinit { stop() }
}

extension PrivateSecretService {
    /// The shared instance saves its database at exit only (see `start`): many tests write to it
    /// from many threads, and none restarts it.
    private static let sharedInstance = Result {
        try PrivateSecretService.start()
    }

    private static let sharedCheck = Mutex(())

    /// One private Secret Service for every test of a process that does not disturb it (no kill,
    /// freeze, lock or restart); tests keep apart by using unique service names. A provider that
    /// died under an earlier test (KeePassXC 2.7.4 sometimes crashes under concurrent calls) is
    /// started again, said on standard error, so that one crash fails one test, not the rest.
    package static func shared() throws -> PrivateSecretService {
        let service = try sharedInstance.get()
        try sharedCheck.withLock { _ in
            guard !service.isProviderAlive else { return }
            FileHandle.standardError.write(
                Data("harness: the shared \(service.provider.rawValue) died; started again\n".utf8))
            try service.restart(afterDeath: true)
        }
        return service
    }
}
