import Escrow
import Foundation

// keepsake-escrow: the service a cloud account's devices join through with a passcode. It owns
// its state directory (run it as a user of its own); devices reach it only through
// `EscrowProtocol` — they never hold the counter. See docs/running.md ("Running a guess counter or an escrow") and
// SECURITY.md ("Escrow").

let usage = """
    usage: keepsake-escrow --state DIR [--tpm TCTI] [--listen HOST:PORT]

      --state DIR        the escrow's slots and counts (made 0700; must be this user's alone)
      --tpm TCTI         keep them under a TPM that only this service reaches (device:/dev/tpmrm0,
                         or swtpm:path=SOCKET for a software one): the state key in the TPM, the
                         count stamped with its counter. Without it the state directory is all.
      --listen HOST:PORT where to answer (default 127.0.0.1:8443; port 0 picks a free one).
                         Serve it to devices over HTTPS through a reverse proxy (docs/running.md).
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
    guard ["--state", "--listen", "--tpm"].contains(argument), let value = arguments.popFirst()
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

signal(SIGPIPE, SIG_IGN)
do {
    let directory = URL(fileURLWithPath: state, isDirectory: true)
    let service: EscrowService
    if let tcti = options["--tpm"] {
        let maximumSlots = 20_000  // the table is rewritten at every change: ~1 MB at most
        let slots = try SealedSlots(directory, tcti: tcti, maximumSlots: maximumSlots)
        service = EscrowService(storage: slots, counter: slots.counter, maximumSlots: maximumSlots)
    } else {
        service = EscrowService(storage: try SlotFiles(directory), counter: "file")
    }
    let listener = try HTTPListener(
        host: String(listenAddress[..<colon]), port: port,
        maximumBody: EscrowProtocol.maximumMessage
    ) { method, path, body in
        service.answer(method: method, path: path, body: body)
    }
    // The first line of standard output: where it answers (a harness reads the port from it).
    FileHandle.standardOutput.write(
        Data(
            "keepsake-escrow listening on http://\(listenAddress[..<colon]):\(listener.port)/ (state \(state))\n"
                .utf8))
    listener.run()
} catch {
    fail("\(error)", status: 1)
}
