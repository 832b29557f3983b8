import Escrow
import Foundation

// keepsake-escrow: the service a cloud account's devices join through with a passcode. It owns
// its state directory (run it as a user of its own); devices reach it only through
// `EscrowProtocol` — they never hold the counter. See docs/running.md ("Running a guess counter or an escrow") and
// SECURITY.md ("Escrow").

let usage = """
    usage: keepsake-escrow --state DIR [--tpm TCTI] [--socket PATH | --listen HOST:PORT]

      --state DIR        the escrow's slots and counts (made 0700; must be this user's alone)
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
while let argument = arguments.popFirst() {
    if argument == "--help" || argument == "-h" {
        print(usage)
        exit(0)
    }
    guard ["--state", "--listen", "--socket", "--tpm"].contains(argument),
        let value = arguments.popFirst()
    else {
        fail("unknown option or missing value: \(argument)\n\(usage)", status: 2)
    }
    options[argument] = value
}
guard let state = options["--state"] else { fail("--state DIR is required\n\(usage)", status: 2) }
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
    if let tcti = options["--tpm"] {
        #if !KEEPSAKE_TEST_HOOKS
            // A software TPM's state is a file beside the service's: a copy of the machine
            // (a backup) holds the state key and the count, and putting it back winds counts
            // back. The tests' debug build takes one; the service users run takes the machine's.
            guard tcti.hasPrefix("device:") else {
                fail(
                    "--tpm takes the machine's TPM (device:/dev/tpmrm0): a software TPM's state is a file that a backup copies and puts back, key and count together (SECURITY.md, \"Counted path\")",
                    status: 2)
            }
        #endif
        let maximumSlots = 20_000  // the table is rewritten at every change: ~1 MB at most
        let slots = try SealedSlots(directory, tcti: tcti, maximumSlots: maximumSlots)
        service = EscrowService(
            storage: slots, counter: slots.counter, maximumSlots: maximumSlots, policy: policy,
            paths: paths)
    } else {
        service = EscrowService(
            storage: try SlotFiles(directory), counter: "file", policy: policy, paths: paths)
    }
    let handle: HTTPListener.Handler = { method, path, body, caller in
        service.answer(method: method, path: path, body: body, caller: caller)
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
        Data("keepsake-escrow listening on \(address) (state \(state))\n".utf8))
    listener.run()
} catch {
    fail("\(error)", status: 1)
}
