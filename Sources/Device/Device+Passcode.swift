import Foundation
import Sealing
import SecretService

/// Proving the passcode and sealing the class keys under it (inside the guess lock): the key
/// encryption key from the passcode and the device secret, with the guess counter service's
/// secret (or a direct TPM slot's) when the device has one.
extension Device {
    struct Proof {
        var path: ItemPath
        /// The record with its failures cleared (as stored).
        var record: DeviceRecord
        var kek: SecureBytes
        /// On the counted path, the secret the counter released (what removing its slot takes).
        var counterSecret: SecureBytes?
        /// Wrong passcodes since the last right one, to tell the owner.
        var wrongPasscodes: WrongPasscodes?
        /// On the counted path, the right claim: acknowledged once the route succeeded
        /// (`acknowledge`), named by a slot the route registers (`succession`).
        var claim: CounterClaim?
    }

    /// Checks `passcode`, counted first (`GuessLimit.prove`): the failure is stored before the
    /// slow derivation and cleared only after the passcode proved right, holding the device's
    /// lock (`held`); `loaded` is the record as read under it.
    func prove(
        _ passcode: SecureBytes, loaded: (path: ItemPath, record: DeviceRecord)? = nil,
        _ held: DeviceRecordStore.DeviceLock
    ) throws(DeviceError) -> Proof {
        // Before anything is read: a guess of no passcode's shape touches nothing (`prove`
        // refuses it again, as the one way in).
        try LockScreenKind.checkGuess(passcode)
        var (path, record) = if let loaded { loaded } else { try records.load() }
        let (kek, counterSecret, wrong, claim) = try guessLimit.prove(passcode, &record) {
            (counted) throws(DeviceError) in
            path = try records.store(counted, replacing: path, held)
        }
        return Proof(
            path: path, record: record, kek: kek, counterSecret: counterSecret,
            wrongPasscodes: wrong, claim: claim)
    }

    /// Stores `updated`, sealed by `seal` with a passcode slot of its own, in place of `stored`:
    /// when the write fails the new slot is removed, once it succeeded the old one (the counter
    /// secrets are what removing a counter slot takes). Returns the record's path.
    func store(
        _ updated: DeviceRecord, replacing stored: (path: ItemPath, record: DeviceRecord),
        slotSecrets: (new: SecureBytes?, old: SecureBytes?),
        acknowledging claim: CounterClaim? = nil, _ held: DeviceRecordStore.DeviceLock
    ) throws(DeviceError) -> ItemPath {
        let path: ItemPath
        do throws(DeviceError) {
            path = try records.store(updated, replacing: stored.path, held)
        } catch {
            guessLimit.remove(
                updated.passcode, keeping: stored.record.passcode, secret: slotSecrets.new)
            throw error
        }
        // The route's last step that can fail is done: its report is acknowledged while the
        // slot it was made on is still there.
        guessLimit.acknowledge(claim)
        guessLimit.remove(
            stored.record.passcode, keeping: updated.passcode, secret: slotSecrets.old)
        return path
    }

    /// Wraps `keys` for `passcode` (nil: no knowledge factor) at this device's cost: a new salt,
    /// and on a counted or TPM device a new slot (the old one stays until the record is stored).
    /// Returns the new counter slot's secret (what removing it takes), on the counted path.
    @discardableResult
    func seal(
        _ keys: [ProtectionClass: SecureBytes], presence: SecureBytes? = nil,
        passcode: SecureBytes?, into record: inout DeviceRecord, directSlot: Bool = true,
        succeeding: CounterClaim? = nil
    ) throws(DeviceError) -> SecureBytes? {
        let deviceSecret = SecureBytes(copying: record.deviceSecret)
        let (kek, counterSecret) = try guessLimit.makeSlot(
            for: passcode, replacing: &record.passcode, deviceSecret: deviceSecret,
            directSlot: directSlot, succeeding: succeeding?.succession)
        record.wrappedKeys = PasscodeKeys.wrap(keys, kek: kek)
        record.keyChecks = PasscodeKeys.checks(keys, deviceSecret: deviceSecret)
        record.presencePublicKey = nil
        if let presence, passcode != nil { record.setPresence(presence, kek: kek) }
        record.failures = 0
        record.notBefore = 0
        record.generation = (record.generation ?? 0) + 1
        return counterSecret
    }
}

extension Argon2Cost {
    /// Cheaper than `floor` in time or memory.
    func isBelow(_ floor: Argon2Cost) -> Bool {
        operations < floor.operations || memoryBytes < floor.memoryBytes
    }
}
