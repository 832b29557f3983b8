import Foundation
import KeepsakeTestSupport
import Testing

/// The repository root, from this file's place in it.
private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

/// What every Debian tool has: a version, help for the whole and for each command (made from the
/// one table the usage comes from), a man page, shell completion, exit statuses as documented.
@Suite("The command line's manners")
struct CommandLineMannersTests {
    private func run(_ arguments: [String]) throws -> Run {
        try keepsake(arguments, service: nil)
    }

    @Test("--version, help, help COMMAND, COMMAND --help and COMMAND VERB --help answer, exit 0")
    func help() throws {
        let version = try run(["--version"])
        #expect(version.status == 0 && version.text.hasPrefix("keepsake "), "\(version.stderr)")
        let whole = try run(["help"])
        #expect(whole.status == 0 && whole.text.contains("usage: keepsake"))
        for command in ["keychain", "lockscreen", "device", "blockstore", "kv", "hint", "status"] {
            for arguments in [["help", command], [command, "--help"]] {
                let answer = try run(arguments)
                #expect(answer.status == 0, "\(arguments): \(answer.stderr)")
                #expect(
                    answer.text.hasPrefix("keepsake \(command):"), "\(arguments): \(answer.text)")
                #expect(answer.text.contains("keepsake \(command)"))
            }
        }
        let verb = try run(["keychain", "add", "--help"])
        #expect(verb.status == 0 && verb.text.hasPrefix("keepsake keychain:"))
        // Mistakes are usage errors, exit 2, with the usage on standard error.
        let unknown = try run(["help", "nope"])
        #expect(unknown.status == 2 && unknown.stderr.contains("no command nope"))
        let bare = try run([])
        #expect(bare.status == 2 && bare.stdout.isEmpty && bare.stderr.contains("usage: keepsake"))
    }

    @Test("keepsake.1 is the man page the table makes, and man renders it without warnings")
    func manPage() throws {
        let made = try run(["help", "--roff"])
        #expect(made.status == 0)
        let kept = try Data(contentsOf: repository.appendingPathComponent("keepsake.1"))
        #expect(
            kept == made.stdout,
            "keepsake.1 is out of date: .build/debug/keepsake help --roff > keepsake.1")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/man") else { return }
        let rendered = try Spawn.capture(
            "/usr/bin/man",
            ["--warnings", "-l", repository.appendingPathComponent("keepsake.1").path],
            environment: ["MANPAGER": "cat", "PATH": "/usr/bin:/bin", "MANWIDTH": "80"])
        let text = String(decoding: rendered.stdout, as: UTF8.self)
        #expect(rendered.status == 0 && text.contains("keychain"), "\(text.prefix(300))")
        #expect(String(decoding: rendered.stderr, as: UTF8.self).isEmpty, "man's warnings")
    }

    @Test(
        "bash and zsh completions are scripts their shells read, offering the commands and a command's verbs"
    )
    func completion() throws {
        let bash = try run(["completion", "bash"])
        #expect(bash.status == 0)
        let script = bash.text
        let checked = try Spawn.capture(
            "/bin/bash",
            [
                "-c",
                script
                    + "\nCOMP_WORDS=(keepsake key); COMP_CWORD=1; _keepsake; echo \"${COMPREPLY[*]}\""
                    + "\nCOMP_WORDS=(keepsake keychain a); COMP_CWORD=2; _keepsake; echo \"${COMPREPLY[*]}\"",
            ], environment: ["PATH": "/usr/bin:/bin"])
        let lines = String(decoding: checked.stdout, as: UTF8.self).split(separator: "\n")
        #expect(checked.status == 0 && lines == ["keychain", "add"], "\(lines)")
        #expect(try run(["completion", "zsh"]).text.contains("bashcompinit"))
        #expect(try run(["completion", "fish"]).status == 2)
    }

    @Test("status with no Secret Service to look in exits 1 saying why, never nothing found")
    func statusThatCouldNotLook() throws {
        let directory = Throwaway.directory("status-nobus")
        let answer = try keepsake(
            ["status", "--device-dir", directory.appendingPathComponent("device").path],
            service: nil,
            environment: [
                "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(directory.path)/no-bus",
                "XDG_RUNTIME_DIR": directory.path,
            ])
        #expect(answer.status == 1, "\(answer.text)")
        #expect(answer.stdout.isEmpty)
        #expect(answer.stderr.contains("Secret Service"), "\(answer.stderr)")
    }
}
