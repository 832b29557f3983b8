import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Synchronization
import Testing

struct PasscodeCase: Decodable, Sendable, CustomTestStringConvertible {
    var kind: String
    var passcode: String
    var valid: Bool
    var canonical: String?
    var testDescription: String { "\(kind) \"\(passcode)\"" }
}
private struct PasscodeFile: Decodable { var cases: [PasscodeCase] }
private func passcodeCases() throws -> [PasscodeCase] {
    try fixtureTable(PasscodeFile.self, "device/passcodes.json", \.cases, atLeast: 10)
}

/// A device on its own private Secret Service, fast Argon2id and short retry delays.
func makeDevice(
    _ service: PrivateSecretService, retryBase: Duration = .milliseconds(300),
    clock: ManualClock = ManualClock()
) -> Device {
    service.device(
        retryPolicy: RetryPolicy(base: retryBase, longestWait: .seconds(5)), clock: clock)
}

@Suite("Lock screen and class keys on a private Secret Service")
struct LockScreenTests {
    @Test("passcodes are checked against their kind", arguments: try passcodeCases())
    func passcodeShapes(_ c: PasscodeCase) {
        let kind = LockScreenKind(rawValue: c.kind)!
        let passcode = SecureBytes(copying: Data(c.passcode.utf8))
        if c.valid {
            let canonical = try? kind.validate(passcode)
            #expect(canonical?.withUnsafeBytes { Data($0) } == c.canonical.map { Data($0.utf8) })
        } else {
            #expect(throws: DeviceError(.invalidPasscode, "")) { try kind.validate(passcode) }
        }
    }

