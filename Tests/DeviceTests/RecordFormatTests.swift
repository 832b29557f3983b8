import Device
import Foundation
import Sealing
import Testing

@Suite("The device record's stored form: one JSON object, its passcode slot's fields among its own")
struct RecordFormatTests {
    @Test(
        "the passcode slot's fields are stored by their own names beside the device's (no nested object), read back equal, and a record written that way by hand reads as the same slot"
    )
    func slotFieldsBesideTheDevicesOwn() throws {
        var record = DeviceRecord.fresh()
        record.kind = .pin
        let secret = SecureBytes(copying: record.deviceSecret)
        let cost = Argon2Cost(operations: 3, memoryBytes: 8 * 1024 * 1024)
        record.passcode = PasscodeSlot(
            version: 2, salt: Data(repeating: 1, count: 16), cost: cost,
            verifier: Data(repeating: 2, count: 32), tpm: nil,
            counterSlot: Data(repeating: 3, count: 32),
            counterPin: CounterPin(
                peer: 999, publicKey: Data(repeating: 4, count: 32),
                slot: Data(repeating: 3, count: 32), salt: Data(repeating: 1, count: 16),
                cost: cost, deviceSecret: secret),
            retiredCounterSlots: [Data(repeating: 5, count: 32)])
        record.passcodeChanges = 2

        let stored = try #require(
            try JSONSerialization.jsonObject(with: record.encoded().dropFirst(4))
                as? [String: Any])
        #expect(stored["passcode"] == nil)
        for name in [
            "version", "salt", "cost", "verifier", "counterSlot", "counterPin",
            "retiredCounterSlots", "deviceSecret", "kind", "wrappedKeys", "keyChecks", "failures",
            "notBefore", "generation", "passcodeChanges",
        ] {
            #expect(stored[name] != nil, "\(name) is stored by its own name")
        }
        #expect(stored["salt"] as? String == Data(repeating: 1, count: 16).base64EncodedString())
        #expect(stored["version"] as? Int == 2)
        #expect(try DeviceRecord.decode(record.encoded()) == record)

        // The same fields written by hand, as every earlier version stored them.
        var byHand = stored
        byHand["verifier"] = Data(repeating: 6, count: 32).base64EncodedString()
        byHand.removeValue(forKey: "counterSlot")
        let read = try DeviceRecord.decode(
            Data("KDS1".utf8) + JSONSerialization.data(withJSONObject: byHand))
        #expect(read.passcode.verifier == Data(repeating: 6, count: 32))
        #expect(read.passcode.counterSlot == nil)
        #expect(read.passcode.cost == cost)
        #expect(read.passcode.retiredCounterSlots == [Data(repeating: 5, count: 32)])
        #expect(read.accountRecord == nil)  // no slot field is taken for the account's
    }
}
