import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

@testable import Device

/// A record kept in memory: what `GuessLimit.prove` counts in, with no Secret Service under it.
private struct MemoryRecord: CountedRecord {
    var failures = 0
    var notBefore: Int64 = 0
    var passcode = PasscodeSlot.empty
    let deviceSecret = Data(repeating: 7, count: 32)
}

/// Every state `prove` asked to be stored, in order.
private final class Writes {
    var failures: [Int] = []
}

@Suite(
    "GuessLimit.prove, the one way a device's passcode is checked: counted and stored before anything is derived (the passcode folder alone, on a record in memory)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct PasscodeProofTests {
    let clock = ManualClock()
    let directory: URL
    let limit: GuessLimit

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keepsake-proof-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        limit = GuessLimit(
            tuning: DeviceTuning(
                passcodeCost: .minimum, retryPolicy: .fast, clock: clock.guessClock),
            tpm: nil, counter: nil)
    }

    /// A record whose slot was made for `passcode` on the software path.
    private func record(for passcode: SecureBytes) throws -> MemoryRecord {
        var record = MemoryRecord()
        _ = try limit.makeSlot(
            for: passcode, replacing: &record.passcode,
            deviceSecret: SecureBytes(copying: record.deviceSecret))
        return record
    }

    private func prove(_ passcode: SecureBytes, _ record: inout MemoryRecord, _ writes: Writes)
        throws(DeviceError) -> SecureBytes
    {
        try limit.prove(passcode, &record) { stored in writes.failures.append(stored.failures) }
            .kek
    }

    @Test("a wrong passcode is stored as counted before it is refused, and stays counted")
    func wrongPasscodeStaysCounted() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var record = try record(for: "482916")
        let writes = Writes()
        #expect(throws: DeviceError(.authFailed)) { try prove("000000", &record, writes) }
        #expect(writes.failures == [1])
        #expect(record.failures == 1)
        #expect(record.notBefore > 0)
    }

    @Test(
        "the right passcode is counted first and cleared after: two writes, and the software path's key-encryption key"
    )
    func rightPasscodeCountedThenCleared() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var record = try record(for: "482916")
        record.failures = 2
        let writes = Writes()
        let kek = try prove("482916", &record, writes)
        #expect(writes.failures == [3, 0])
        #expect(record.failures == 0 && record.notBefore == 0)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "482916", salt: try #require(record.passcode.salt),
            cost: try #require(record.passcode.cost))
        let expected = PasscodeKeys.softwareKEK(
            passcodeKey: passcodeKey, deviceSecret: SecureBytes(copying: record.deviceSecret))
        #expect(kek.unsafeData() == expected.unsafeData())
    }

    @Test(
        "when the count cannot be stored, the passcode is never checked: the right one fails with the store's error"
    )
    func unstoredCountChecksNothing() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var record = try record(for: "482916")
        #expect(throws: DeviceError(.notAvailable)) {
            try limit.prove("482916", &record) { _ throws(DeviceError) in
                throw DeviceError(.notAvailable, "the Secret Service went away")
            }
        }
    }

    @Test(
        "an earned delay is sat out before the guess; a long one refuses at once, nothing counted; a malformed guess is refused uncounted"
    )
    func delaysAndMalformedGuesses() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        var record = try record(for: "482916")
        let writes = Writes()
        #expect(throws: DeviceError(.authFailed)) { try prove("000000", &record, writes) }
        // One failure earned 300 ms (RetryPolicy.fast): sat out on the test clock.
        _ = try prove("482916", &record, writes)
        #expect(clock.slept == .milliseconds(300))

        record.failures = 9
        record.notBefore = GuessClock.system.now() + 3_600_000
        let before = writes.failures
        #expect(throws: DeviceError(.authFailed)) { try prove("482916", &record, writes) }
        #expect(writes.failures == before)
        #expect(record.failures == 9)

        #expect(throws: DeviceError(.invalidPasscode)) { try prove("12", &record, writes) }
        #expect(writes.failures == before)
    }
}
