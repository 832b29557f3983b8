import Foundation
import Platform
import Sealing
import SecretService

/// The lock screen, the lock states and the class keys.
///
/// Key hierarchy: one random 32-byte key per protection class, sealed in the device record under a
/// key-encryption key (`PasscodeKeys`): with a knowledge factor it needs the passcode and the
/// device secret (software path) or the passcode, the device secret and a secret that the guess
/// counter service (counted path) or a direct TPM slot (TPM path) releases only to the right
/// passcode, under its count; without one, the device secret alone. Unwrapped class keys live only
/// in runtime state (`RuntimeKeys`, the kernel keyring), so a reboot forgets them; `WhenUnlocked…`
/// keys are dropped at lock. Changing the passcode rewraps the class keys; no item is re-encrypted.
extension Device {
    package var guessLimit: GuessLimit {
        GuessLimit(tuning: tuning, tpm: tpm, counter: counter)
    }

    /// The kind of lock screen set on the device, as its record says.
    public func lockScreenKind() throws(DeviceError) -> LockScreenKind {
        try records.load().record.kind
    }

    /// The lock state. Without a knowledge factor the device is always unlocked.
    public func state() throws(DeviceError) -> LockState {
        try state(of: try lockScreenKind())
    }

    private func state(of kind: LockScreenKind) throws(DeviceError) -> LockState {
        guard kind.hasKnowledgeFactor else { return .unlocked }
        let keys = try runtime().keys([.whenUnlocked, .afterFirstUnlock])
        if keys[.whenUnlocked] != nil { return .unlocked }
        if keys[.afterFirstUnlock] != nil { return .locked }
        return .beforeFirstUnlock
    }

    /// What `keepsake lockscreen status` shows.
    public struct LockScreenStatus: Sendable, Hashable {
        /// The kind of lock screen set.
        public var kind: LockScreenKind
        /// The current lock state (always `unlocked` without a knowledge factor).
        public var state: LockState
        /// Whether the lock screen has a knowledge factor, which end-to-end encryption needs.
        public var isEndToEndEncryptionCapable: Bool
        /// `service` when a guess counter service counts the guesses (hard limit, `countedIn`
        /// says where it keeps the count), `tpm` when the TPM does, else `software`.
        public var guessLimit: String
        /// Where the count is kept: the guess counter service's as it says (`software TPM (…)`,
        /// `hardware TPM (…)`, `file`: its own state directory); on the TPM path the TPM, as it
        /// says; nil on the software path.
        public var countedIn: String?
        /// Wrong passcodes in a row since the last right one.
        public var failedAttempts: Int
    }

    /// The lock screen's kind, lock state, how guesses are limited and how many wrong passcodes
    /// came in a row, read from the device record and the guess limit.
    public func status() throws(DeviceError) -> LockScreenStatus {
        let record = try records.load().record
        let count = try guessLimit.count(
            of: record.passcode, recorded: record.failures,
            deviceSecret: SecureBytes(copying: record.deviceSecret))
        return LockScreenStatus(
            kind: record.kind, state: try state(of: record.kind),
            isEndToEndEncryptionCapable: record.kind.hasKnowledgeFactor,
            guessLimit: record.passcode.guessLimit, countedIn: count.countedIn,
            failedAttempts: count.failures)
    }

    /// What changing the lock screen did.
    public struct LockScreenChange: Sendable {
        /// The knowledge factor was removed: `WhenPasscodeSetThisDeviceOnly` key is destroyed, so
        /// the caller deletes those items.
        public var knowledgeFactorRemoved: Bool
        /// Wrong passcodes since the owner was last told, reported by the proof of the current
        /// passcode: tell the owner (`notice`).
        public var wrongPasscodes: WrongPasscodes?
        /// The signed-in account's state as the change stored it.
        package var account: HeldAccountState
    }

