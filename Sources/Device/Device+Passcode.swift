import Escrow
import Foundation
import Platform
import Sealing
import SecretService
import TPM

/// Proving the passcode and sealing the class keys under it (inside the guess lock): the key
/// encryption key from the passcode and the device secret, with the guess counter service's
/// secret (or an earlier version's direct TPM slot's) when the device has one.
extension Device {
    struct Proof {
        var path: ItemPath
        /// The record with its failures cleared (as stored).
        var record: DeviceRecord
        var kek: SecureBytes
        /// On the counted path, the secret the counter released (what removing its slot takes).
        var counterSecret: SecureBytes?
    }

    /// Checks `passcode`, counted first: the failure is stored before the slow derivation and
    /// cleared only after the passcode proved right. Call inside `guessLimit.exclusively`.
    func prove(
        _ passcode: SecureBytes, loaded: (path: ItemPath, record: DeviceRecord)? = nil
    ) throws(DeviceError) -> Proof {
        try LockScreenKind.checkGuess(passcode)
        var (path, record) = if let loaded { loaded } else { try records.load() }
        let limit = guessLimit
        try limit.admit(record)
        limit.countAttempt(&record)
        path = try records.store(record, replacing: path)
        let slotBefore = record.tpm
        let (kek, counterSecret) = try keyEncryptionKey(passcode, &record)
        record.failures = 0
        record.notBefore = 0
        path = try records.store(record, replacing: path)
        // A right passcode rebased the TPM slot: the old one goes once the new one is stored.
        if let slotBefore, slotBefore != record.tpm { destroySlot(slotBefore) }
        return Proof(path: path, record: record, kek: kek, counterSecret: counterSecret)
    }

