import Foundation
import Platform
import Sealing
import SecretService
import TPM

/// The device's persistent state, stored as one Secret Service item.
///
/// It holds the device secret (so it is as secret as the login keyring's contents), the class keys
/// wrapped under the key-encryption key, and what is needed to check a passcode — never anything a
/// passcode guess can be tested against without the device secret (software path), the guess
/// counter service (counted path) or the TPM (TPM path). See `PasscodeKeys` for the
/// derivations.
package struct DeviceRecord: CountedRecord, Sendable, Equatable {
    package var deviceSecret: Data
    package var kind: LockScreenKind
    /// What checks the passcode: its record version, salt and cost, and where it is checked
    /// (verifier, guess counter slot, TPM slot). Stored as fields of the record's own object.
    package var passcode = PasscodeSlot.empty
    package var wrappedKeys: [String: Data]
    /// Each class key's check value (`PasscodeKeys.check`), by class: a key in the kernel keyring
    /// that does not match is not the device's and is never used. nil in a record without checks
    /// (runtime keys are then taken unchecked until the next unlock writes them).
    package var keyChecks: [String: Data]?
    /// Wrong passcodes in a row, and the time before which no attempt is taken (ms since epoch).
    package var failures: Int
    package var notBefore: Int64
    /// Bumped by every lock-screen change and every re-seal of the class keys (an unlock that
    /// raises the passcode's cost or moves its slot). No write can have read an older one (every
    /// write holds the device's lock it read under, `DeviceRecordStore`), so a slow wrong guess
    /// never writes an older passcode's record back; the account's writes are checked against it
    /// and the device's other facts (`Device.replaceAccountState(since:_:)`).
    package var generation: Int?
    /// How many times a passcode replaced another on this device (nil: none yet): what the
    /// end-to-end keys held under the passcode rotate on. Only `setLockScreen` changes it.
    package var passcodeChanges: Int?
    /// The public half of the presence key pair (its seed is in `wrappedKeys`, under the KEK):
    /// items that need the passcode at each use are sealed to it. Only while a passcode is set.
    package var presencePublicKey: Data?
    /// The signed-in account's own record (the `CloudAccount` module's, as it encodes it): bytes
    /// the device stores and never reads; the account reads and replaces them only through
    /// `HeldAccountState`. The device applies one rule to it: it goes with the
    /// last knowledge factor, as every end-to-end key does — in the same write, which is why it
    /// is kept here and not in an item of its own (the Secret Service has no transaction over
    /// two items).
    package var accountRecord: Data?

    /// Keeps `seed` as the presence key, wrapped under `kek`, and its public key.
    package mutating func setPresence(_ seed: SecureBytes, kek: SecureBytes) {
        wrappedKeys[PasscodeKeys.presenceEntry] = PasscodeKeys.wrapPresence(seed, kek: kek)
        presencePublicKey = SealedBox.keyPair(seed: seed).publicKey
    }

    /// The device's stable public identifier (names its runtime keyring and TPM slot): a hash of
    /// the device secret, so it needs no storage of its own.
    package var deviceID: String {
        KeyDerivation.keyedHash(
            key: SecureBytes(copying: deviceSecret), context: "keepsake.device.id.v1"
        )
        .unsafeData().prefix(16).hexString
    }

    /// A new device: no lock screen, a random device secret, a random key per class (none for
    /// `WhenPasscodeSetThisDeviceOnly`, which needs a passcode).
    package static func fresh() -> DeviceRecord {
        let secret = SecureBytes(randomCount: 32)
        var record = DeviceRecord(
            deviceSecret: secret.unsafeData(), kind: .none, wrappedKeys: [:], failures: 0,
            notBefore: 0, generation: 0)
        var keys: [ProtectionClass: SecureBytes] = [:]
        for protection in ProtectionClass.allCases where !protection.requiresPasscode {
            keys[protection] = SecureBytes(randomCount: Envelope.keyLength)
        }
        record.wrappedKeys = PasscodeKeys.wrap(keys, kek: PasscodeKeys.deviceKEK(secret))
        record.keyChecks = PasscodeKeys.checks(keys, deviceSecret: secret)
        return record
    }

    /// `KDS1` and the record as one JSON object.
    package func encoded() -> Data {
        Data("KDS1".utf8) + (try! JSONEncoder().encode(self))
    }

    package static func decode(_ bytes: Data) throws(DeviceError) -> DeviceRecord {
        guard bytes.count <= 64 * 1024, bytes.starts(with: Data("KDS1".utf8)),
            var record = try? JSONDecoder().decode(DeviceRecord.self, from: bytes.dropFirst(4)),
            (1...2).contains(record.passcode.version), record.deviceSecret.count == 32,
            // A version 1 record holds neither a TPM slot nor a counter slot: one claiming
            // version 1 with a slot was rewritten, to have an unlock move the slot off as raising
            // a version 1 record to version 2 does.
            record.passcode.version == 2
                || (record.passcode.tpm == nil && record.passcode.counterSlot == nil),
            record.passcode.cost?.isWithinBounds ?? true
        else {
            throw DeviceError(
                .corrupt,
                "the device state does not decode (damaged, or written by something else): erasing the device (device wipe) starts it anew; items sealed under it are lost"
            )
        }
        record.accountRecord = accountRecord(record.accountRecord, besides: bytes)
        return record
    }

    /// The account's record: `field` (the record's own field for it), with the names beside the
    /// device's that are not the device's written over it — what a version before the field
    /// wrote (also into a record of this version's, which it read and wrote back). nil when
    /// there is neither.
    private static func accountRecord(_ field: Data?, besides bytes: Data) -> Data? {
        let field = field?.isEmpty == false ? field : nil
        guard
            let object = try? JSONSerialization.jsonObject(with: bytes.dropFirst(4))
                as? [String: Any]
        else { return field }
        let earlier = object.filter { !ownNames.contains($0.key) }
        guard !earlier.isEmpty else { return field }
        var names =
            field.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] } ?? [:]
        names.merge(earlier) { _, earlier in earlier }
        return try? JSONSerialization.data(withJSONObject: names, options: .sortedKeys)
    }
}

