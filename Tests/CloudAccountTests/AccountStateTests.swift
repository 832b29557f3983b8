import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

@testable import CloudAccount
@testable import Device

@Suite("The cloud account's own record, kept in the device record: the account's names, as always")
struct AccountStateTests {
    @Test(
        "a record with the account's fields beside the device's (as earlier versions stored them) reads them as the account's record, and writes them back as that record, under the same names, in the device record's one field for it"
    )
    func storedAsAlways() throws {
        var record = DeviceRecord.fresh()
        record.kind = .pin
        let key = Data(repeating: 7, count: 72)
        // What an earlier version wrote: the account's fields beside the device's, one object.
        var object =
            try JSONSerialization.jsonObject(with: record.encoded().dropFirst(4)) as! [String: Any]
        object["wrappedCloudKey"] = key.base64EncodedString()
        object["wrappedWitnessSeed"] = Data(repeating: 9, count: 72).base64EncodedString()
        object["escrowGeneration"] = 3
        object["cloudEpoch"] = 2
        object["rotationPending"] = true
        let earlier = Data("KDS1".utf8) + (try JSONSerialization.data(withJSONObject: object))

        var read = try DeviceRecord.decode(earlier)
        #expect(read.account.wrappedCloudKey == key)
        #expect(read.account.wrappedWitnessSeed == Data(repeating: 9, count: 72))
        #expect(read.account.escrowGeneration == 3)
        #expect(read.account.cloudEpoch == 2)
        #expect(read.account.rotationPending == true)
        #expect(read.deviceSecret == record.deviceSecret)
        // The device's own fields are not the account's.
        #expect(try accountNames(read).count == 5)

        // Written back: the account's record in its one field, the same names and values, and
        // nothing of the account's beside the device's; it reads back equal.
        let written =
            try JSONSerialization.jsonObject(with: read.encoded().dropFirst(4))
            as! [String: Any]
        #expect(written["wrappedCloudKey"] == nil && written["cloudEpoch"] == nil)
        #expect(written["account"] as? String == read.accountRecord?.base64EncodedString())
        let names = try accountNames(read)
        #expect(names["wrappedCloudKey"] as? String == key.base64EncodedString())
        #expect(names["cloudEpoch"] as? Int == 2)
        #expect(names["rotationPending"] as? Bool == true)
        #expect(try DeviceRecord.decode(read.encoded()) == read)

        read.account.cloudEpoch = nil
        #expect(try DeviceRecord.decode(read.encoded()).account.cloudEpoch == nil)
        read.accountRecord = nil
        #expect(try DeviceRecord.decode(read.encoded()).account.wrappedCloudKey == nil)
    }

    /// An upkeep on `account` that read its record, made `change` of it, and stored that
    /// (`storeAfterCloud`) after `meanwhile` ran: the record it read, and the record after.
    private func upkeep(
        on account: CloudAccount, making change: (inout HeldAccountState) -> Void,
        meanwhile: () throws -> Void
    ) throws -> (read: HeldAccountState, now: DeviceRecord) {
        let read = try account.device.accountState()
        var kept = read
        change(&kept)
        try meanwhile()
        try account.keys.storeAfterCloud(kept, read: read)
        return (read, try storedRecord(account.device))
    }

    /// The names of the account's record in `record`.
    private func accountNames(_ record: DeviceRecord) throws -> [String: Any] {
        let bytes = try #require(record.accountRecord)
        return try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
    }

    @Test(
        "the device's one rule on the account's state: it goes whole with the knowledge factor; a new passcode keeps it and counts as a change (what the account rotates its key on), an unlock that re-seals does not"
    )
    func deviceRule() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let device = service.device(retryPolicy: .fast)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        var (path, record) = try device.records.load()
        record.holdAccountKey(Data(repeating: 7, count: 72), epoch: 1, underThisPasscode: true)
        #expect(!record.account.owesRotation(passcodeChanges: record.passcodeChanges))
        try writeStoredRecord(device, record, at: path)

        // An unlock that raises the passcode's cost re-seals the record (a new generation), and
        // changes no passcode.
        let raising = service.device(
            tuning: DeviceTuning(passcodeCost: .interactive, retryPolicy: .fast))
        try raising.unlock(passcode: "1234")
        let resealed = try storedRecord(device)
        #expect(resealed.generation != record.generation)
        #expect(!resealed.account.owesRotation(passcodeChanges: resealed.passcodeChanges))

