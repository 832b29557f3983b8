import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import TPM
import Testing

@testable import Device

/// Tiny delays, so that ten wrong passcodes in a row take milliseconds: these tests are about
/// what is counted, not about how long the waits are (LockScreenTests pins the delays).

/// The device record as stored (the tests read it the way another process of the user could).
private func storedRecord(_ device: Device) throws -> DeviceRecord {
    try device.records.load().record
}

@Suite("Passcode guesses are counted where they cannot be reset (TPM via swtpm, and software)")
struct GuessLimitTests {
    @Test(
        "with a TPM: the right passcode unlocks, the status says tpm, and the record holds no verifier"
    )
    func tpmUnlock() throws {
        let tpm = try PrivateTPM()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, tpm: tpm)
        try device.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
        let record = try storedRecord(device)
        #expect(record.tpm != nil)
        #expect(record.verifier == nil)
        try device.reboot()
        #expect(try device.state() == .beforeFirstUnlock)
        #expect(code { try device.unlock(passcode: "000000") } == .authFailed)
        #expect(try device.status().failedAttempts == 1)
        try device.unlock(passcode: "482916")
        let status = try device.status()
        #expect(status.guessLimit == "tpm" && status.countedIn == "software TPM (IBM SW)")
        #expect(status.failedAttempts == 0)
        #expect(status.state == .unlocked)
        // Changing the passcode moves the slot; the old passcode opens nothing.
        try device.setLockScreen(.pin, passcode: "771133", currentPasscode: "482916")
        try device.reboot()
        #expect(code { try device.unlock(passcode: "482916") } == .authFailed)
        try device.unlock(passcode: "771133")
        #expect(try device.state() == .unlocked)
    }

    @Test(
        "with a TPM: 10 wrong passcodes in a row disable the device, even for the right one; editing the record's count changes nothing"
    )
    func tpmHardLimit() throws {
        let tpm = try PrivateTPM()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, tpm: tpm)
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        // Nine wrong, then the right one: the count starts again.
        for guess in 0..<9 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("00000\(guess)".utf8)))
                } == .authFailed)
        }
        try device.unlock(passcode: "135790")
        try device.reboot()
        for guess in 0..<10 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("11111\(guess)".utf8)))
                } == .authFailed)
        }
        #expect(try device.status().failedAttempts == 10)
        #expect(code { try device.unlock(passcode: "135790") } == .disabled)
        // Another process of the user resets the count and the delay in the Secret Service.
        let loaded = try device.records.load()
        var record = loaded.record
        record.failures = 0
        record.notBefore = 0
        try device.records.store(record, replacing: loaded.path)
        #expect(code { try device.unlock(passcode: "135790") } == .disabled)
        #expect(try device.state() == .beforeFirstUnlock)
        // Erasing the device is the way back: a fresh device without a lock screen.
        try device.wipe()
        #expect(try device.lockScreenKind() == LockScreenKind.none)
        #expect(try device.state() == .unlocked)
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        try device.unlock(passcode: "135790")
        print(
            "tpm: 10 wrong passcodes disabled the device; a reset record count gained nothing; wipe recovers"
        )
    }

    @Test("with a TPM: guesses that skip Keepsake's counter are counted by the TPM's own lockout")
    func tpmCountsSkippedCounter() throws {
        let tpm = try PrivateTPM(maxTries: 5, recoverySeconds: 600)
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, tpm: tpm)
        try device.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        let slot = try #require(try storedRecord(device).tpm)
        let context = try tpm.context()
        var answers: [TPMError.Code] = []
        for guess in 0..<8 {
            do {
                try TPMPasscodeSlot.uncountedRead(
                    context, slot: slot,
                    authorization: SecureBytes(copying: Data(repeating: UInt8(guess), count: 32)))
            } catch {
                answers.append(error.code)
            }
        }
        #expect(answers.prefix(5).allSatisfy { $0 == .authFailed })
        #expect(answers.suffix(3).allSatisfy { $0 == .lockout })
        // The lockout holds for the right passcode too, until the TPM forgives.
        try device.reboot()
        #expect(code { try device.unlock(passcode: "246810") } == .notAvailable)
        print("tpm: 5 guesses skipping the counter, then the TPM's lockout for every further one")
    }

    @Test(
        "a TPM whose lockout authorization is empty (any process could clear its lockout) gets no lock-screen slot: refused, naming the fix, nothing changed; with one set, another process of the user cannot clear the lockout that counts guesses skipping Keepsake's counter"
    )
    func openLockoutRefused() throws {
        let open = try PrivateTPM(openLockout: true)
        let service = try PrivateSecretService.start()
        let device = service.device("open", retryPolicy: quick, tpm: open)
        do {
            try device.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
            Issue.record("a lock screen was set on a TPM whose lockout anyone can clear")
        } catch {
            #expect("\(error)".contains("lockout authorization is empty"), "\(error)")
        }
        #expect(try device.lockScreenKind() == .none)

        let tpm = try PrivateTPM(maxTries: 3, recoverySeconds: 600)
        let guarded = service.device("guarded", retryPolicy: quick, tpm: tpm)
        try guarded.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        let slot = try #require(try storedRecord(guarded).tpm)
        let context = try tpm.context()
        var answers: [TPMError.Code] = []
        for guess in 0..<6 {
            if guess >= 3 {  // the attacker clears the lockout each time it trips: refused
                #expect(throws: TPMError.self) { try context.resetDictionaryAttack() }
            }
            do {
                try TPMPasscodeSlot.uncountedRead(
                    context, slot: slot,
                    authorization: SecureBytes(copying: Data(repeating: UInt8(guess), count: 32)))
            } catch {
                answers.append(error.code)
            }
        }
        #expect(answers.prefix(3).allSatisfy { $0 == .authFailed }, "\(answers)")
        #expect(answers.suffix(3).allSatisfy { $0 == .lockout }, "\(answers)")
    }

    @Test(
        "with a TPM: a recording of every byte between the device and its TPM — the slot made, a wrong and the right passcode, a passcode change — holds no passcode, passcode key, TPM authorization or released secret"
    )
    func tpmCaptureHoldsNothing() throws {
        let tpm = try PrivateTPM()
        let (relay, tcti) = try tpm.recordingRelay()
        let service = try PrivateSecretService.start()
        let device = Device(
            secretService: service.connection(), directory: service.deviceDirectory("relayed"),
            tpm: TPMConfiguration(tcti: tcti), tuning: .fast)
        defer { try? device.reboot() }
        try device.setLockScreen(.pin, passcode: "135791", currentPasscode: nil)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000000") } == .authFailed)
        try device.unlock(passcode: "135791")
        try device.setLockScreen(.pin, passcode: "246802", currentPasscode: "135791")
        let record = try storedRecord(device)
        let slot = try #require(record.tpm)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "246802", salt: try #require(record.salt), cost: try #require(record.cost))
        let authorization = PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey)
        let capture = relay.capture
        #expect(capture.count > 1000)
        // The released secret, asked for directly (after the capture: this read is not in it).
        let secret = try TPMPasscodeSlot.attempt(
            try tpm.context(), slot: slot, authorization: authorization
        ).secret
        for (name, value) in [
            ("passcode", Data("246802".utf8)), ("old passcode", Data("135791".utf8)),
            ("passcode key", passcodeKey.unsafeData()),
            ("TPM authorization", authorization.unsafeData()),
            ("released secret", secret.unsafeData()),
        ] {
            let window = min(6, value.count)
            let found = stride(from: 0, through: value.count - window, by: 1).contains {
                capture.range(of: value[$0..<($0 + window)]) != nil
            }
            #expect(!found, "\(name)")
        }
    }

    @Test("software path: the verifier and the key-encryption key need the device secret")
    func softwareBinding() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.pin, passcode: "8642", currentPasscode: nil)
        let record = try storedRecord(device)
        #expect(record.tpm == nil)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "8642", salt: try #require(record.salt), cost: try #require(record.cost))
        // Argon2id of the right passcode alone checks nothing and opens nothing.
        #expect(PasscodeKeys.legacyVerifier(passcodeKey: passcodeKey) != record.verifier)
        #expect(throws: DeviceError.self) {
            try PasscodeKeys.unwrap(record.wrappedKeys, kek: passcodeKey)
        }
        // With the device secret (the login keyring's contents) it does: SECURITY.md says so.
        let secret = SecureBytes(copying: record.deviceSecret)
        #expect(
            PasscodeKeys.verifier(passcodeKey: passcodeKey, deviceSecret: secret) == record.verifier
        )
        #expect(try device.status().guessLimit == "software")
    }

    @Test("a stored Argon2id cost below the device's floor is raised at the next unlock")
    func costRaised() throws {
        let service = try PrivateSecretService.start()
        let cheap = service.device(retryPolicy: quick)
        try cheap.setLockScreen(.pin, passcode: "5555", currentPasscode: nil)
        #expect(try storedRecord(cheap).cost == .minimum)
        let real = Device(
            secretService: service.connection(), directory: service.deviceDirectory(),
            tuning: DeviceTuning(passcodeCost: .interactive, retryPolicy: quick))
        try real.reboot()
        try real.unlock(passcode: "5555")
        #expect(try storedRecord(real).cost == .interactive)
        try real.reboot()
        try real.unlock(passcode: "5555")
        #expect(try real.state() == .unlocked)
    }

    @Test(
        "lockscreen set is atomic: when the Secret Service cannot write, nothing changed and the old passcode still unlocks",
        // gnome-keyring refuses a write it cannot save; KeePassXC keeps it in memory and answers
        // success (it saves later, or never), so a full disk is not a write failure there.
        .enabled(if: PrivateSecretService.defaultProvider == .gnomeKeyring)
    )
    func setIsAtomic() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.pin, passcode: "1111", currentPasscode: nil)
        try service.restart(fileSizeLimit: 0)  // gnome-keyring can no longer write its file
        #expect(
            code { try device.setLockScreen(.pin, passcode: "2222", currentPasscode: "1111") }
                == .notAvailable)
        #expect(
            code { try device.setLockScreen(.none, passcode: nil, currentPasscode: "1111") }
                == .notAvailable)
        try service.restart()  // what reached the disk
        try device.reboot()
        #expect(try device.lockScreenKind() == .pin)
        #expect(code { try device.unlock(passcode: "2222") } == .authFailed)
        try device.unlock(passcode: "1111")
        #expect(try device.state() == .unlocked)
    }

    @Test("a passcode that is not UTF-8 is refused with errSecParam and not counted")
    func invalidUTF8() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.password, passcode: "pass-word", currentPasscode: nil)
        let invalid = SecureBytes(copying: [0x70, 0x61, 0xFF, 0x73, 0x73])
        #expect(code { try device.unlock(passcode: invalid) } == .invalidPasscode)
        #expect(
            code {
                try device.setLockScreen(.password, passcode: invalid, currentPasscode: "pass-word")
            } == .invalidPasscode)
        #expect(try device.status().failedAttempts == 0)
    }

    @Test("after an unlock no copy of the passcode is left in the process's memory")
    func passcodeNotInMemory() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        // A random 16-digit pin made straight into owned memory: it exists nowhere else.
        let digits = SecureBytes(count: 16) { out in
            for index in out.indices { out[index] = 0x30 + UInt8.random(in: 0...9) }
        }
        try device.setLockScreen(.pin, passcode: digits, currentPasscode: nil)
        try device.reboot()
        try device.unlock(passcode: digits)
        let found = try memoryCopies(of: digits)
        #expect(found == 0, "copies of the passcode left in memory: \(found)")
    }
}

