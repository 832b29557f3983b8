import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Device
@testable import TPM

/// Passcode slots in the TPM (a private swtpm): what the TPM counts, and how a direct slot moves
/// to the guess counter. Tiny delays, so that ten wrong passcodes in a row take milliseconds.
@Suite(
    "Passcode guesses counted in the TPM (swtpm): direct slots, the hard limit, lockout, capture",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct TPMSlotTests {
    @Test(
        "a direct TPM slot (made before the direct path was retired): the right passcode unlocks, the status says tpm, and the record holds no verifier"
    )
    func tpmUnlock() throws {
        let tpm = try PrivateTPM()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, tpm: tpm)
        try device.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
        let record = try storedRecord(device)
        #expect(record.passcode.tpm != nil)
        #expect(record.passcode.verifier == nil)
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
        "a direct TPM slot: 10 wrong passcodes in a row disable the device, even for the right one; editing the record's count changes nothing"
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
        try resetStoredFailures(device)
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

    @Test(
        "a direct TPM slot: guesses that skip Keepsake's counter are counted by the TPM's own lockout"
    )
    func tpmCountsSkippedCounter() throws {
        let tpm = try PrivateTPM(maxTries: 5, recoverySeconds: 600)
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, tpm: tpm)
        try device.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        let slot = try #require(try storedRecord(device).passcode.tpm)
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
        "this version makes no direct TPM slot on a TPM whose lockout authorization is empty (any process could clear its lockout), even for a test device; with one set, another process of the user cannot clear the lockout that counts guesses skipping Keepsake's counter"
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
        let slot = try #require(try storedRecord(guarded).passcode.tpm)
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
        "a direct TPM slot: a recording of every byte between the device and its TPM — the slot made, a wrong and the right passcode, a passcode change — holds no passcode, passcode key, TPM authorization or released secret"
    )
    func tpmCaptureHoldsNothing() throws {
        let tpm = try PrivateTPM()
        let (relay, tcti) = try tpm.recordingRelay()
        let service = try PrivateSecretService.start()
        let device = service.device("relayed", tpm: .makingDirectSlots(tcti: tcti), tuning: .fast)
        defer { try? device.reboot() }
        // Pins of 20 digits: the capture holds none of their 8-byte windows by chance
        // (docs/testing.md, "Checks that could pass or fail by chance").
        try device.setLockScreen(.pin, passcode: "13579086421357908642", currentPasscode: nil)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000000") } == .authFailed)
        try device.unlock(passcode: "13579086421357908642")
        try device.setLockScreen(
            .pin, passcode: "24680135792468013579", currentPasscode: "13579086421357908642")
        let record = try storedRecord(device)
        let slot = try #require(record.passcode.tpm)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "24680135792468013579", salt: try #require(record.passcode.salt),
            cost: try #require(record.passcode.cost)
        )
        let authorization = PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey)
        let capture = relay.capture
        #expect(capture.count > 1000)
        // The released secret, asked for directly (after the capture: this read is not in it).
        let secret = try TPMPasscodeSlot.attempt(
            try tpm.context(), slot: slot, authorization: authorization
        ).secret
        for (name, value) in [
            ("passcode", Data("24680135792468013579".utf8)),
            ("old passcode", Data("13579086421357908642".utf8)),
            ("passcode key", passcodeKey.unsafeData()),
            ("TPM authorization", authorization.unsafeData()),
            ("released secret", secret.unsafeData()),
        ] {
            let window = min(8, value.count)
            let found = stride(from: 0, through: value.count - window, by: 1).contains {
                capture.range(of: value[$0..<($0 + window)]) != nil
            }
            #expect(!found, "\(name)")
        }
    }

    @Test(
        "no new lock screen makes a slot on a TPM the user's processes reach: one named is refused, naming the guess counter service, nothing changed; the machine's TPM taken by default gives the software path; with a counter named, the service counts"
    )
    func noNewDirectSlots() throws {
        let tpm = try PrivateTPM()
        let service = try PrivateSecretService.start()
        func device(_ name: String, _ newSlots: TPMConfiguration.NewSlots) -> Device {
            service.device(
                name, tpm: TPMConfiguration(tcti: tpm.tcti, newSlots: newSlots), tuning: .fast)
        }
        let named = device("named", .refused)
        defer { try? named.reboot() }
        do {
            try named.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
            Issue.record("a lock screen was set with its guesses counted by a TPM the user reaches")
        } catch {
            #expect(error.message.contains("keepsake-escrow --tpm \(tpm.tcti)"), "\(error)")
            #expect(error.message.contains("--counter"), "\(error)")
        }
        #expect(try named.lockScreenKind() == .none)
        #expect(try storedRecord(named).passcode.tpm == nil)

        let machine = device("machine", .software)
        defer { try? machine.reboot() }
        try machine.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        #expect(try storedRecord(machine).passcode.tpm == nil)
        #expect(try storedRecord(machine).passcode.verifier != nil)
        #expect(try machine.status().guessLimit == "software")
        try machine.wipe()  // one device per Secret Service: the next one starts afresh

        let counter = try PrivateEscrow.counter()
        let counted = service.device(
            "counted", tpm: TPMConfiguration(tcti: tpm.tcti), counter: counter.configuration,
            tuning: .fast)
        defer { try? counted.reboot() }
        try counted.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        #expect(try storedRecord(counted).passcode.tpm == nil)
        #expect(try counted.status().guessLimit == "service")
    }

    @Test(
        "a device with a direct TPM slot keeps unlocking with it, and its next passcode change moves it to the software path, undefining the old slot; with a guess counter service named, its next right unlock moves it there"
    )
    func directSlotMovesOff() throws {
        let tpm = try PrivateTPM()
        let service = try PrivateSecretService.start()
        let counter = try PrivateEscrow.counter()
        for toService in [false, true] {
            let name = toService ? "to-service" : "to-software"
            let before = service.device(name, retryPolicy: quick, tpm: tpm)
            try before.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
            try before.reboot()
            // This version: the same device, its TPM named (or the machine's), new slots elsewhere.
            let now = service.device(
                name, tpm: TPMConfiguration(tcti: tpm.tcti),
                counter: toService ? counter.configuration : nil, tuning: .fast)
            defer { try? now.reboot() }
            #expect(code { try now.unlock(passcode: "000000") } == .authFailed)
            try now.unlock(passcode: "482916")
            if toService {  // a guess counter service named: the right unlock moves it there
                #expect(try now.status().guessLimit == "service")
                #expect(try storedRecord(now).passcode.tpm == nil)
                try now.reboot()
                #expect(code { try now.unlock(passcode: "000000") } == .authFailed)
                try now.unlock(passcode: "482916")
                try now.wipe()  // one device per Secret Service: the next round starts afresh
                continue
            }
            #expect(try now.status().guessLimit == "tpm")
            let old = try storedRecord(now)
            let slot = try #require(old.passcode.tpm)
            let oldKey = try PasscodeKeys.passcodeKey(
                "482916", salt: try #require(old.passcode.salt),
                cost: try #require(old.passcode.cost))
            try now.setLockScreen(.pin, passcode: "771133", currentPasscode: "482916")
            let record = try storedRecord(now)
            #expect(record.passcode.tpm == nil)
            #expect(try now.status().guessLimit == "software")
            #expect(record.passcode.verifier != nil)
            // The old slot is gone from the TPM: not even the old passcode's authorization opens it.
            #expect(throws: TPMError.self) {
                try TPMPasscodeSlot.attempt(
                    try tpm.context(), slot: slot,
                    authorization: PasscodeKeys.tpmAuthorization(passcodeKey: oldKey))
            }
            try now.reboot()
            #expect(code { try now.unlock(passcode: "482916") } == .authFailed)
            try now.unlock(passcode: "771133")
            #expect(try now.state() == .unlocked)
            try now.wipe()  // one device per Secret Service: the next round starts afresh
        }
    }

    @Test(
        "a direct TPM slot on a TPM whose lockout authorization is empty moves off the TPM at the next right unlock, to the software path (or the guess counter service when named); on one with a lockout set it stays, cost and all; a record rewritten to version 1 with a slot is refused as corrupt"
    )
    func directSlotOnOpenLockoutMovesAtUnlock() throws {
        let service = try PrivateSecretService.start()
        let counter = try PrivateEscrow.counter()
        for toService in [false, true] {
            let tpm = try PrivateTPM()
            let name = toService ? "open-to-service" : "open-to-software"
            let before = service.device(name, retryPolicy: quick, tpm: tpm)
            try before.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
            try before.reboot()
            // This version, on a floor above the slot's cost: with the lockout set, the slot stays
            // and so does its cost (raising it would take a new direct slot).
            let now = service.device(
                name, tpm: TPMConfiguration(tcti: tpm.tcti),
                tuning: DeviceTuning(
                    passcodeCost: Argon2Cost(
                        operations: Argon2Cost.minimum.operations + 1,
                        memoryBytes: Argon2Cost.minimum.memoryBytes), retryPolicy: quick))
            defer { try? now.reboot() }
            try now.unlock(passcode: "482916")
            var record = try storedRecord(now)
            #expect(record.passcode.tpm != nil && record.passcode.cost == Argon2Cost.minimum)
            // Another process rewrites the record to look older, to have an unlock move it.
            let loaded = try now.records.load()
            var older = loaded.record
            older.passcode.version = 1
            let olderPath = try writeStoredRecord(now, older, at: loaded.path)
            #expect(code { _ = try now.lockScreenKind() } == .corrupt)
            try writeStoredRecord(now, loaded.record, at: olderPath)
            // The lockout authorization emptied (as on most machines): the next right unlock moves
            // the slot off, to the counter when one is named, else to the software path.
            try tpm.clearLockoutAuthorization()
            let moved = service.device(
                name, tpm: TPMConfiguration(tcti: tpm.tcti),
                counter: toService ? counter.configuration : nil, tuning: .fast)
            defer { try? moved.reboot() }
            try moved.reboot()
            record = try storedRecord(moved)
            let slot = try #require(record.passcode.tpm)
            let oldKey = try PasscodeKeys.passcodeKey(
                "482916", salt: try #require(record.passcode.salt),
                cost: try #require(record.passcode.cost))
            try moved.unlock(passcode: "482916")
            record = try storedRecord(moved)
            #expect(record.passcode.tpm == nil)
            #expect(try moved.status().guessLimit == (toService ? "service" : "software"))
            #expect(
                throws: TPMError.self, "the slot read at the unlock is gone from the TPM"
            ) {
                try TPMPasscodeSlot.attempt(
                    try tpm.context(), slot: slot,
                    authorization: PasscodeKeys.tpmAuthorization(passcodeKey: oldKey))
            }
            try moved.reboot()
            #expect(code { try moved.unlock(passcode: "000000") } == .authFailed)
            try moved.unlock(passcode: "482916")
            try moved.wipe()  // one device per Secret Service: the next round starts afresh
        }
    }
}