        try device.setLockScreen(.pin, passcode: "5678", currentPasscode: "1234")
        record = try storedRecord(device)
        #expect(record.account.owesRotation(passcodeChanges: record.passcodeChanges))
        #expect(record.account.wrappedCloudKey == Data(repeating: 7, count: 72))

        try device.setLockScreen(.swipe, passcode: nil, currentPasscode: "5678")
        record = try storedRecord(device)
        #expect(record.accountRecord == nil)
        #expect(record.account == AccountState())
    }

    @Test(
        "the account's state reads field by field (a value that does not read loses that field only) and is written over only its own names (a name it does not know is kept)"
    )
    func readsLeniently() throws {
        var record = DeviceRecord.fresh()
        record.accountRecord = try JSONSerialization.data(withJSONObject: [
            "wrappedCloudKey": Data(repeating: 7, count: 72).base64EncodedString(),
            "cloudEpoch": "three", "escrowGeneration": 4, "fromANewerVersion": 1,
        ])
        #expect(record.account.wrappedCloudKey == Data(repeating: 7, count: 72))
        #expect(record.account.cloudEpoch == nil)
        #expect(record.account.escrowGeneration == 4)
        record.account.cloudEpoch = 3
        #expect(try accountNames(record)["fromANewerVersion"] as? Int == 1)
        #expect(try accountNames(record)["cloudEpoch"] as? Int == 3)
        #expect(record.account.wrappedCloudKey == Data(repeating: 7, count: 72))
        record.account = AccountState()
        #expect(try accountNames(record).keys.sorted() == ["fromANewerVersion"])
    }

    @Test(
        "a passcode removed while the cloud upkeep of an earlier unlock is under way stays removed with its keys: the upkeep's write finds no knowledge factor and writes nothing back"
    )
    func upkeepAfterPasscodeRemoved() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let device = service.account(cloud: Throwaway.untrusted("upkeep-race"))
        let change = try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        #expect(change.recoveryKey != nil)
        // What an upkeep that read the record before the passcode went would write back.
        let (read, now) = try upkeep(on: device) { kept in
            kept.account.cloudEpoch = (kept.account.cloudEpoch ?? 0) + 1
        } meanwhile: {
            try device.setLockScreen(.swipe, passcode: nil, currentPasscode: "1234")
        }
        #expect(read.account.wrappedCloudKey != nil)
        #expect(now.kind == .swipe)
        #expect(now.accountRecord == nil)
    }

    @Test(
        "an upkeep's write finds the passcode removed and set again meanwhile: the state it read went, and nothing of it comes back"
    )
    func upkeepAfterPasscodeRemovedAndSetAgain() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let account = service.account(cloud: Throwaway.untrusted("upkeep-reset"))
        try account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let (read, now) = try upkeep(on: account) { kept in
            kept.account.cloudEpoch = (kept.account.cloudEpoch ?? 0) + 1
        } meanwhile: {
            try account.device.setLockScreen(.swipe, passcode: nil, currentPasscode: "1234")
            try account.device.setLockScreen(.pin, passcode: "5678", currentPasscode: nil)
        }
        #expect(read.account.wrappedCloudKey != nil)
        #expect(now.account.wrappedCloudKey == nil)
        #expect(now.account.wrappedWitnessSeed == nil)
    }

    @Test(
        "an upkeep that rotated the key while another process changed the passcode keeps the new key, and owes a rotation for that change"
    )
    func upkeepRotatedWhileThePasscodeChanged() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let account = service.account(cloud: Throwaway.untrusted("upkeep-rotated"))
        try account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let (read, now) = try upkeep(on: account) { kept in
            kept.holdAccountKey(
                Data(repeating: 5, count: 72), epoch: (kept.account.cloudEpoch ?? 0) + 1,
                underThisPasscode: true)
        } meanwhile: {
            try account.device.setLockScreen(.pin, passcode: "5678", currentPasscode: "1234")
        }
        #expect(now.account.wrappedCloudKey == Data(repeating: 5, count: 72))
        #expect(now.account.cloudEpoch == (read.account.cloudEpoch ?? 0) + 1)
        #expect(now.account.owesRotation(passcodeChanges: now.passcodeChanges))
    }

    @Test(
        "an upkeep that fails to make the account keeps nothing of it: no key and no witness seed in the record (a seed kept would be offered as the account's later)"
    )
    func failedCreationKeepsNothing() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        struct Refused: Error {}
        let cloud = InterceptedCloud(CloudDirectory(Throwaway.untrusted("upkeep-failed"))) {
            if $0 == "account" { throw Refused() }
        }
        let account = service.account(cloud: cloud, tuning: .fast)
        let change = try account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        #expect(change.problem != nil)
        #expect(change.recoveryKey == nil)
        let record = try storedRecord(account.device)
        #expect(record.account.wrappedCloudKey == nil)
        #expect(record.account.wrappedWitnessSeed == nil)
    }

    @Test(
        "an upkeep that made the account while the passcode was removed and set again meanwhile keeps nothing of it: the new passcode's record takes no key made under the old one"
    )
    func creationAcrossARemoval() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let account = service.account(cloud: Throwaway.untrusted("upkeep-made-across"))
        try account.device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let (read, now) = try upkeep(on: account) { kept in
            kept.holdAccountKey(Data(repeating: 5, count: 72), epoch: 0, underThisPasscode: true)
            kept.account.wrappedWitnessSeed = Data(repeating: 6, count: 72)
        } meanwhile: {
            try account.device.setLockScreen(.swipe, passcode: nil, currentPasscode: "1234")
            try account.device.setLockScreen(.pin, passcode: "5678", currentPasscode: nil)
        }
        #expect(read.account.wrappedCloudKey == nil)
        #expect(now.kind == .pin)
        #expect(now.accountRecord == nil)
    }

    @Test(
        "a key followed or joined after the device's passcode was removed, or the device erased, since the sync or join began is not kept: the record stays without it"
    )
    func adoptAcrossARemovalOrAWipe() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        let account = service.account(cloud: Throwaway.untrusted("adopt-across"))
        try account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let read = try account.device.accountState()
        let key = try #require(try account.keys.cloudKey())

        try account.device.setLockScreen(.swipe, passcode: nil, currentPasscode: "1234")
        #expect(code { try account.keys.adopt(key, followed: true, since: read) } == .notAvailable)
        #expect(try storedRecord(account.device).accountRecord == nil)

        // The same read, the device erased since: a new record, which takes nothing either.
        try account.device.wipe()
        #expect(code { try account.keys.adopt(key, since: read) } == .notAvailable)
        #expect(try storedRecord(account.device).accountRecord == nil)

        // A join that began on this record (no passcode) keeps the key: nothing went since.
        let now = try account.device.accountState()
        try account.keys.adopt(key, since: now)
        #expect(try storedRecord(account.device).account.wrappedCloudKey != nil)
    }

    @Test(
        "the account's record field read with care: names an earlier version wrote beside it are read over it; a field that is not bytes, or empty, leaves the device readable"
    )
    func accountFieldReadWithCare() throws {
        var record = DeviceRecord.fresh()
        record.kind = .pin
        record.holdAccountKey(Data(repeating: 7, count: 72), epoch: 1, underThisPasscode: true)
        var object =
            try JSONSerialization.jsonObject(with: record.encoded().dropFirst(4)) as! [String: Any]
        #expect(object["account"] is String)

        // An earlier version read this record and wrote the account's epoch beside the field.
        object["cloudEpoch"] = 2
        var read = try DeviceRecord.decode(
            Data("KDS1".utf8) + JSONSerialization.data(withJSONObject: object))
        #expect(read.account.cloudEpoch == 2)
        #expect(read.account.wrappedCloudKey == Data(repeating: 7, count: 72))

        // A field of another format: the device reads, with no account state.
        object["account"] = ["wrappedCloudKey": 1]
        object.removeValue(forKey: "cloudEpoch")
        read = try DeviceRecord.decode(
            Data("KDS1".utf8) + JSONSerialization.data(withJSONObject: object))
        #expect(read.deviceSecret == record.deviceSecret)
        #expect(read.account == AccountState())

        // An empty field beside the account's names: the names are the record.
        object["account"] = ""
        object["escrowGeneration"] = 4
        read = try DeviceRecord.decode(
            Data("KDS1".utf8) + JSONSerialization.data(withJSONObject: object))
        #expect(read.account.escrowGeneration == 4)
    }
}

extension DeviceRecord {
    /// The account's state in this record, read and written as the account does through the
    /// device (`HeldAccountState`).
    var account: AccountState {
        get { HeldAccountState(self).account }
        set {
            var held = HeldAccountState(self)
            held.account = newValue
            accountRecord = held.bytes
        }
    }

    /// `HeldAccountState.holdAccountKey` on this record.
    mutating func holdAccountKey(_ wrapped: Data, epoch: Int, underThisPasscode: Bool) {
        var held = HeldAccountState(self)
        held.holdAccountKey(wrapped, epoch: epoch, underThisPasscode: underThisPasscode)
        accountRecord = held.bytes
    }
}