    /// Sets, changes or removes the lock screen. With a knowledge factor set, `currentPasscode`
    /// must prove it (wrong → errSecAuthFailed, counted and rate-limited). Afterwards the device
    /// is unlocked.
    ///
    /// Atomic: it fails with nothing changed, or succeeds whole. The class keys do not change, so
    /// they are put in runtime state before the one record write that makes the change; a
    /// counter slot of the new passcode is made before that write and the old slot (a counter's,
    /// or a direct TPM slot) removed after it.
    @discardableResult
    public func setLockScreen(
        _ kind: LockScreenKind, passcode: SecureBytes?, currentPasscode: SecureBytes?
    ) throws(DeviceError) -> LockScreenChange {
        var newPasscode: SecureBytes?
        if kind.hasKnowledgeFactor {
            guard let passcode else {
                throw DeviceError(.invalidPasscode, "a \(kind.rawValue) needs a passcode")
            }
            newPasscode = try kind.validate(passcode)
        }
        var wrongPasscodes: WrongPasscodes?
        let changed = try records.exclusively {
            (held) throws(DeviceError) -> (record: DeviceRecord, hadKnowledgeFactor: Bool) in
            var (path, record) = try records.load()
            if newPasscode != nil { try guessLimit.refuseDirectTPM(record.passcode) }
            let hadKnowledgeFactor = record.kind.hasKnowledgeFactor
            var keys: [ProtectionClass: SecureBytes]
            // Kept through a passcode change, like the class keys; gone with the passcode.
            var presence: SecureBytes?
            var proofCounterSecret: SecureBytes?
            var claim: CounterClaim?
            if hadKnowledgeFactor {
                guard let currentPasscode else {
                    throw DeviceError(.authFailed, "the current passcode is required")
                }
                let proof = try prove(currentPasscode, loaded: (path, record), held)
                wrongPasscodes = proof.wrongPasscodes
                claim = proof.claim
                (path, record) = (proof.path, proof.record)
                proofCounterSecret = proof.counterSecret
                keys = try PasscodeKeys.unwrap(record.wrappedKeys, kek: proof.kek)
                presence = try PasscodeKeys.unwrapPresence(record.wrappedKeys, kek: proof.kek)
            } else {
                keys = try PasscodeKeys.unwrap(
                    record.wrappedKeys,
                    kek: PasscodeKeys.deviceKEK(SecureBytes(copying: record.deviceSecret)))
            }
            if newPasscode != nil {
                if presence == nil { presence = SecureBytes(randomCount: 32) }
                if keys[.whenPasscodeSetThisDeviceOnly] == nil {
                    keys[.whenPasscodeSetThisDeviceOnly] = SecureBytes(
                        randomCount: Envelope.keyLength)
                }
            } else {
                keys[.whenPasscodeSetThisDeviceOnly] = nil
            }
            var updated = record
            updated.kind = kind
            if hadKnowledgeFactor && newPasscode != nil {
                updated.passcodeChanges = (record.passcodeChanges ?? 0) + 1
            }
            let newCounterSecret = try seal(
                keys, presence: newPasscode == nil ? nil : presence, passcode: newPasscode,
                into: &updated, succeeding: claim)
            // Without a knowledge factor there is no end-to-end encryption: the signed-in
            // account's state (its key sealed under a class key, …) goes with the passcode.
            if newPasscode == nil { updated.accountRecord = nil }
            let runtime = try runtime(updated)
            try runtime.store(keys)
            path = try store(
                updated, replacing: (path, record),
                slotSecrets: (new: newCounterSecret, old: proofCounterSecret),
                acknowledging: claim, held)
            if newPasscode == nil { runtime.forget([.whenPasscodeSetThisDeviceOnly]) }
            return (updated, hadKnowledgeFactor)
        }
        return LockScreenChange(
            knowledgeFactorRemoved: changed.hadKnowledgeFactor && newPasscode == nil,
            wrongPasscodes: wrongPasscodes, account: HeldAccountState(changed.record))
    }

    /// Unlocks with the passcode: every class key becomes available. Without a knowledge factor
    /// there is nothing to unlock. A stored Argon2id cost below this device's floor (or a version
    /// 1 record) is raised here, the one time the passcode is at hand. Returns the wrong
    /// passcodes to tell the owner of (`unlockReporting`).
    @discardableResult
    public func unlock(passcode: SecureBytes) throws(DeviceError) -> WrongPasscodes? {
        try unlockReporting(passcode: passcode).wrongPasscodes
    }

    /// What an unlock did and has to tell the owner.
    public struct UnlockReport: Sendable {
        /// Wrong passcodes since the last unlock (on a counted device, every claim the guess
        /// counter counted, through Keepsake or around it): tell the owner (`notice`).
        public var wrongPasscodes: WrongPasscodes?
        /// The signed-in account's state as the unlock left it; nil when there was nothing to
        /// unlock (no knowledge factor).
        package var account: HeldAccountState?
    }

