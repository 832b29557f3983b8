import Escrow
import EscrowPostgres
import Foundation
import Platform
import Sealing

// keepsake-escrow: the service a cloud account's devices join through with a passcode. It owns
// its state directory (run it as a user of its own); devices reach it only through
// `EscrowProtocol` — they never hold the counter. See docs/running.md ("Running a guess counter or an escrow") and
// SECURITY.md ("Escrow").

let usage = """
    usage: keepsake-escrow --state DIR [--tpm TCTI] [--socket PATH | --listen HOST:PORT]
           keepsake-escrow --store postgresql://… --service-key FILE [--listen HOST:PORT]
           keepsake-escrow migrate --from DIR [--tpm TCTI] --to postgresql://… --service-key FILE
           keepsake-escrow seal-service-key --service-key FILE --service-key-tpm TCTI --out FILE

      --state DIR        the escrow's slots and counts (made 0700; must be this user's alone)
      --store URI        keep them in PostgreSQL instead (libpq's URI: several hosts with
                         target_session_attrs=read-write follow a failover): any number of
                         escrow nodes share one store, each claim counted once (docs/running.md,
                         "Many escrow nodes on PostgreSQL"). For the account's escrow only: a
                         guess counter (--socket) keeps its state on its machine.
      --service-key FILE the 32-byte key (raw, or 64 hex digits) every row is sealed under, which
                         the database never holds: this user's file, readable by it alone, the
                         same on every node.
      --service-key-tpm TCTI
                         the --service-key file is sealed to this TPM (device:/dev/tpmrm0), as
                         seal-service-key wrote it: a copy of the node's disk holds no key.
      seal-service-key   seals a plain --service-key file to this node's TPM into --out (a new
                         file, 600); the plain file is then kept off the node.
      --source-limit N   at most N registrations, claims and witness statements a minute from one
                         network address (an IPv6 /64), across every node of a PostgreSQL store
                         (default: no limit; each account's budget limits its guesses whatever
                         the source).
      --trust-forwarded-for yes
                         behind a reverse proxy on this machine that appends the client's address
                         to X-Forwarded-For (Apache does; nginx with proxy_set_header
                         X-Forwarded-For $proxy_add_x_forwarded_for): a request from loopback
                         comes from that address, and one without it is refused.
      migrate            moves every slot and count of a stopped escrow's state directory into
                         the PostgreSQL store (the directory is left as it was).
      --tpm TCTI         keep them under the machine's TPM (device:/dev/tpmrm0), which only this
                         service's user reaches: the state key in the TPM, the count stamped with
                         its counter. Without it the state directory is all (a copy of it put back
                         winds counts back).
      --socket PATH      answer on this UNIX socket: a device's guess counter
                         (/run/keepsake/counter.sock, in a directory of this service's user or
                         root's). Devices check who answers (SO_PEERCRED) and refuse anyone
                         else. Started by systemd's keepsake-counter.socket, the socket is the
                         one systemd passes (packaging/systemd, scripts/install-guess-counter).
      --listen HOST:PORT answer over TCP (default 127.0.0.1:8443; port 0 picks a free one): the
                         cloud account's escrow, served to devices over HTTPS through a reverse
                         proxy (docs/running.md). A device never registers its guess counter
                         on a TCP port: any local user could answer there.
    """

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("keepsake-escrow: \(message)\n".utf8))
    exit(status)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
let migrating = arguments.first == "migrate"
let sealing = arguments.first == "seal-service-key"
if migrating || sealing { arguments.removeFirst() }
while let argument = arguments.popFirst() {
    if argument == "--help" || argument == "-h" {
        print(usage)
        exit(0)
    }
    let known =
        sealing
        ? ["--service-key", "--service-key-tpm", "--out"]
        : migrating
            ? ["--from", "--to", "--tpm", "--service-key", "--service-key-tpm"]
            : [
                "--state", "--listen", "--socket", "--tpm", "--store", "--service-key",
                "--service-key-tpm", "--source-limit", "--trust-forwarded-for",
            ]
    guard known.contains(argument), let value = arguments.popFirst() else {
        fail("unknown option or missing value: \(argument)\n\(usage)", status: 2)
    }
    options[argument] = value
}

/// The service key `--service-key` names (`ServiceKey`): the file's own, or with
/// `--service-key-tpm` the one it holds sealed to that TPM.
@MainActor func serviceKey() -> SecureBytes {
    guard let path = options["--service-key"] else {
        fail("a PostgreSQL store needs --service-key FILE\n\(usage)", status: 2)
    }
    let tpm = options["--service-key-tpm"]
    if let tpm { checkMachineTPM(tpm, option: "--service-key-tpm") }
    do { return try ServiceKey.load(path, tpm: tpm) } catch {
        fail("--service-key: \(error)", status: 2)
    }
}

