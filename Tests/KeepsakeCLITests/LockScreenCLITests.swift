import Foundation
import KeepsakeTestSupport
import Testing

private func status(_ service: PrivateSecretService) throws -> [String: Any] {
    let run = try keepsake(["lockscreen", "status"], service: service)
    guard let object = try? JSONSerialization.jsonObject(with: run.stdout) as? [String: Any] else {
        throw HarnessError("lockscreen status answered no JSON (exit \(run.status)): \(run.stderr)")
    }
    return object
}

@Suite("keepsake lockscreen and device reboot")
struct LockScreenCLITests {
    @Test("set, status, reboot, unlock, lock and remove through the command line")
    func story() throws {
        let service = try PrivateSecretService.start()
        let app = ["--app-id", "com.example.lock"]
        #expect(try status(service)["kind"] as? String == "none")
        #expect(try status(service)["e2eeCapable"] as? Bool == false)
        #expect(
            try keepsake(
                [
                    "keychain", "add", "--service", "s", "--account", "afu", "--accessible",
                    "after-first-unlock",
                ] + app, input: Data("A".utf8), service: service
            ).status == 0)
        #expect(
            try keepsake(
                ["keychain", "add", "--service", "s", "--account", "wu"] + app,
                input: Data("W".utf8), service: service
            ).status == 0)

        // A pattern is written as its cells joined by '-'.
        let short = try keepsake(
            ["lockscreen", "set", "--kind", "pattern"], input: Data("1-2-3\n".utf8),
            service: service)
        #expect(short.stderr.contains("errSecParam"), "\(short.stderr)")
        let pattern = try keepsake(
            ["lockscreen", "set", "--kind", "pattern"], input: Data("1-5-9-6\n".utf8),
            service: service)
        #expect(pattern.status == 0, "\(pattern.stderr)")
        var s = try status(service)
        #expect(
            s["kind"] as? String == "pattern" && s["state"] as? String == "unlocked"
                && s["e2eeCapable"] as? Bool == true)

        #expect(
            try keepsake(["device", "reboot"], service: service).status == 0)
        #expect(try status(service)["state"] as? String == "beforeFirstUnlock")
        let denied = try keepsake(
            ["keychain", "get", "--service", "s", "--account", "afu"] + app, service: service)
        #expect(denied.stderr.contains("errSecInteractionNotAllowed (-25308)"))

        let wrong = try keepsake(
            ["lockscreen", "unlock"], input: Data("1-2-3-4\n".utf8), service: service)
        #expect(wrong.status == 1 && wrong.stderr.contains("errSecAuthFailed (-25293)"))
        #expect(!wrong.stderr.contains("1-2-3-4"))
        #expect(
            try keepsake(
                ["lockscreen", "unlock"], input: Data("1-5-9-6\n".utf8), service: service
            ).status == 0)
        #expect(
            try keepsake(
                ["keychain", "get", "--service", "s", "--account", "wu"] + app, service: service
            ).text == "W")

        #expect(
            try keepsake(["lockscreen", "lock"], service: service).status == 0)
        s = try status(service)
        #expect(s["state"] as? String == "locked")
        #expect(
            try keepsake(
                ["keychain", "get", "--service", "s", "--account", "afu"] + app, service: service
            ).text == "A")
        #expect(
            try keepsake(
                ["keychain", "get", "--service", "s", "--account", "wu"] + app, service: service
            ).stderr.contains("errSecInteractionNotAllowed"))

        // Changing needs the current passcode first, then the new one.
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"], input: Data("9-9-9-9\n123456\n".utf8),
                service: service
            ).stderr.contains("errSecAuthFailed"))
        // The next attempt sits out the delay the wrong one earned.
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"], input: Data("1-5-9-6\n123456\n".utf8),
                service: service
            ).status == 0)
        #expect(
            try keepsake(
                [
                    "keychain", "add", "--service", "s", "--account", "pc", "--accessible",
                    "when-passcode-set-this-device-only",
                ] + app, input: Data("P".utf8), service: service
            ).status == 0)
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "none"], input: Data("123456\n".utf8),
                service: service
            ).status == 0)
        s = try status(service)
        #expect(s["kind"] as? String == "none" && s["state"] as? String == "unlocked")
        let list = try keepsake(
            ["keychain", "list", "--service", "s"] + app, service: service)
        let accounts =
            (try JSONSerialization.jsonObject(with: list.stdout) as? [[String: Any]] ?? [])
            .compactMap { $0["account"] as? String }
        #expect(accounts == ["afu", "wu"])
    }
}
