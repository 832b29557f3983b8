import Foundation

/// The command line described once: each command's subcommands, synopsis and summary. The usage
/// text, `keepsake help [COMMAND]`, `keepsake COMMAND --help`, the man page (`keepsake help
/// --roff`, kept as `keepsake.1`), the shell completions (`keepsake completion bash|zsh`) and the
/// check of a command's words are all made from this table.
struct CommandHelp {
    /// `keychain`.
    let name: String
    /// One line: what the command is for.
    let summary: String
    /// Its subcommands, in the order they are shown (empty: it takes none).
    let verbs: [String]
    /// The synopsis lines after `keepsake`, as usage shows them.
    let synopsis: [String]
    /// What more to know, a paragraph.
    let details: String

    static let all: [CommandHelp] = [
        CommandHelp(
            name: "keychain", summary: "generic passwords, Apple's Keychain semantics",
            verbs: ["add", "get", "update", "delete", "list", "sync"],
            synopsis: [
                "keychain add|get|update|delete|list --service S [--account A] [--sync yes|no|any]",
                "                                    [--accessible CLASS] [--label L] [--access-group G]",
                "keychain sync                       (synchronizable items with --cloud, now)",
            ],
            details: """
                add and update read the secret from standard input; get writes it raw to standard \
                output. A name is its bytes. --accessible takes a data-protection class's name \
                (after-first-unlock, when-unlocked-this-device-only, …).
                """),
        CommandHelp(
            name: "lockscreen", summary: "the device's lock screen: set, unlock, lock, status",
            verbs: ["set", "unlock", "lock", "status"],
            synopsis: [
                "lockscreen set --kind none|swipe|pin|pattern|password   (stdin: current passcode line, new one)",
                "lockscreen unlock | lock | status",
            ],
            details: """
                unlock reads the passcode from standard input, and tells of wrong passcodes since \
                the last unlock (and of wrong claims at the account's escrow).
                """),
        CommandHelp(
            name: "device", summary: "the device: reboot, wipe, transfer, settings, joins",
            verbs: [
                "reboot", "wipe", "transfer", "settings", "join", "requests", "approve",
                "recovery-key", "devices", "remove",
            ],
            synopsis: [
                "device reboot | wipe | transfer --out FILE | --in FILE | settings [--block-store yes|no] [--device-backup yes|no]",
                "device join --approval [--timeout S] | --recovery-key | --passcode   (stdin: the key or passcode)",
                "device requests | approve --code C | recovery-key | devices | remove --id ID",
            ],
            details:
                "Joining a cloud account: by approval of a device of it, by the recovery key, or by the passcode of a device of it."
        ),
        CommandHelp(
            name: "blockstore", summary: "Google's Block Store for the app",
            verbs: ["store", "retrieve", "delete", "e2ee", "sync"],
            synopsis: [
                "blockstore store --key K [--backup] | retrieve [--key K ...|--all] | delete [--key K ...|--all] | e2ee | sync"
            ],
            details:
                "store reads the bytes from standard input; a cloud copy only with --backup under an end-to-end-encryption-capable lock screen."
        ),
        CommandHelp(
            name: "kv", summary: "Apple's ubiquitous key-value store for the app",
            verbs: ["set", "get", "remove", "synchronize"],
            synopsis: ["kv set|get|remove|synchronize --key K"],
            details: "set reads the value from standard input."),
        CommandHelp(
            name: "hint", summary: "the recovery hint: get, set (merge), clear",
            verbs: ["get", "set", "clear"],
            synopsis: [
                "hint get | set [--authenticator-id X] [--wallet W] [--login-at MS] | clear [--profile linux|apple|android]"
            ],
            details:
                "get answers a JSON object, {} when there is none; set refuses a hint with no field."
        ),
        CommandHelp(
            name: "app", summary: "the app: uninstall (what survives is the product's rule)",
            verbs: ["uninstall"], synopsis: ["app uninstall"],
            details:
                "Removes the app's container; synchronizable and AfterFirstUnlock items stay, as on a phone."
        ),
        CommandHelp(
            name: "cloud", summary: "the cloud account: login, logout, status",
            verbs: ["login", "logout", "status"],
            synopsis: [
                "cloud login | logout | status       (--cloud https://…; login: user name and password on stdin)"
            ],
            details: "The WebDAV server's credentials are kept sealed in the Secret Service."),
        CommandHelp(
            name: "status", summary: "every store: local, cloud, last sync, pending, why not",
            verbs: [], synopsis: ["status [--profile linux|apple|android]"],
            details: """
                Reads only. Exits 1, saying why, when it could not look (no Secret Service, a \
                locked collection): it never reports nothing found for what it could not read.
                """),
        CommandHelp(
            name: "help", summary: "this help, or a command's", verbs: [],
            synopsis: ["help [COMMAND]"], details: "Also: keepsake COMMAND --help."),
        CommandHelp(
            name: "completion", summary: "a shell completion script", verbs: ["bash", "zsh"],
            synopsis: ["completion bash|zsh"],
            details:
                "Source it from your shell's startup file: eval \"$(keepsake completion bash)\"."
        ),
    ]

