import Foundation

/// The command line, split into words, global options and subcommand options.
///
/// Arguments are decoded as strict UTF-8: a non-UTF-8 argument is refused (`errSecParam`) rather
/// than silently repaired into another string.
package struct Arguments {
    /// Words that are not options (`keychain`, `add`).
    package private(set) var words: [String] = []
    /// Options with their values; a repeated option keeps every value.
    private(set) var options: [String: [String]] = [:]
    /// Options without a value (`--all`, `--backup`).
    private(set) var flags: Set<String> = []

    static let flagNames: Set<String> = [
        "all", "backup", "help", "approval", "recovery-key", "passcode", "with-passcode",
        "with-app-password", "skip-protected", "version", "roff",
    ]

    static func fromProcess() throws(CommandError) -> Arguments {
        var raw: [String] = []
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index],
                let string = String(validatingCString: pointer)
            else {
                throw CommandError.param("argument \(index) is not valid UTF-8")
            }
            raw.append(string)
        }
        return try Arguments(raw)
    }

    package init(_ raw: [String]) throws(CommandError) {
        var index = 0
        while index < raw.count {
            let word = raw[index]
            if word.hasPrefix("--") {
                var name = String(word.dropFirst(2))
                var value: String?
                if let equals = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
                if Self.flagNames.contains(name) && value == nil {
                    flags.insert(name)
                } else {
                    if value == nil {
                        index += 1
                        guard index < raw.count else {
                            throw CommandError.usage("--\(name) needs a value")
                        }
                        value = raw[index]
                    }
                    options[name, default: []].append(value!)
                }
            } else {
                words.append(word)
            }
            index += 1
        }
    }

    package func value(_ name: String) -> String? { options[name]?.last }
    package func values(_ name: String) -> [String] { options[name] ?? [] }
    package func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// A count option: absent → `defaultValue`; otherwise a decimal integer within `range`, else a
    /// usage error naming the option (never a trap on a negative or absurd number).
    package func count(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>)
        throws(CommandError) -> Int
    {
        guard let text = value(name) else { return defaultValue }
        guard let number = Int(text), range.contains(number) else {
            throw CommandError.usage(
                "--\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// Options that may be given more than once; every other option takes one value.
    static let repeatable: Set<String> = ["key", "entitled-group"]

    /// Fails on any option the command does not know, so a typo never goes unnoticed, and on a
    /// repeated option that takes one value.
    package func allowOnly(_ names: Set<String>) throws(CommandError) {
        for (name, values) in options where values.count > 1 && !Self.repeatable.contains(name) {
            throw CommandError.usage("--\(name) is given more than once")
        }
        let global: Set<String> = [
            "app-id", "container", "device-dir", "cloud", "cloud-ca", "entitled-group", "tpm",
            "escrow", "counter",
        ]
        for name in Set(options.keys).union(flags)
        where !names.contains(name) && !global.contains(name) {
            throw CommandError.usage("unknown option --\(name)")
        }
    }
}

/// A command-line failure: the status name goes to standard error, the exit code is non-zero.
package struct CommandError: Error {
    package var statusName: String
    package var message: String
    package var exitCode: Int32 = 1

    package static func usage(_ message: String) -> CommandError {
        CommandError(statusName: "usage", message: message, exitCode: 2)
    }
    package static func failure(_ message: String) -> CommandError {
        CommandError(statusName: "failed", message: message)
    }
    package static func param(_ message: String) -> CommandError {
        CommandError(statusName: "errSecParam (-50)", message: message)
    }
}