    /// `unlock`, with what the owner is to be told: how many wrong passcodes came since the last
    /// unlock, and when the last was.
    public func unlockReporting(passcode: SecureBytes) throws(DeviceError) -> UnlockReport {
        var wrongPasscodes: WrongPasscodes?
        // The record is read once, under the guess lock, for the lock screen's kind and the proof.
        let unlocked = try records.exclusively { (held) throws(DeviceError) -> DeviceRecord? in
            let loaded = try records.load()
            guard loaded.record.kind.hasKnowledgeFactor else { return nil }
            // Checked once, there: a passcode of no guess's shape is refused, not counted.
            let proof = try prove(passcode, loaded: loaded, held)
            wrongPasscodes = proof.wrongPasscodes
            var (path, record) = (proof.path, proof.record)
            let keys = try PasscodeKeys.unwrap(record.wrappedKeys, kek: proof.kek)
            try runtime(record).store(keys)
            let presence = try PasscodeKeys.unwrapPresence(record.wrappedKeys, kek: proof.kek)
            let checks = PasscodeKeys.checks(
                keys, deviceSecret: SecureBytes(copying: record.deviceSecret))
            if record.keyChecks != checks {
                // A record without the runtime keys' checks (or whose keys changed): the checks
                // are written now.
                record.keyChecks = checks
                path = try records.store(record, replacing: path, held)
            }
            // A direct TPM slot (records may hold one) moves off the TPM while the passcode is at
            // hand (`GuessLimit.movesOffTPM`). Otherwise it stays as it is, its Argon2id cost
            // too: raising the cost would take a new direct slot, or a move nobody asked for.
            let movesOffTPM = guessLimit.movesOffTPM(record.passcode)
            let raisesCost =
                record.passcode.version < 2
                || (record.passcode.cost.map { $0.isBelow(passcodeCost) } ?? true)
            // An unpinned counter slot (no `counterPin`) is registered again, pinned.
            let pins = guessLimit.needsPin(record.passcode)
            if movesOffTPM || pins || (record.passcode.tpm == nil && raisesCost) {
                var upgraded = record
                let newCounterSecret = try seal(
                    keys, presence: presence ?? SecureBytes(randomCount: 32), passcode: passcode,
                    into: &upgraded, directSlot: !movesOffTPM, succeeding: proof.claim)
                path = try store(
                    upgraded, replacing: (path, record),
                    slotSecrets: (new: newCounterSecret, old: proof.counterSecret),
                    acknowledging: proof.claim, held)
                record = upgraded
                return record
            } else if presence == nil {
                // A passcode record without a presence key: the key is made at this unlock.
                record.setPresence(SecureBytes(randomCount: 32), kek: proof.kek)
                path = try records.store(record, replacing: path, held)
            }
            // The unlock went through whole: its report goes back to the caller now.
            guessLimit.acknowledge(proof.claim)
            return record
        }
        return UnlockReport(
            wrongPasscodes: wrongPasscodes, account: unlocked.map(HeldAccountState.init))
    }

    /// The public key that items needing the passcode at each use (`.devicePasscode`,
    /// `.userPresence`) are sealed to: adding one needs no passcode.
    ///
    /// - Throws: `.authFailed` on a device without a passcode; `.interactionNotAllowed` when the
    ///   record holds a passcode but no presence key yet (the next unlock makes one).
    package func presencePublicKey() throws(DeviceError) -> Data {
        let record = try records.load().record
        guard record.kind.hasKnowledgeFactor else {
            throw DeviceError(.authFailed, "no passcode is set on this device")
        }
        guard let key = record.presencePublicKey else {
            throw DeviceError(.interactionNotAllowed, "unlock the device once first")
        }
        return key
    }