    static func named(_ name: String) -> CommandHelp? { all.first { $0.name == name } }

    static let version = "0.1.0"

    static let globalOptions =
        "[--app-id ID] [--container DIR] [--device-dir DIR] [--cloud DIR|URL] [--cloud-ca FILE] [--tpm TCTI] [--counter URL] [--escrow URL]"

    /// The whole usage: every command's synopsis.
    static var usage: String {
        var lines = ["usage: keepsake \(globalOptions) COMMAND"]
        for command in all { lines += command.synopsis.map { "  " + $0 } }
        lines += [
            "Secrets are read from standard input and written raw to standard output.",
            "keepsake help COMMAND, keepsake COMMAND --help: one command's help. keepsake --version.",
        ]
        return lines.joined(separator: "\n")
    }

    /// One command's help.
    var text: String {
        (["keepsake \(name): \(summary)", "usage:"] + synopsis.map { "  keepsake " + $0 } + [
            "", details, "", "Global options: \(Self.globalOptions)",
            "Exit status: 0 done, 1 failed (the status is named on standard error), 2 usage.",
        ]).joined(separator: "\n")
    }

    /// The man page, in roff.
    static var roff: String {
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(
                of: "-", with: "\\-"
            )
            .replacingOccurrences(of: "…", with: "...").replacingOccurrences(of: "—", with: "\\(em")
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }
            .joined(separator: "\n")
        }
        var out = [
            ".TH KEEPSAKE 1 \"\" \"keepsake \(version)\" \"User Commands\"",
            ".SH NAME", "keepsake \\- a keychain\\-style secure store for Linux",
            ".SH SYNOPSIS", ".B keepsake", escape(globalOptions), ".I COMMAND",
            ".SH DESCRIPTION",
            escape(
                "Apple's Keychain semantics on the freedesktop Secret Service, Google's Block Store, the ubiquitous key-value store and the recovery hint, with a device lock screen and an end-to-end encrypted cloud account. Secrets are read from standard input and written raw to standard output."
            ),
            ".SH COMMANDS",
        ]
        for command in all {
            out += [".TP", ".B \(command.name)", escape(command.summary) + "."]
            for line in command.synopsis {
                out += [".br", escape("keepsake " + line.trimmingCharacters(in: .whitespaces))]
            }
            out += [".br", escape(command.details)]
        }
        out += [
            ".SH OPTIONS",
            ".TP", ".B \\-\\-version", "Print the version and exit.",
            ".TP", ".B \\-\\-help", "Print the usage, or a command's help, and exit.",
            ".TP", ".BI \\-\\-app\\-id \" ID\"",
            "The app (reverse DNS); the default is the command line's own.",
            ".TP", ".BI \\-\\-device\\-dir \" DIR\"", "The device directory.",
            ".TP", ".BI \\-\\-cloud \" DIR|URL\"",
            "The cloud account: a directory or a WebDAV server.",
            ".SH EXIT STATUS",
            "0 done; 1 failed, the status (Apple's OSStatus name, or Google's) named on standard error; 2 a usage error.",
            ".SH SEE ALSO", "docs/command\\-line.md, SECURITY.md",
        ]
        return out.joined(separator: "\n") + "\n"
    }

    /// A completion script for `shell` (bash or zsh).
    static func completion(_ shell: String) -> String? {
        let commands = all.map(\.name).joined(separator: " ")
        let cases = all.filter { !$0.verbs.isEmpty }.map {
            "    \($0.name)) words=\"\($0.verbs.joined(separator: " ")) --help\" ;;"
        }.joined(separator: "\n")
        let bash = """
            # keepsake completion (bash): eval "$(keepsake completion bash)"
            _keepsake() {
              local current=${COMP_WORDS[COMP_CWORD]} command="" word words
              for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
                case $word in -*) ;; *) command=$word; break ;; esac
              done
              if [ -z "$command" ]; then
                words="\(commands) --version --help"
              else
                case $command in
            \(cases)
                *) words="--help" ;;
                esac
              fi
              COMPREPLY=($(compgen -W "$words" -- "$current"))
            }
            complete -F _keepsake keepsake

            """
        switch shell {
        case "bash": return bash
        case "zsh":
            return "# keepsake completion (zsh): eval \"$(keepsake completion zsh)\"\n"
                + "autoload -U +X bashcompinit && bashcompinit\n" + bash
        default: return nil
        }
    }
}