/// The record as one JSON object: its passcode slot's fields and its own, side by side.
extension DeviceRecord: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceSecret, kind, wrappedKeys, keyChecks, failures, notBefore, generation
        case passcodeChanges, presencePublicKey
        case accountRecord = "account"
    }

    /// The device's names in a stored record.
    static let ownNames = Set(
        CodingKeys.allCases.map(\.stringValue)
            + PasscodeSlot.CodingKeys.allCases.map(\.stringValue))

    package init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            deviceSecret: try fields.decode(Data.self, forKey: .deviceSecret),
            kind: try fields.decode(LockScreenKind.self, forKey: .kind),
            passcode: try PasscodeSlot(from: decoder),
            wrappedKeys: try fields.decode([String: Data].self, forKey: .wrappedKeys),
            keyChecks: try fields.decodeIfPresent([String: Data].self, forKey: .keyChecks),
            failures: try fields.decode(Int.self, forKey: .failures),
            notBefore: try fields.decode(Int64.self, forKey: .notBefore),
            generation: try fields.decodeIfPresent(Int.self, forKey: .generation),
            passcodeChanges: try fields.decodeIfPresent(Int.self, forKey: .passcodeChanges),
            presencePublicKey: try fields.decodeIfPresent(Data.self, forKey: .presencePublicKey),
            // Not bytes (another format's): no account record, the device readable all the same.
            accountRecord: (try? fields.decodeIfPresent(Data.self, forKey: .accountRecord)) ?? nil)
    }

    package func encode(to encoder: any Encoder) throws {
        try passcode.encode(to: encoder)
        var fields = encoder.container(keyedBy: CodingKeys.self)
        try fields.encode(deviceSecret, forKey: .deviceSecret)
        try fields.encode(kind, forKey: .kind)
        try fields.encode(wrappedKeys, forKey: .wrappedKeys)
        try fields.encodeIfPresent(keyChecks, forKey: .keyChecks)
        try fields.encode(failures, forKey: .failures)
        try fields.encode(notBefore, forKey: .notBefore)
        try fields.encodeIfPresent(generation, forKey: .generation)
        try fields.encodeIfPresent(passcodeChanges, forKey: .passcodeChanges)
        try fields.encodeIfPresent(presencePublicKey, forKey: .presencePublicKey)
        try fields.encodeIfPresent(accountRecord, forKey: .accountRecord)
    }
}
