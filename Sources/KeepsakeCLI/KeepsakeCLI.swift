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
            if let answered = try help(arguments, extraCommands: extraCommands) {
                return answered
            }
            guard let command = words.first else { return 2 }
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
    /// Each command's subcommands (`CommandHelp`'s table): a missing or unknown one, or a word
    /// after it, is a usage error (exit 2) that names what is wanted, before anything is opened
    /// or read.
    static let subcommands: [String: [String]] = Dictionary(
        uniqueKeysWithValues: CommandHelp.all.filter { !$0.verbs.isEmpty }.map {
            ($0.name, $0.verbs)
        })

    /// `--version`, `help [COMMAND]`, `COMMAND --help`, `help --roff` (the man page) and
    /// `completion bash|zsh`, answered from `CommandHelp`'s table with the exit status to end
    /// with; nil for every other command line. No words at all: the usage, exit 2.
    static func help(_ arguments: Arguments, extraCommands: [String: ExtraCommand])
        throws(CommandError) -> Int32?
    {
        let words = arguments.words
        if arguments.has("version") {
            guard words.isEmpty else { throw CommandError.usage("--version takes no command") }
            Output.line("keepsake \(CommandHelp.version)")
            return 0
        }
        if arguments.has("roff") {
            guard words == ["help"] else { throw CommandError.usage("--roff is help's") }
            Output.raw(Data(CommandHelp.roff.utf8))
            return 0
        }
        guard let command = words.first else {
            // Asked for: the usage on standard output; a command line with no command: on
            // standard error, a usage error.
            guard arguments.has("help") else {
                Output.error(CommandHelp.usage)
                return 2
            }
            Output.line(CommandHelp.usage)
            return 0
        }
        switch command {
        case "help":
            guard words.count <= 2 else { throw CommandError.usage("help takes one command") }
            guard let name = words.dropFirst().first else {
                Output.line(CommandHelp.usage)
                return 0
            }
            guard let topic = CommandHelp.named(name) else {
                throw CommandError.usage("no command \(name)\n\(CommandHelp.usage)")
            }
            Output.line(topic.text)
            return 0
        case "completion":
            guard !arguments.has("help") else { break }
            guard words.count == 2, let script = CommandHelp.completion(words[1]) else {
                throw CommandError.usage("keepsake completion bash|zsh")
            }
            Output.raw(Data(script.utf8))
            return 0
        default: break
        }
        guard arguments.has("help") else { return nil }
        if let topic = CommandHelp.named(command) {
            Output.line(topic.text)
        } else if extraCommands[command] == nil {
            throw CommandError.usage("unknown command \(command)\n\(CommandHelp.usage)")
        } else {
            Output.line(CommandHelp.usage)
        }
        return 0
    }

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

/// The usage text (`CommandHelp`'s table).
var usage: String { CommandHelp.usage }

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
