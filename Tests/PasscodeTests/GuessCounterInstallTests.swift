import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Device

private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

@Suite(
    "The guess counter installed in one step: the installer's tree, its units as systemd reads them, and the service started the way the socket unit starts it",
    .enabled(if: PrivateEscrow.canRunCounter, "the counter runs as a user of its own: needs root"))
struct GuessCounterInstallTests {
    @Test(
        "scripts/install-guess-counter --root DIR lays out the binary, the units, the user (systemd-sysusers) and the options; systemd-analyze verify finds nothing to say about either unit; without a TPM it refuses unless told --without-tpm"
    )
    func installerTree() throws {
        let root = Throwaway.directory("install-root")
        let installer = repository.appendingPathComponent("scripts/install-guess-counter").path
        let binary = PrivateEscrow.executable.path
        let environment = ProcessInfo.processInfo.environment
        if !FileManager.default.fileExists(atPath: "/dev/tpmrm0") {
            let refused = try Spawn.capture(
                installer, ["--root", root.path, "--binary", binary], environment: environment)
            #expect(refused.status == 1)
            #expect(String(decoding: refused.stderr, as: UTF8.self).contains("--without-tpm"))
        }
        let installed = try Spawn.capture(
            installer, ["--root", root.path, "--without-tpm", "--binary", binary],
            environment: environment)
        #expect(installed.status == 0, "\(String(decoding: installed.stderr, as: UTF8.self))")
        for path in [
            "usr/local/bin/keepsake-escrow", "etc/systemd/system/keepsake-counter.socket",
            "etc/systemd/system/keepsake-counter.service", "etc/keepsake/counter.conf",
            "etc/sysusers.d/keepsake-counter.conf",
        ] {
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path))
        }
        let passwd = try String(
            contentsOf: root.appendingPathComponent("etc/passwd"), encoding: .utf8)
        #expect(passwd.contains("keepsake-counter:x:"))
        // systemd's own targets beside them (the units name sockets.target, multi-user.target).
        let units = root.appendingPathComponent("usr/lib/systemd/system")
        try FileManager.default.createDirectory(at: units, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/systemd/system")
        where name.hasSuffix(".target") {
            let source = "/usr/lib/systemd/system/\(name)"
            if (try? FileManager.default.destinationOfSymbolicLink(atPath: source)) == nil {
                try FileManager.default.copyItem(
                    atPath: source, toPath: units.appendingPathComponent(name).path)
            }
        }
        let verified = try Spawn.capture(
            "/usr/bin/systemd-analyze",
            [
                "verify", "--root=\(root.path)", "keepsake-counter.socket",
                "keepsake-counter.service",
            ],
            environment: environment)
        let said = String(decoding: verified.stdout + verified.stderr, as: UTF8.self)
        #expect(verified.status == 0 && said.isEmpty, "\(said)")
        // A unit with a mistake is caught the same way: the check reads what it claims to.
        let service = root.appendingPathComponent("etc/systemd/system/keepsake-counter.service")
        let text = try String(contentsOf: service, encoding: .utf8)
        try text.replacingOccurrences(of: "ProtectSystem=strict", with: "ProtectSystem=stict")
            .write(to: service, atomically: true, encoding: .utf8)
        let broken = try Spawn.capture(
            "/usr/bin/systemd-analyze",
            ["verify", "--root=\(root.path)", "keepsake-counter.service"], environment: environment)
        #expect(!(broken.stdout + broken.stderr).isEmpty)
    }

    @Test(
        "started as keepsake-counter.socket starts it — a socket root made and listens on, handed to keepsake-escrow running as its own user (systemd-socket-activate, setpriv) — a device registers (pinning root, the listening side), unlocks, and is told of a wrong passcode"
    )
    func socketActivated() throws {
        let run = Throwaway.reachable("activated-run", by: 0, mode: 0o755)
        let state = Throwaway.reachable("activated-state", by: PrivateEscrow.counterUser)
        let socket = run.appendingPathComponent("counter.sock")
        let user = PrivateEscrow.counterUser
        var environment = ProcessInfo.processInfo.environment
        environment["KEEPSAKE_TEST_ESCROW_NO_DELAYS"] = "1"
        let activator = try Spawn.start(
            "/usr/bin/systemd-socket-activate",
            [
                "-l", socket.path, "/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user)",
                "--clear-groups", PrivateEscrow.executable.path, "--state", state.path,
            ], environment: environment)
        defer {
            activator.kill()
            _ = activator.wait()
        }
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: socket.path) {
            usleep(50_000)
        }
        let counter = try #require(EscrowConfiguration(url: URL(string: "unix:\(socket.path)")!))
        let service = try PrivateSecretService.start()
        let device = service.device(
            "activated", counter: counter,
            tuning: DeviceTuning(passcodeCost: .minimum, retryPolicy: quick))
        defer { try? device.reboot() }
        try device.setLockScreen(.pin, passcode: "564738", currentPasscode: nil)
        let record = try device.records.load().record
        #expect(record.passcode.counterPin?.peer == 0)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000000") } == .authFailed)
        let report = try device.unlockReporting(passcode: "564738")
        #expect(report.wrongPasscodes?.count == 1)
        #expect(try device.status().countedIn == "file")
    }
}
