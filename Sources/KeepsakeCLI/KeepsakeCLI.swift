import BlockStore
internal import CKeepsakeShims
import CloudAccount
import Device
import Foundation
import Keychain
import RecoveryHint
import SecretService
import Synchronization

/// The `keepsake` command line: parse, run, print; failures name their status on standard error.
///
/// The shipped `keepsake` calls `main()` with the real device tuning and no extra commands; the
/// development tool (`keepsake-dev`, never a product) adds `demo`, `bench` and `stress` and the
/// test speed-ups. Nothing here reads a cost or a delay from the environment.
package enum KeepsakeCLI {
    /// A command that only the development tool has.
    package typealias ExtraCommand = (_ verb: String?, _ context: Context) throws -> Void

    package static func main(
        tuning: DeviceTuning = .real, extraCommands: [String: ExtraCommand] = [:]
    ) -> Int32 {
        // Passcodes pass through this process: no core file, no ptrace or /proc/PID/mem by other
        // processes of the user.
        guard keepsake_process_harden() == 0 else {
            Output.error("keepsake: the process could not be made non-dumpable")
            return 1
        }
        releaseCloudLocksOnInterrupt()
        WebDAVCloud.waitNotice.withLock { $0 = { Output.error("keepsake: \($0)") } }
        do {
            let arguments = try Arguments.fromProcess()
            let words = arguments.words
            guard let command = words.first, !arguments.has("help") else {
                Output.line(usage)
                return words.isEmpty && !arguments.has("help") ? 2 : 0
            }
            let verb = words.dropFirst().first
            try checkWords(words, extraCommands: extraCommands)
            let context = try Context(arguments, tuning: tuning)
            switch command {
            case "keychain": try KeychainCommand.run(verb, context)
            case "app": try AppCommand.run(verb, context)
            case "lockscreen": try LockScreenCommand.run(verb, context)
            case "device": try DeviceCommand.run(verb, context)
            case "blockstore": try BlockStoreCommand.run(verb, context)
            case "hint": try HintCommand.run(verb, context)
            case "kv": try KeyValueCommand.run(verb, context)
            case "cloud": try CloudCommand.run(verb, context)
            case "status": try StatusCommand.run(context)
            default:
                guard let extra = extraCommands[command] else {
                    throw CommandError.usage("unknown command \(command)\n\(usage)")
                }
                try extra(verb, context)
            }
            return 0
        } catch {
            let failure = Failure(error)
            Output.error("keepsake: \(failure.statusName): \(failure.message)")
            return failure.exitCode
        }
    }
}

extension KeepsakeCLI {
    /// Each command's subcommands: a missing or unknown one, or a word after it, is a usage error
    /// (exit 2) that names what is wanted, before anything is opened or read.
    static let subcommands: [String: [String]] = [
        "keychain": ["add", "get", "update", "delete", "list", "sync"],
        "app": ["uninstall"],
        "lockscreen": ["set", "unlock", "lock", "status"],
        "device": [
            "reboot", "wipe", "transfer", "settings", "join", "requests", "approve", "recovery-key",
            "devices", "remove",
        ],
        "blockstore": ["store", "retrieve", "delete", "e2ee", "sync"],
        "hint": ["get", "set", "clear"],
        "kv": ["set", "get", "remove", "synchronize"],
        "cloud": ["login", "logout", "status"],
    ]

    static func checkWords(_ words: [String], extraCommands: [String: ExtraCommand])
        throws(CommandError)
    {
        let command = words[0]
        if command == "status" {  // the one command without subcommands
            guard words.count == 1 else {
                throw CommandError.usage("keepsake status takes no subcommand")
            }
            return
        }
        guard let verbs = subcommands[command] else {
            guard extraCommands[command] != nil else {
                throw CommandError.usage("unknown command \(command)\n\(usage)")
            }
            return
        }
        let list = verbs.joined(separator: ", ")
        guard words.count > 1 else {
            throw CommandError.usage("keepsake \(command) needs a subcommand: \(list)")
        }
        guard verbs.contains(words[1]) else {
            throw CommandError.usage("unknown subcommand \(command) \(words[1]): it takes \(list)")
        }
        if words.count > 2 {
            throw CommandError.usage(
                "unexpected argument \"\(words[2])\" (values are given with their option, secrets on standard input)"
            )
        }
    }
}

let usage = """
    usage: keepsake [--app-id ID] [--container DIR] [--device-dir DIR] [--cloud DIR|URL] [--cloud-ca FILE] [--tpm TCTI] [--counter URL] [--escrow URL] COMMAND
      keychain add|get|update|delete|list --service S [--account A] [--sync yes|no|any]
                                          [--accessible CLASS] [--label L] [--access-group G]
      keychain sync                       (synchronizable items with --cloud, now)
      lockscreen set --kind none|swipe|pin|pattern|password   (stdin: current passcode line, new one)
      lockscreen unlock | lock | status
      device reboot | wipe | transfer --out FILE | --in FILE | settings [--block-store yes|no] [--device-backup yes|no]
      device join --approval [--timeout S] | --recovery-key | --passcode   (stdin: the key or passcode)
      device requests | approve --code C | recovery-key | devices | remove --id ID
      blockstore store --key K [--backup] | retrieve [--key K ...|--all] | delete [--key K ...|--all] | e2ee | sync
      kv set|get|remove|synchronize --key K
      hint get | set [--authenticator-id X] [--wallet W] [--login-at MS] | clear [--profile linux|apple|android]
      app uninstall
      cloud login | logout | status       (--cloud https://…; login: user name and password on stdin)
      status [--profile linux|apple|android]   (each store: local, cloud, last sync, pending, why not)
    Secrets are read from standard input and written raw to standard output.
    """

extension KeepsakeCLI {
    /// SIGINT and SIGTERM (Ctrl-C, a service manager stopping a sync) first release the cloud
    /// account's lock this process holds, then end it as the signal would: another device never
    /// waits for an interrupted sync's lock to expire. A signal the process started with ignored
    /// is left ignored.
    static func releaseCloudLocksOnInterrupt() {
        for signalNumber in [SIGINT, SIGTERM] {
            // A signal ignored when the process started (a background job of a script ignores
            // SIGINT) stays ignored, as the shell meant.
            let previous = signal(signalNumber, SIG_IGN)
            if unsafeBitCast(previous, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) {
                continue
            }
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                WebDAVCloud.releaseHeldLocks()
                _exit(128 + signalNumber)
            }
            source.resume()
            interruptSources.append(source)
        }
    }

    /// Kept for the process's life; written once, on the main thread, before any command runs.
    nonisolated(unsafe) private static var interruptSources: [any DispatchSourceSignal] = []
}