/// Counts copies of `secret`'s bytes in this process's readable anonymous memory (heap, stacks,
/// anonymous mappings), other than `secret`'s own buffer. The search makes no copy of its own: it
/// compares against the owned buffer in place, and reads each region into a scratch mapping
/// outside the heap that it skips and unmaps.
private func memoryCopies(of secret: SecureBytes) throws -> Int {
    let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
    let mem = open("/proc/self/mem", O_RDONLY)
    guard mem >= 0 else { throw HarnessError("/proc/self/mem") }
    defer { close(mem) }
    return secret.withUnsafeBytes { needle -> Int in
        let ownedStart = UInt(bitPattern: needle.baseAddress)
        var count = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            if fields.count >= 6,
                fields[5].hasPrefix("/") || fields[5] == "[vvar]"
                    || fields[5] == "[vsyscall]" || fields[5] == "[vdso]"
            {
                continue
            }
            let range = fields[0].split(separator: "-")
            guard let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
                end > start, end - start < 1 << 31
            else { continue }
            let size = Int(end - start)
            guard
                let scratch = mmap(
                    nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                scratch != MAP_FAILED
            else { continue }
            defer { munmap(scratch, size) }
            let got = pread(mem, scratch, size, off_t(Int(bitPattern: start)))
            guard got >= needle.count else { continue }
            var index = 0
            while index + needle.count <= got {
                if memcmp(scratch + index, needle.baseAddress!, needle.count) == 0,
                    start + UInt(index) != ownedStart
                {
                    count += 1
                }
                index += 1
            }
        }
        return count
    }
}
