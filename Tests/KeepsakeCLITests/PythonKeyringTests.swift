import Foundation
import KeepsakeTestSupport
import Testing

/// The repository root, from this file's place in it.
private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

@Suite("Keepsake from Python: keyring's own backend tests through libKeepsakeC.so")
struct PythonKeyringTests {
    @Test(
        "keyring's BackendBasicTests (the pinned keyring release) pass against the Keepsake backend on this pass's provider; keyring picks it once installed; python -m keyring set/get/del go through it; the Secret Service holds no password in clear; a password written from Python is read by the Swift command line, and the other way round"
    )
    func backendBasicTests() throws {
        let python = repository.appendingPathComponent(".build/python-venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            Issue.record("no Python environment: scripts/python-venv makes it (scripts/test does)")
            return
        }
        let library = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("libKeepsakeC.so")
        let service = try PrivateSecretService.start()
        let home = Throwaway.directory("python-home")
        var environment = service.environment
        environment["HOME"] = home.path
        environment["XDG_DATA_HOME"] = home.appendingPathComponent("data").path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent("config").path
        environment["KEEPSAKE_LIBRARY"] = library.path
        environment["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let run = try Spawn.capture(
            python.path,
            [
                "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                home.path, repository.appendingPathComponent("bindings/python/tests").path,
            ], environment: environment)
        let output = String(decoding: run.stdout + run.stderr, as: UTF8.self)
        #expect(run.status == 0, "\(output)")
        let summary = output.split(separator: "\n").last(where: { $0.contains("passed") })
        print("python keyring: \(summary.map(String.init) ?? output.suffix(300).description)")

        // One device, two languages: what Python's keyring keeps, the Swift command line reads
        // (the same app, org.python.keyring), and the other way round.
        let written = try Spawn.capture(
            python.path,
            ["-c", "import keyring; keyring.set_password('cross', 'py', 'from-python-3b7e')"],
            environment: environment)
        #expect(written.status == 0, "\(String(decoding: written.stderr, as: UTF8.self))")
        let app = ["--app-id", "org.python.keyring"]
        let read = try keepsake(
            ["keychain", "get", "--service", "cross", "--account", "py"] + app, service: nil,
            environment: environment)
        #expect(read.text == "from-python-3b7e", "\(read.stderr)")
        let added = try keepsake(
            [
                "keychain", "add", "--service", "cross", "--account", "swift", "--accessible",
                "after-first-unlock-this-device-only",
            ] + app,
            input: Data("from-swift-91c2".utf8), service: nil, environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        let back = try Spawn.capture(
            python.path,
            ["-c", "import keyring; print(keyring.get_password('cross', 'swift'))"],
            environment: environment)
        #expect(String(decoding: back.stdout, as: UTF8.self) == "from-swift-91c2\n")
    }
}