/// Refuses a software TPM in the service users run: its state is a file beside the service's, so
/// a copy of the machine (a backup) holds what the TPM was to keep. The tests' debug build takes
/// one.
@MainActor func checkMachineTPM(_ tcti: String, option: String) {
    #if !KEEPSAKE_TEST_HOOKS
        guard tcti.hasPrefix("device:") else {
            fail(
                "\(option) takes the machine's TPM (device:/dev/tpmrm0): a software TPM's state is a file that a backup copies and puts back, key and count together (SECURITY.md, \"Counted path\")",
                status: 2)
        }
    #endif
}

/// The PostgreSQL store at `uri`, under the service key. The URI names no password (the command
/// line is any local user's to read: libpq's passfile, `PGPASSFILE`, holds it) and, for a host
/// off this machine, checks the server's certificate (`sslmode=verify-full`): whoever sits
/// between the nodes and the database could otherwise answer for it, and put counts back.
@MainActor func postgres(_ uri: String) -> PostgresEscrowStore {
    guard uri.hasPrefix("postgresql://") || uri.hasPrefix("postgres://") else {
        fail("--store takes a postgresql:// URI", status: 2)
    }
    let rest = uri.split(separator: "//", maxSplits: 1).last.map(String.init) ?? ""
    let authority = String(rest.prefix { $0 != "/" && $0 != "?" })
    let query = rest.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
    let userinfo = authority.contains("@") ? String(authority.prefix { $0 != "@" }) : ""
    if userinfo.contains(":")
        || query.split(separator: "&").contains(where: { $0.hasPrefix("password=") })
    {
        fail(
            "--store: a password on the command line is any local user's to read (/proc): put it in libpq's passfile (~/.pgpass, or PGPASSFILE)",
            status: 2)
    }
    let hosts = (authority.split(separator: "@").last.map(String.init) ?? "")
        .split(separator: ",").map { host -> String in
            host.hasPrefix("[")
                ? String(host.prefix { $0 != "]" }.dropFirst()) : String(host.prefix { $0 != ":" })
        }
    let local = hosts.allSatisfy {
        $0.isEmpty || $0 == "localhost" || $0.hasPrefix("127.") || $0 == "::1"
    }
    if !local && !query.split(separator: "&").contains("sslmode=verify-full") {
        fail(
            "--store: a database off this machine is reached with sslmode=verify-full (its certificate checked): whoever sits between could otherwise answer for it",
            status: 2)
    }
    do { return try PostgresEscrowStore(uri, serviceKey: serviceKey()) } catch {
        fail("the PostgreSQL store: \(error.message)", status: 1)
    }
}

if sealing {
    guard let path = options["--service-key"], let tcti = options["--service-key-tpm"],
        let out = options["--out"]
    else {
        fail(
            "seal-service-key takes --service-key FILE, --service-key-tpm TCTI and --out FILE\n\(usage)",
            status: 2)
    }
    checkMachineTPM(tcti, option: "--service-key-tpm")
    guard !FileManager.default.fileExists(atPath: out) else {
        fail("--out: \(out) is there already: a sealed key is never written over", status: 2)
    }
    let key: SecureBytes
    do { key = try ServiceKey.load(path, tpm: nil) } catch {
        fail("--service-key: \(error)", status: 2)
    }
    do {
        try Files.writeAtomically(
            try ServiceKey.seal(key, tcti: tcti), to: URL(fileURLWithPath: out))
    } catch {
        fail("seal-service-key: \(error)", status: 1)
    }
    print(
        "keepsake-escrow: the service key is sealed to the TPM at \(tcti) in \(out); start this node with --service-key \(out) --service-key-tpm \(tcti), and keep \(path) off it (each node seals its own copy)"
    )
    exit(0)
}
if migrating {
    guard let from = options["--from"], let to = options["--to"] else {
        fail("migrate takes --from DIR and --to postgresql://…\n\(usage)", status: 2)
    }
    do {
        let moved = try Migration.run(
            from: URL(fileURLWithPath: from, isDirectory: true), tpm: options["--tpm"],
            to: postgres(to))
        print("keepsake-escrow: migrated \(moved) records from \(from)")
        exit(0)
    } catch {
        fail("migrate: \(error)", status: 1)
    }
}
let store = options["--store"]
guard (options["--state"] == nil) != (store == nil) else {
    fail("one of --state DIR or --store postgresql://… is required\n\(usage)", status: 2)
}
if store == nil && options["--service-key-tpm"] != nil {
    fail("--service-key-tpm opens a PostgreSQL store's service key: give --store", status: 2)
}
if store != nil && (options["--socket"] != nil || options["--tpm"] != nil) {
    fail(
        "--store is the account's escrow's: a guess counter (--socket) keeps its state on its machine, and the rows are sealed under --service-key, not a TPM",
        status: 2)
}
let state = options["--state"] ?? ""
let sourceLimit = options["--source-limit"].map { text -> Int in
    guard let limit = Int(text), limit > 0, limit <= 1_000_000 else {
        fail("--source-limit takes a number of requests a minute (1 … 1000000)", status: 2)
    }
    return limit
}
let trustsForwardedFor: Bool
switch options["--trust-forwarded-for"] {
case nil, "no": trustsForwardedFor = false
case "yes": trustsForwardedFor = true
default: fail("--trust-forwarded-for takes yes or no", status: 2)
}
if sourceLimit != nil && options["--socket"] != nil {
    fail(
        "--source-limit is for the network escrow: a guess counter limits each local user",
        status: 2)
}
let listenAddress = options["--listen"] ?? "127.0.0.1:8443"
guard let colon = listenAddress.lastIndex(of: ":"),
    let port = UInt16(listenAddress[listenAddress.index(after: colon)...])