    @Test("a new device has no lock screen, is unlocked and offers every class but passcode-set")
    func freshDevice() throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        #expect(try device.lockScreenKind() == LockScreenKind.none)
        #expect(try device.state() == .unlocked)
        for protection in ProtectionClass.allCases where !protection.requiresPasscode {
            _ = try device.classKey(protection)
        }
        #expect(
            codeOrUnavailable { _ = try device.classKey(.whenPasscodeSetThisDeviceOnly) }
                == .authFailed)
        // Without a knowledge factor the device stays unlocked across a reboot.
        let key = try device.classKey(.whenUnlocked)
        try device.reboot()
        #expect(try device.state() == .unlocked)
        #expect(try device.classKey(.whenUnlocked) == key)
    }

    @Test(
        "a new device's first use from 8 connections at once makes one device record: every one gets the same class keys, and the record is one item"
    )
    func concurrentFirstUse() throws {
        let service = try PrivateSecretService.start()
        let devices = (0..<8).map { _ in makeDevice(service) }
        let keys = Mutex<[Int: SecureBytes]>([:])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: devices.count) { index in
            do {
                let key = try devices[index].classKey(.whenUnlocked)
                keys.withLock { $0[index] = key }
            } catch { failures.withLock { $0.append("\(error)") } }
        }
        #expect(failures.withLock { $0 } == [])
        let distinct = keys.withLock { found in
            found.values.reduce(into: [SecureBytes]()) { kept, key in
                if !kept.contains(key) { kept.append(key) }
            }
        }
        #expect(distinct.count == 1)
        let records = try service.connection().search([
            "xdg:schema": "org.keepsake.Device", "keepsake-device": "state",
        ])
        #expect(records.unlocked.count == 1)
        // And a later device on the same Secret Service reads that record.
        #expect(try makeDevice(service).classKey(.whenUnlocked) == distinct.first)
    }

    @Test("with a pin: reboot → beforeFirstUnlock, unlock → unlocked, lock → locked, reboot again")
    func stateMachine() throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        #expect(try device.state() == .unlocked)
        let afu = try device.classKey(.afterFirstUnlock)
        let wu = try device.classKey(.whenUnlocked)
        try device.reboot()
        #expect(try device.state() == .beforeFirstUnlock)
        #expect(
            codeOrUnavailable { _ = try device.classKey(.afterFirstUnlock) }
                == .interactionNotAllowed)
        #expect(
            codeOrUnavailable { _ = try device.classKey(.whenUnlocked) } == .interactionNotAllowed)
        try device.unlock(passcode: "1234")
        #expect(try device.state() == .unlocked)
        #expect(try device.classKey(.afterFirstUnlock) == afu)
        #expect(try device.classKey(.whenUnlocked) == wu)
        try device.lock()
        #expect(try device.state() == .locked)
        #expect(try device.classKey(.afterFirstUnlock) == afu)
        #expect(
            try device.classKey(.afterFirstUnlockThisDeviceOnly)
                == device.classKey(.afterFirstUnlockThisDeviceOnly))
        #expect(
            codeOrUnavailable { _ = try device.classKey(.whenUnlocked) } == .interactionNotAllowed)
        #expect(
            codeOrUnavailable { _ = try device.classKey(.whenUnlockedThisDeviceOnly) }
                == .interactionNotAllowed)
        #expect(
            codeOrUnavailable { _ = try device.classKey(.whenPasscodeSetThisDeviceOnly) }
                == .interactionNotAllowed)
        try device.reboot()
        #expect(try device.state() == .beforeFirstUnlock)
    }

    @Test(
        "runtime state is the kernel keyring: a Secret Service restart is no reboot, clearing the device's keyring is"
    )
    func runtimeStateInKernelKeyring() throws {
        let service = try PrivateSecretService.start(savesAfterEveryChange: true)
        let device = makeDevice(service)
        try device.setLockScreen(.password, passcode: "open sesame", currentPasscode: nil)
        #expect(try device.state() == .unlocked)
        try service.restart()
        #expect(try device.state() == .unlocked)
        // No class key in any Secret Service collection: only the device record is there.
        let connection = service.connection()
        let records = try connection.search(["xdg:schema": "org.keepsake.Device"]).unlocked
        #expect(Set(try collectionItems(service)) == Set(records.map(\.rawValue)))
        // The kernel holds them, in the device's own keyring under the user keyring.
        let keyring = try keyctl([
            "search", "@u", "keyring", "keepsake:device:\(try device.runtime().deviceID)",
        ])
        #expect(keyring.status == 0)
        let listing = try keyctl([
            "rlist", keyring.output.trimmingCharacters(in: .whitespacesAndNewlines),
        ])
        #expect(listing.output.split(separator: " ").count == 5)
        try device.lock()
        let locked = try keyctl([
            "rlist", keyring.output.trimmingCharacters(in: .whitespacesAndNewlines),
        ])
        #expect(locked.output.split(separator: " ").count == 2)  // the two AfterFirstUnlock keys
        try device.reboot()  // what `keepsake device reboot` and the harness do
        #expect(try device.state() == .beforeFirstUnlock)
        try device.unlock(passcode: "open sesame")
        #expect(try device.state() == .unlocked)
    }

    @Test(
        "a device directory (or its lock file) of another user, or writable by others, is refused with a clear error and never used",
        .enabled(
            if: PrivateSecretService.runsKeepsakesOwnRules,
            "Keepsake's own rule: gnome-keyring pass"),
        arguments: ["other-user", "group-writable", "world-writable", "lock-file-of-other-user"])
    func directoryNotTheUsers(_ place: String) throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try device.reboot()
        let directory = service.deviceDirectory()
        let lock = directory.appendingPathComponent("lockscreen.lock")
        switch place {
        case "other-user": #expect(chown(directory.path, 65534, 65534) == 0)
        case "group-writable": #expect(chmod(directory.path, 0o770) == 0)
        case "world-writable": #expect(chmod(directory.path, 0o703) == 0)
        default: #expect(chown(lock.path, 65534, 65534) == 0)
        }
        var message = ""
        #expect(
            codeOrUnavailable {
                do { try device.unlock(passcode: "1234") } catch let error as DeviceError {
                    message = error.message
                    throw error
                }
            } == .notAvailable)
        #expect(
            message.contains("another user") || message.contains("writable by other users"),
            "\(message)")
        if place != "lock-file-of-other-user" {  // the settings never take the guess lock
            #expect(codeOrUnavailable { _ = try device.settings() } == .notAvailable)
        }
        // Made the user's own again, it works: nothing was counted meanwhile.
        #expect(chown(directory.path, geteuid(), getegid()) == 0)
        #expect(chown(lock.path, geteuid(), getegid()) == 0)
        #expect(chmod(directory.path, 0o700) == 0)
        try device.unlock(passcode: "1234")
        #expect(try device.status().failedAttempts == 0)
    }

    @Test(
        "a class key planted in (or replaced in) the kernel keyring by another process is refused: the device reads as locked, nothing is sealed or opened with it, and the real unlock works"
    )
    func plantedRuntimeKeyIsRefused() throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let genuine = try device.classKey(.whenUnlocked)
        let id = try device.runtime().deviceID
        try device.lock()
        #expect(try device.state() == .locked)
        // Another process of the user plants its own WhenUnlocked key beside the device's others.
        let ring = try keyctl(["search", "@u", "keyring", "keepsake:device:\(id)"]).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let planted = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        try keyctl(
            ["padd", "user", "keepsake:\(id):\(ProtectionClass.whenUnlocked.rawValue)", ring],
            input: planted)
        // A fresh "process" (a new Device on a new connection) sees no WhenUnlocked key.
        let other = makeDevice(service)
        #expect(try other.state() == .locked)
        #expect(
            codeOrUnavailable { _ = try other.classKey(.whenUnlocked) } == .interactionNotAllowed)
        // Replacing the AfterFirstUnlock key (while it is there) is refused the same way.
        try keyctl(
            ["padd", "user", "keepsake:\(id):\(ProtectionClass.afterFirstUnlock.rawValue)", ring],
            input: planted)
        let third = makeDevice(service)
        #expect(
            codeOrUnavailable { _ = try third.classKey(.afterFirstUnlock) }
                == .interactionNotAllowed)
        // The real unlock puts the genuine keys back.
        try third.unlock(passcode: "1234")
        #expect(try third.state() == .unlocked)
        #expect(try third.classKey(.whenUnlocked) == genuine)
        #expect(try makeDevice(service).classKey(.whenUnlocked) == genuine)
    }

    @Test("a wrong passcode answers authFailed, and the next attempt waits, across processes")
    func wrongPasscodeIsRateLimited() throws {
        let service = try PrivateSecretService.start()
        let clock = ManualClock()
        let device = makeDevice(service, retryBase: .milliseconds(400), clock: clock)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try device.reboot()
        #expect(codeOrUnavailable { try device.unlock(passcode: "9999") } == .authFailed)
        #expect(clock.slept == .zero)
        // Another "process" (a fresh Device on a fresh connection) sees the same delay.
        let other = makeDevice(service, retryBase: .milliseconds(400), clock: clock)
        #expect(codeOrUnavailable { try other.unlock(passcode: "8888") } == .authFailed)
        #expect(clock.slept == .milliseconds(400))
        // The delay grows: the second failure doubles it.
        try other.unlock(passcode: "1234")
        #expect(clock.slept == .milliseconds(400 + 800))
        #expect(try device.state() == .unlocked)
    }

    @Test("changing the passcode needs the old one and keeps every class key")
    func changePasscode() throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let keys = try ProtectionClass.allCases.map { try device.classKey($0) }
        #expect(
            codeOrUnavailable {
                try device.setLockScreen(.pattern, passcode: "1-5-9-6", currentPasscode: "0000")
            } == .authFailed)
        try device.setLockScreen(.pattern, passcode: "1-5-9-6", currentPasscode: "1234")
        try device.reboot()
        #expect(codeOrUnavailable { try device.unlock(passcode: "1234") } == .authFailed)
        try device.unlock(passcode: "1-5-9-6")  // sits out the delay on its test clock
        #expect(try ProtectionClass.allCases.map { try device.classKey($0) } == keys)
    }

    @Test(
        "removing the knowledge factor destroys the passcode-set key and leaves the device unlocked"
    )
    func removeKnowledgeFactor() throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let afu = try device.classKey(.afterFirstUnlock)
        let change = try device.setLockScreen(.swipe, passcode: nil, currentPasscode: "1234")
        #expect(change.knowledgeFactorRemoved)
        #expect(
            codeOrUnavailable { _ = try device.classKey(.whenPasscodeSetThisDeviceOnly) }
                == .authFailed)
        try device.reboot()
        #expect(try device.state() == .unlocked)
        #expect(try device.classKey(.afterFirstUnlock) == afu)
    }

    @Test("the passcode is never stored: no Secret Service secret contains it")
    func passcodeNeverStored() throws {
        let service = try PrivateSecretService.start()
        let device = makeDevice(service)
        let passcode = "correct horse battery staple"
        try device.setLockScreen(
            .password, passcode: SecureBytes(copying: Data(passcode.utf8)), currentPasscode: nil)
        let connection = service.connection()
        var paths = try connection.search([:]).unlocked
        paths += try connection.search(["xdg:schema": "org.keepsake.Device"]).unlocked
        let secrets = try connection.secrets(at: paths)
        #expect(!secrets.isEmpty)
        for (_, secret) in secrets {
            #expect(secret.range(of: Data(passcode.utf8)) == nil)
        }
    }
}

/// Runs the `keyctl` tool (keyutils) and returns its exit status and standard output.
@discardableResult
func keyctl(_ arguments: [String], input: Data? = nil) throws -> (status: Int32, output: String) {
    let run = try Spawn.capture(
        "/usr/bin/keyctl", arguments, environment: ProcessInfo.processInfo.environment,
        input: input ?? Data())
    return (run.status, String(decoding: run.stdout, as: UTF8.self))
}

/// Every item of the default collection (its `Items` property, read with gdbus: an independent
/// client, and one that works on every provider — KeePassXC's SearchItems with no attribute
/// finds nothing).
private func collectionItems(_ service: PrivateSecretService) throws -> [String] {
    let found = try Spawn.capture(
        "/usr/bin/gdbus",
        [
            "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path",
            "/org/freedesktop/secrets/aliases/default", "--method",
            "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Collection", "Items",
        ], environment: service.environment)
    let text = String(decoding: found.stdout, as: UTF8.self)
    return text.split(separator: "'").map(String.init).filter {
        $0.hasPrefix("/org/freedesktop/secrets/collection/")
    }
}