    /// The key-encryption key for `passcode` (and on the counted path the secret the counter
    /// released), or `.authFailed` when it is wrong. On the TPM path a right passcode rebases the
    /// record's slot (its count starts again).
    func keyEncryptionKey(_ passcode: SecureBytes, _ record: inout DeviceRecord)
        throws(DeviceError) -> (kek: SecureBytes, counterSecret: SecureBytes?)
    {
        let deviceSecret = SecureBytes(copying: record.deviceSecret)
        if let slot = record.counterSlot {
            guard let counter else {
                throw DeviceError(
                    .notAvailable,
                    "this device's passcode is held by a guess counter service, and none is configured (--counter URL)"
                )
            }
            do throws(DeviceError) {
                let (passcodeKey, secret) = try claim(slot, passcode: passcode, at: counter)
                return (
                    PasscodeKeys.tpmKEK(
                        passcodeKey: passcodeKey, tpmSecret: secret, deviceSecret: deviceSecret),
                    secret
                )
            } catch {
                if (error.underlying as? EscrowError)?.code == .destroyed {
                    throw DeviceError(
                        .disabled,
                        "\(GuessLimit.hardLimit) wrong passcodes in a row: the guess counter destroyed this device's slot; the device is disabled (erase it: `Device.wipe`, `keepsake device wipe`)",
                        underlying: error.underlying)
                }
                if error.code == .authFailed {
                    throw DeviceError(.authFailed, "wrong passcode", underlying: error.underlying)
                }
                if (error.underlying as? EscrowError)?.code == .notFound {
                    throw DeviceError(
                        .notAvailable,
                        "the guess counter at \(counter.url.absoluteString) holds no slot for this device (another counter, or its state was lost): the passcode cannot be checked",
                        underlying: error.underlying)
                }
                throw error
            }
        }
        guard let salt = record.salt, let cost = record.cost else {
            throw DeviceError(.corrupt, "no passcode parameters")
        }
        let passcodeKey = try PasscodeKeys.passcodeKey(passcode, salt: salt, cost: cost)
        if let slot = record.tpm {
            guard let tpm else {
                throw DeviceError(
                    .notAvailable, "this device's passcode is held by a TPM, and none is reachable")
            }
            let auth = PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey)
            let tpmSecret: SecureBytes
            do throws(TPMError) {
                let result = try TPMPasscodeSlot.attempt(
                    try tpm.context(), slot: slot, authorization: auth)
                tpmSecret = result.secret
                record.tpm = result.rebased
            } catch  where error.code == .authFailed {
                throw DeviceError(.authFailed, "wrong passcode", underlying: error)
            } catch  where error.code == .limitReached {
                throw DeviceError(
                    .disabled,
                    "\(GuessLimit.hardLimit) wrong passcodes in a row: the device is disabled (erase it: `Device.wipe`, `keepsake device wipe`)",
                    underlying: error)
            } catch {
                throw DeviceError(.notAvailable, "the TPM: \(error)", underlying: error)
            }
            return (
                PasscodeKeys.tpmKEK(
                    passcodeKey: passcodeKey, tpmSecret: tpmSecret, deviceSecret: deviceSecret),
                nil
            )
        }
        let expected =
            record.version < 2
            ? PasscodeKeys.legacyVerifier(passcodeKey: passcodeKey)
            : PasscodeKeys.verifier(passcodeKey: passcodeKey, deviceSecret: deviceSecret)
        guard let verifier = record.verifier, constantTimeEquals(expected, verifier) else {
            throw DeviceError(.authFailed, "wrong passcode")
        }
        return (PasscodeKeys.softwareKEK(passcodeKey: passcodeKey, deviceSecret: deviceSecret), nil)
    }

    /// Wraps `keys` for `passcode` (nil: no knowledge factor) at this device's cost: a new salt,
    /// and on a counted or TPM device a new slot (the old one stays until the record is stored).
    /// Returns the new counter slot's secret (what removing it takes), on the counted path.
    @discardableResult
    func seal(
        _ keys: [ProtectionClass: SecureBytes], presence: SecureBytes? = nil,
        passcode: SecureBytes?, into record: inout DeviceRecord, directSlot: Bool = true
    ) throws(DeviceError) -> SecureBytes? {
        let deviceSecret = SecureBytes(copying: record.deviceSecret)
        let kek: SecureBytes
        var counterSecret: SecureBytes?
        record.counterSlot = nil
        if let passcode {
            let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
            let passcodeKey = try PasscodeKeys.passcodeKey(passcode, salt: salt, cost: passcodeCost)
            record.salt = salt
            record.cost = passcodeCost
            if let counter {
                let secret = SecureBytes(randomCount: 32)
                let cost = passcodeCost
                record.counterSlot = try escrowCall { () throws(EscrowError) in
                    try counter.client().register(
                        secret, passcodeKey: passcodeKey, salt: salt, cost: cost,
                        limit: Int(GuessLimit.hardLimit))
                }
                counterSecret = secret
                record.tpm = nil
                record.verifier = nil
                kek = PasscodeKeys.tpmKEK(
                    passcodeKey: passcodeKey, tpmSecret: secret, deviceSecret: deviceSecret)
            } else if directSlot, let tpm, tpm.newSlots == .made {
                let tpmSecret = SecureBytes(randomCount: 32)
                let slot = try tpmCall { () throws(TPMError) in
                    try TPMPasscodeSlot.create(
                        try tpm.context(), counter: record.tpm?.counterIndex,
                        authorization: PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey),
                        secret: tpmSecret, limit: GuessLimit.hardLimit)
                }
                record.tpm = slot
                record.verifier = nil
                kek = PasscodeKeys.tpmKEK(
                    passcodeKey: passcodeKey, tpmSecret: tpmSecret, deviceSecret: deviceSecret)
            } else {
                record.tpm = nil
                record.verifier = PasscodeKeys.verifier(
                    passcodeKey: passcodeKey, deviceSecret: deviceSecret)
                kek = PasscodeKeys.softwareKEK(passcodeKey: passcodeKey, deviceSecret: deviceSecret)
            }
        } else {
            record.salt = nil
            record.cost = nil
            record.verifier = nil
            record.tpm = nil
            kek = PasscodeKeys.deviceKEK(deviceSecret)
        }
        record.wrappedKeys = PasscodeKeys.wrap(keys, kek: kek)
        record.keyChecks = PasscodeKeys.checks(keys, deviceSecret: deviceSecret)
        record.presencePublicKey = nil
        if let presence, passcode != nil { record.setPresence(presence, kek: kek) }
        record.version = 2
        record.failures = 0
        record.notBefore = 0
        record.generation = (record.generation ?? 0) + 1
        return counterSecret
    }

    /// Refuses a new passcode on a device that names a TPM of its own and no guess counter
    /// service: it asked for a TPM's count, which a TPM that the user's processes reach does not
    /// give (see `TPMConfiguration`), and must not get the software path unawares. A device whose
    /// slot is already on the TPM moves to the software path at its next passcode change.
    func refuseDirectTPM(_ record: DeviceRecord) throws(DeviceError) {
        guard counter == nil, let tpm, tpm.newSlots == .refused, record.tpm == nil else { return }
        throw DeviceError(
            .notAvailable,
            "the TPM: a TPM that this user's processes reach cannot count their passcode guesses (any of them could disable the device or guess around the count); run `keepsake-escrow --tpm \(tpm.tcti)` as a user of its own and name it with `--counter URL` (`Device(counter:)`), or leave out `--tpm` for the software path (docs/running.md)"
        )
    }

    /// Whether the TPM holding this device's direct slot says its lockout authorization is empty
    /// (false when it cannot be asked: the slot then stays where it is).
    func tpmLockoutIsOpen() -> Bool {
        guard let tpm, let context = try? tpm.context() else { return false }
        return (try? context.lockoutAuthorizationIsSet()) == false
    }

    /// Removes a counter slot this device no longer names (best effort: one left behind holds a
    /// secret nothing uses, still counted).
    func removeCounterSlot(_ slot: Data?, secret: SecureBytes?) {
        guard let slot, let secret, let counter else { return }
        try? counter.client().remove(slot, secret: secret)
    }

    func destroySlot(_ slot: TPMSlot) {
        guard let tpm, let context = try? tpm.context() else { return }
        TPMPasscodeSlot.destroy(context, slot: slot)
    }

    func tpmCall<R>(_ body: () throws(TPMError) -> R) throws(DeviceError) -> R {
        do { return try body() } catch {
            throw DeviceError(.notAvailable, "the TPM: \(error)", underlying: error)
        }
    }
}

extension Argon2Cost {
    /// Cheaper than `floor` in time or memory.
    func isBelow(_ floor: Argon2Cost) -> Bool {
        operations < floor.operations || memoryBytes < floor.memoryBytes
    }
}
