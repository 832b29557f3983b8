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
    /// raises the passcode's cost or moves its slot); a write that read an older generation is
    /// refused, so a slow wrong guess never writes an older passcode's record back.
    package var generation: Int?
    /// How many times a passcode replaced another on this device (nil: none yet): what the
    /// end-to-end keys held under the passcode rotate on. Only `setLockScreen` changes it.
    package var passcodeChanges: Int?
    /// The public half of the presence key pair (its seed is in `wrappedKeys`, under the KEK):
    /// items that need the passcode at each use are sealed to it. Only while a passcode is set.
    package var presencePublicKey: Data?
    /// The signed-in account's own record (the `CloudAccount` module's, as it encodes it): bytes
    /// the device stores and never reads. The device applies one rule to it: it goes with the
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

/// Reads and writes the device record in the Secret Service's persistent collection.
///
/// A provider killed before it saved can come back with the record's item but not its secret
/// (kwalletd5 writes a wallet to disk when it closes it; its item list reaches the disk before the
/// secrets do). That state is gone for good: the record is made anew in the same item, its
/// predecessor's runtime keys are dropped (its device ID is kept, public, in the device directory),
/// and the one call that found it says so — every later call works on the new, empty device.
package struct DeviceRecordStore: Sendable {
    package let secretService: SecretServiceConnection
    /// The device directory: `device-id` there names the record's device (not secret).
    package let directory: URL

    /// Where the current record's device ID is noted.
    private var idFile: URL { directory.appendingPathComponent("device-id") }
    /// Where the record's item was last found (an object path: not secret), so a cold read can
    /// fetch the record in the same `GetSecrets` as the items it reads instead of searching for
    /// it first (`recordAt(noted:)`).
    private var pathFile: URL { directory.appendingPathComponent("record-path") }

    package static let collection = CollectionPath.default
    package static let attributes = [
        "xdg:schema": "org.keepsake.Device", "keepsake-device": "state",
    ]

    /// Taken around a first use's search-and-create, so the processes of the user that share the
    /// device directory make one record between them (hidden: a wipe keeps it).
    private var creationLock: URL { directory.appendingPathComponent(".record.lock") }

    /// The record, made on first use. Concurrent first uses are serialized by the device
    /// directory's creation lock: one of them makes the record, the others find it. Without the
    /// lock (processes given different directories on one Secret Service) several may be made;
    /// the smallest path wins and the others are deleted (whatever order a provider gives its
    /// paths in, every process makes the same comparison) — and what a loser sealed under its
    /// own record's keys meanwhile is lost, which is why the lock is there.
    package func load() throws(DeviceError) -> (path: ItemPath, record: DeviceRecord) {
        if let found = try read() { return found }
        let lock = try DeviceError.lock(creationLock, "the device record's creation lock")
        defer { withExtendedLifetime(lock) {} }
        for _ in 0..<3 {
            if let found = try read() { return found }
            // None (yet, or no more: a provider that lost the item itself). A device noted here
            // before has no state left: its runtime keys go with it.
            forgetNotedDevice()
            let fresh = DeviceRecord.fresh()
            try store(fresh, replacing: nil)
            noteDeviceID(fresh.deviceID)
        }
        throw DeviceError(.notAvailable, "the device state could not be read")
    }

    /// The record the search finds; nil when there is none (or its item went away meanwhile).
    private func read() throws(DeviceError) -> (path: ItemPath, record: DeviceRecord)? {
        let found = try call { () throws(SecretServiceError) in
            try secretService.search(Self.attributes)
        }
        // Locked: KeePassXC finds nothing in a locked database, and a record made then would
        // be a second one (and its create an unlock dialog).
        if found.collectionLocked {
            throw DeviceError(.interactionNotAllowed, SecretServiceError.lockedCollection)
        }
        guard let first = found.unlocked.min() else { return nil }
        for other in found.unlocked where other != first {
            try? secretService.deleteItem(at: other)
        }
        guard
            let bytes = try call({ () throws(SecretServiceError) in
                try secretService.secrets(at: [first])
            })[first]
        else { return nil }
        if bytes.isEmpty { try startOverAfterLoss(at: first) }
        let record = try DeviceRecord.decode(bytes)
        noteDeviceID(record.deviceID)
        notePath(first)
        return (first, record)
    }

    /// The path the record was last found at, when one is noted in a directory of the user's
    /// own (and reads as an object path).
    package var notedPath: ItemPath? {
        guard (try? DeviceError.checkOwnedByUser([directory, pathFile])) != nil,
            let data = try? Files.read(pathFile, limit: 512),
            let text = String(data: data, encoding: .utf8), text.hasPrefix("/"),
            text.unicodeScalars.allSatisfy({
                $0.isASCII
                    && ($0 == "/" || $0 == "_" || $0.properties.isAlphabetic
                        || ("0"..."9").contains($0))
            })
        else { return nil }
        return ItemPath(text)
    }

    /// The record in `bytes`, the secret read at `notedPath`: nil when there was none there, it
    /// is not a device record (the item went, or a provider gave its path to another item) or
    /// not the record of the device noted here (another record the path came to name, on another
    /// collection or a duplicate): the caller then finds the record by its search (`load`), which
    /// also deals with a lost one and with duplicates.
    package func recordAt(noted bytes: Data?) -> DeviceRecord? {
        guard let bytes, !bytes.isEmpty, let record = try? DeviceRecord.decode(bytes),
            (try? Files.read(idFile, limit: 64)) == Data(record.deviceID.utf8)
        else { return nil }
        return record
    }

    /// Notes `path` as the record's (`note`).
    private func notePath(_ path: ItemPath) { note(path.rawValue, in: pathFile) }

    /// The record's item came back empty: makes the record anew in it, drops the lost device's
    /// runtime keys, and throws what happened and what to do.
    private func startOverAfterLoss(at path: ItemPath) throws(DeviceError) -> Never {
        forgetNotedDevice()
        let fresh = DeviceRecord.fresh()
        try store(fresh, replacing: path)
        noteDeviceID(fresh.deviceID)
        throw DeviceError(
            .corrupt,
            "the Secret Service lost the device state (it kept the item but not its contents: the provider stopped before it saved). The device starts anew without a lock screen: set it again (lockscreen set); items written before cannot be opened any more (delete and add them again); this call was not made: make it again"
        )
    }

    /// Drops the runtime keys of the device noted in the device directory.
    private func forgetNotedDevice() {
        if let noted = notedDeviceID { RuntimeKeys(deviceID: noted).forgetAll() }
    }

    /// The device ID noted in the device directory (written at every read of the record): what
    /// forgetting the runtime keys needs without asking the Secret Service.
    package var notedDeviceID: String? {
        guard let data = try? Files.read(idFile, limit: 64), data.count == 32,
            let noted = String(data: data, encoding: .utf8), noted.allSatisfy(\.isHexDigit)
        else { return nil }
        return noted
    }

    /// Notes `id` as the record's device (`note`): a lost state's clean-up reads it, and a cold
    /// read checks the record at the noted path against it.
    private func noteDeviceID(_ id: String) { note(id, in: idFile) }

    /// Writes `text` to `file` in the device directory when it does not hold it yet. Best
    /// effort: both notes are hints that a search can do without.
    private func note(_ text: String, in file: URL) {
        guard (try? Files.checkOwnedByUser(directory)) != nil,
            (try? Files.read(file, limit: 512)) != Data(text.utf8)
        else { return }
        try? Files.ensureDirectory(directory)
        try? Files.writeAtomically(Data(text.utf8), to: file)
    }

    /// Writes `record` (in place when `path` is given).
    @discardableResult
    package func store(_ record: DeviceRecord, replacing path: ItemPath?) throws(DeviceError)
        -> ItemPath
    {
        let bytes = record.encoded()
        return try call { () throws(SecretServiceError) in
            if let path {
                // In place (Item.SetSecret): no provider asks the user for that.
                try secretService.replaceItem(at: path, secret: bytes)
                return path
            }
            return try secretService.createItem(
                label: "Keepsake device state", attributes: Self.attributes, secret: bytes,
                in: Self.collection)
        }
    }

    /// One Secret Service call, its failure in the device's terms.
    package func call<R>(_ body: () throws(SecretServiceError) -> R) throws(DeviceError) -> R {
        do { return try body() } catch {
            if error.code == .locked || error.code == .promptRequired {
                throw DeviceError(.interactionNotAllowed, "\(error)", underlying: error)
            }
            throw DeviceError(.notAvailable, "\(error)", underlying: error)
        }
    }
}
