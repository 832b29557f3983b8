import Escrow
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Device

/// The device record as stored (read the way another process of the user can).
private func storedRecord(_ device: Device) throws -> DeviceRecord {
    try device.records.load().record
}

@Suite(
    "Passcode guesses counted by a guess counter service (keepsake-escrow): no process of the user reaches around it",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct CounterServiceTests {
    @Test(
        "the right passcode unlocks; status says service and where it counts; the record holds no verifier, no TPM slot, nothing to test a guess against; a passcode change moves the slot and removes the old one"
    )
    func unlock() throws {
        let counter = try PrivateEscrow()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
        let record = try storedRecord(device)
        let slot = try #require(record.counterSlot)
        #expect(record.verifier == nil && record.tpm == nil)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000000") } == .authFailed)
        #expect(try device.status().failedAttempts == 1)
        try device.unlock(passcode: "482916")
        let status = try device.status()
        #expect(status.guessLimit == "service" && status.countedIn == "software TPM (IBM SW)")
        #expect(status.failedAttempts == 0 && status.state == .unlocked)
        // What the record holds opens nothing without the counter: the software path's KEK from
        // the right passcode and the device secret does not unwrap the class keys.
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "482916", salt: try #require(record.salt), cost: try #require(record.cost))
        let softwareKEK = PasscodeKeys.softwareKEK(
            passcodeKey: passcodeKey, deviceSecret: SecureBytes(copying: record.deviceSecret))
        #expect(throws: (any Error).self) {
            try PasscodeKeys.unwrap(record.wrappedKeys, kek: softwareKEK)
        }
        // A passcode change: a new slot, the old one removed at the counter.
        try device.setLockScreen(.pin, passcode: "771133", currentPasscode: "482916")
        let moved = try #require(try storedRecord(device).counterSlot)
        #expect(moved != slot)
        #expect(throws: EscrowError.self) { try counter.configuration.client().status(of: slot) }
        try device.reboot()
        #expect(code { try device.unlock(passcode: "482916") } == .authFailed)
        try device.unlock(passcode: "771133")
        // Removing the passcode removes the slot too.
        try device.setLockScreen(.none, passcode: nil, currentPasscode: "771133")
        #expect(try storedRecord(device).counterSlot == nil)
        #expect(throws: EscrowError.self) { try counter.configuration.client().status(of: moved) }
    }

    @Test(
        "10 wrong passcodes in a row disable the device, even for the right one; resetting the record's count changes nothing; wipe recovers"
    )
    func hardLimit() throws {
        let counter = try PrivateEscrow()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        for guess in 0..<9 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("00000\(guess)".utf8)))
                }
                    == .authFailed)
        }
        try device.unlock(passcode: "135790")  // the count starts again
        try device.reboot()
        for guess in 0..<10 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("11111\(guess)".utf8)))
                }
                    == (guess < 9 ? .authFailed : .disabled))
        }
        let loaded = try device.records.load()
        var record = loaded.record
        record.failures = 0
        record.notBefore = 0
        try device.records.store(record, replacing: loaded.path)
        #expect(code { try device.unlock(passcode: "135790") } == .disabled)
        #expect(try device.state() == .beforeFirstUnlock)
        try device.wipe()
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        try device.unlock(passcode: "135790")
        print(
            "counter service: 10 wrong passcodes disabled the device; a reset record count gained nothing; wipe recovers"
        )
    }

    @Test(
        "another process of the user, holding everything the user holds (the device record, the counter's address), gets at most 10 passcode checks and cannot disable the device more cheaply: claims that skip Keepsake are counted, a removal without the slot's secret and a rewritten salt are refused"
    )
    func attackerOfTheSameUser() throws {
        let counter = try PrivateEscrow()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        try device.reboot()
        let record = try storedRecord(device)
        let slot = try #require(record.counterSlot)
        let client = counter.configuration.client()
        // The record's salt rewritten: the counter keeps its own, so the right passcode still
        // unlocks and nothing was spent.
        let loaded = try device.records.load()
        var tampered = loaded.record
        tampered.salt = Data(repeating: 9, count: KeyDerivation.saltLength)
        try device.records.store(tampered, replacing: loaded.path)
        try device.unlock(passcode: "246810")
        try device.reboot()
        // Removing the slot takes its secret: a key derived from anything in the record fails.
        for seed in [record.deviceSecret, slot, Data(repeating: 0, count: 32)] {
            #expect(throws: EscrowError.self) {
                try client.remove(slot, secret: SecureBytes(copying: seed))
            }
        }
        #expect(try client.status(of: slot).failures == 0)
        // Guesses straight at the counter, with the real salt and cost, skipping Keepsake: each
        // counted; the 10th destroys the slot (the device is disabled after exactly 10 checks).
        let status = try client.status(of: slot)
        var answers: [EscrowError.Code] = []
        for guess in 0..<12 {
            let key = try PasscodeKeys.passcodeKey(
                SecureBytes(copying: Data("99999\(guess)".utf8)), salt: status.salt,
                cost: status.cost)
            do { _ = try client.claim(slot, passcodeKey: key) } catch { answers.append(error.code) }
        }
        #expect(
            answers == Array(repeating: .authFailed, count: 9)
                + Array(repeating: .destroyed, count: 3))
        #expect(code { try device.unlock(passcode: "246810") } == .disabled)
        print("counter service: an outside process got 10 checks, then the slot was destroyed")
    }
}