    /// The presence secret key, for one use of an item that needs the passcode at each use: the
    /// passcode is proved as an unlock proves it — counted by the same guess limit, by the guess
    /// counter service or the TPM where the device has one — and reports as an unlock does. The
    /// key is never kept in runtime state, so an unlocked device alone does not open such items.
    ///
    /// - Throws: `.authFailed` for a wrong passcode or a device without one; the guess limit's
    ///   errors as for `unlock`.
    package func presenceSecretKey(passcode: SecureBytes) throws(DeviceError) -> (
        key: SecureBytes, wrongPasscodes: WrongPasscodes?
    ) {
        guard try lockScreenKind().hasKnowledgeFactor else {
            throw DeviceError(.authFailed, "no passcode is set on this device")
        }
        return try records.exclusively { (held) throws(DeviceError) in
            let proof = try prove(passcode, held)
            guard
                let seed = try PasscodeKeys.unwrapPresence(proof.record.wrappedKeys, kek: proof.kek)
            else { throw DeviceError(.interactionNotAllowed, "unlock the device once first") }
            guessLimit.acknowledge(proof.claim)
            return (SealedBox.keyPair(seed: seed).secretKey, proof.wrongPasscodes)
        }
    }

    /// Locks: the `WhenUnlocked…` class keys are dropped from runtime state. Never waits on the
    /// Secret Service (the keys are found by the device ID noted in the device directory): a
    /// lock with the provider down or restarting still locks. Without a knowledge factor the
    /// dropped keys are made again from the record at their next use.
    public func lock() throws(DeviceError) {
        try forgettableRuntime().forget(ProtectionClass.allCases.filter(\.isDroppedAtLock))
    }

    /// A reboot: all runtime state is forgotten; the device is `beforeFirstUnlock` again. Never
    /// waits on the Secret Service, as `lock`.
    public func reboot() throws(DeviceError) {
        try forgettableRuntime().forgetAll()
    }

    /// The runtime keys to forget: this process's, else the device noted in the device
    /// directory, else (a device never read by this version) through the record.
    private func forgettableRuntime() throws(DeviceError) -> RuntimeKeys {
        if let known = runtimeCache.withLock({ $0 }) { return known }
        if let noted = records.notedDeviceID { return RuntimeKeys(deviceID: noted) }
        return try runtime()
    }
}

extension Device {
    /// Erases the device, as a phone's "erase all content and settings": the TPM slot, the runtime
    /// keys, every item of the default collection in Keepsake's namespace of schemas
    /// (`schemaNamespace`: the device record with the class keys, every item of every store) and
    /// the device directory's contents. The next use starts a fresh device with no lock screen.
    /// The one way back from a device disabled by too many wrong passcodes; synchronizable data
    /// comes back from the cloud account by joining it again.
    ///
    /// - Throws: `.interactionNotAllowed`, erasing nothing, when the collection is locked (its
    ///   items cannot be deleted); `.notAvailable` when the Secret Service fails underneath (a
    ///   wipe can be repeated: it goes on from what is left).
    public func wipe() throws(DeviceError) {
        try records.exclusively { _ throws(DeviceError) in
            let locked = try records.call { () throws(SecretServiceError) in
                try secretService.isLocked()
            }
            if locked {
                throw DeviceError(.interactionNotAllowed, SecretServiceError.lockedCollection)
            }
            if let record = try? records.load().record {
                guessLimit.remove(record.passcode, keeping: .empty, secret: nil)
                RuntimeKeys(deviceID: record.deviceID).forgetAll()
            }
            try records.call { () throws(SecretServiceError) in try eraseNamespace() }
            for name in Files.list(directory) where name != "lockscreen.lock" {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            }
        }
    }

    /// Deletes every item of the default collection whose schema is in Keepsake's namespace,
    /// whichever module made it. An item gone meanwhile is passed over. An item whose attributes
    /// the provider will not tell (another program's, in a state this provider refuses to read)
    /// cannot be told to be Keepsake's and stays; a provider that does not answer at all fails the
    /// wipe.
    private func eraseNamespace() throws(SecretServiceError) {
        for path in try secretService.items() {
            let schema: String
            do { schema = try secretService.schema(of: path) } catch {
                if error.isProviderDown { throw error }
                continue
            }
            guard schema.hasPrefix(Self.schemaNamespace) else { continue }
            do { try secretService.deleteItem(at: path) } catch  where error.code == .noSuchObject {
                continue
            }
        }
    }

    /// Keepsake's namespace of Secret Service schemas: the `xdg:schema` of every item Keepsake
    /// makes, whichever module makes it, begins with it (`org.keepsake.Device`, the stores'
    /// own), and no other program may name a schema under it. A published rule, as stable as a
    /// file format (docs/keychain.md): `wipe` erases every item under it without knowing the
    /// stores that made them.
    package static let schemaNamespace = "org.keepsake."
}