else { fail("--listen takes HOST:PORT", status: 2) }

// How wrong claims are spent and delayed: `ClaimPolicy.real` in every build users get.
#if KEEPSAKE_TEST_HOOKS
    // Test hook (debug builds only): no delays between wrong claims, so that a suite's tens of
    // claims run in seconds (EscrowServiceTests checks the delays on the service itself).
    let policy =
        ProcessInfo.processInfo.environment["KEEPSAKE_TEST_ESCROW_NO_DELAYS"] == "1"
        ? ClaimPolicy(delays: []) : ClaimPolicy.real
#else
    let policy = ClaimPolicy.real
#endif

// On a socket (a device's guess counter) it answers the slots' requests alone: an account's
// witness is the network escrow's, and any local user could fill its table.
let onSocket =
    options["--socket"] != nil
    || ProcessInfo.processInfo.environment["LISTEN_PID"].flatMap(Int32.init) == getpid()
let paths = onSocket ? EscrowProtocol.Path.slots : Set(EscrowProtocol.Path.allCases)

signal(SIGPIPE, SIG_IGN)
do {
    let directory = URL(fileURLWithPath: state, isDirectory: true)
    let service: EscrowService
    if let store {
        // Each node's boot clock is its own: a shared store's delays run on the wall clock.
        service = EscrowService(
            store: postgres(store), maximumSlots: 50_000_000, policy: policy, paths: paths,
            clock: .shared, sourceLimit: sourceLimit)
    } else if let tcti = options["--tpm"] {
        checkMachineTPM(tcti, option: "--tpm")
        let maximumSlots = 20_000  // the table is rewritten at every change: ~1 MB at most
        let slots = try SealedSlots(directory, tcti: tcti, maximumSlots: maximumSlots)
        service = EscrowService(
            storage: slots, counter: slots.counter, maximumSlots: maximumSlots, policy: policy,
            paths: paths, sourceLimit: sourceLimit)
    } else {
        service = EscrowService(
            storage: try SlotFiles(directory), counter: "file", policy: policy, paths: paths,
            sourceLimit: sourceLimit)
    }
    let handle: HTTPListener.Handler = { method, path, body, caller, source in
        service.answer(method: method, path: path, body: body, caller: caller, source: source)
    }
    let maximumBody = EscrowProtocol.maximumMessage
    let listener: HTTPListener
    let address: String
    if let activated = HTTPListener(
        activatedWith: ProcessInfo.processInfo.environment, maximumBody: maximumBody,
        handle: handle)
    {
        (listener, address) = (activated, "the socket systemd passed")
    } else if let socket = options["--socket"] {
        listener = try HTTPListener(unixSocket: socket, maximumBody: maximumBody, handle: handle)
        address = "unix:\(socket)"
    } else {
        listener = try HTTPListener(
            host: String(listenAddress[..<colon]), port: port, maximumBody: maximumBody,
            handle: handle)
        address = "http://\(listenAddress[..<colon]):\(listener.port)/"
    }
    // The first line of standard output: where it answers (a harness reads the port from it).
    FileHandle.standardOutput.write(
        Data(
            "keepsake-escrow listening on \(address) (state \(store == nil ? state : "in PostgreSQL"))\n"
                .utf8))
    listener.trustsForwardedFor = trustsForwardedFor
    listener.run()
} catch {
    fail("\(error)", status: 1)
}
