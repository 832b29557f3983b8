import Device
import Foundation
import Sealing
import TPM

/// Rotating the cloud account's key, and the account's devices.
///
/// A new account key replaces the old one when the passcode changes, a device is removed, or
/// the recovery key is replaced: every store object is re-sealed under it (same names), the
/// manifest lists the remaining devices, each of which finds the new key sealed to its own
/// X25519 key (`rekey-<id>-<epoch>`, inside an envelope under the key it held); the recovery
/// record is re-sealed to the recovery public key (or a new one); the escrow gets the new key
/// under the new passcode, or is emptied until the next unlock when no passcode is at hand.
/// Old wrapped copies of the account key (an old recovery record, an old escrow slot, a removed
/// device's key) open nothing written after.
extension CloudAccount {

    /// The account's devices (this one included once it has synced or joined).
    public func accountDevices() throws(DeviceError) -> [AccountDevice] {
        guard let session = try cloudSession(forUpload: false) else {
            throw DeviceError(.notAvailable, "this device is not in a cloud account")
        }
        let me = try device.deviceID()
        return session.manifest.devices.keys.sorted().map {
            AccountDevice(id: $0, isThisDevice: $0 == me)
        }
    }

    /// Removes a device from the account: it is dropped from the manifest and the account key
    /// is rotated, so nothing written after opens with the key it holds. Needs this device
    /// unlocked and holding the account key.
    ///
    /// - Throws: `.invalidPasscode` for an id the account does not list, or this device's own.
    public func removeDevice(_ id: String) throws(DeviceError) {
        let devices = try accountDevices()
        if devices.contains(where: { $0.id == id && $0.isThisDevice }) {
            throw DeviceError(
                .invalidPasscode,
                "\(id) is this device: another device of the account removes it (or erase this one: `device wipe`)"
            )
        }
        guard devices.contains(where: { $0.id == id }) else {
            throw DeviceError(
                .invalidPasscode, "the account lists no other device \(id) (see `device devices`)")
        }
        _ = try rotation.rotateAccountKey(removing: id, replacingRecoveryKey: false)
    }
}

/// The rotation of the account key (above): one account's, on this device.
struct AccountRotation {
    /// The account whose key rotates.
    let account: CloudAccount

    /// The device that rotates it.
    var device: Device { account.device }
    /// The account's storage; nil when signed out.
    var cloud: (any CloudStorage)? { account.cloud }
    /// The account's escrow service, when it uses one.
    var escrow: EscrowConfiguration? { account.escrow }
}

extension CloudAccount {
    /// The rotation of this account's key.
    var rotation: AccountRotation { AccountRotation(account: self) }
}

extension AccountRotation {
    /// Rotates the account key from a device that is unlocked and holds it; the escrow is
    /// emptied until the next unlock (no passcode at hand). Returns the new recovery key when
    /// `replacingRecoveryKey`.
    func rotateAccountKey(removing: String?, replacingRecoveryKey: Bool) throws(DeviceError)
        -> SecureBytes?
    {
        guard try device.state() == .unlocked, let key = try self.account.keys.cloudKey() else {
            throw DeviceError(
                .interactionNotAllowed, "this needs the device unlocked and in the cloud account")
        }
        // The cloud work outside the device's lock (a slow cloud never holds up an unlock); what
        // it changed in the record is merged in under the lock afterwards.
        let read = try device.accountState()
        var record = read
        let recovery = try rotateAccountKey(
            &record, from: key, passcode: nil, removing: removing,
            replacingRecoveryKey: replacingRecoveryKey)
        try self.account.keys.storeAfterCloud(record, read: read)
        return recovery
    }

    /// The rotation itself; the caller stores `record` (`storeAfterCloud`).
    func rotateAccountKey(
        _ record: inout HeldAccountState, from oldKey: SecureBytes, passcode: SecureBytes?,
        removing: String? = nil, replacingRecoveryKey: Bool = false
    ) throws(DeviceError) -> SecureBytes? {
        let cloud = try self.account.keys.signedIn()
        let lock = try cloud.checked.lock()
        defer { withExtendedLifetime(lock) {} }
        guard let (account, accountVersion) = try self.account.keys.readAccountVersioned(),
            constantTimeEquals(account.check, AccountRecord.check(oldKey))
        else { throw DeviceError(.notAvailable, "the account key changed meanwhile: try again") }
        let seen = self.account.manifests.seen
        var (manifest, _, manifestVersion) = try self.account.manifests.read(
            key: oldKey, epoch: account.epoch ?? 0, cloud: cloud, seen: seen)
        // Every object the switch replaces is written only over the copy read here: a writer
        // whose lock expired (or that ignored it) and changed the account meanwhile stops the
        // rotation at the first of them, never written over.
        let recoveryVersion = try self.account.keys.currentVersion(
            of: AccountObjects.recovery, on: cloud)
        let conflict = "another device changed the account during the rotation: try again"
        let newKey = AccountKey.rotated(oldKey)
        let epoch = (account.epoch ?? 0) + 1

        var recoveryText: SecureBytes?
        let recoveryPublicKey: Data
        var seed = self.account.keys.witnessSeed(oldKey, record: record)
        if replacingRecoveryKey {
            let recovery = RecoveryKey.make()
            recoveryPublicKey = RecoveryKey.keyPair(recovery.key).publicKey
            recoveryText = recovery.text
            seed = AccountWitness.seed(recoveryKey: recovery.key)
        } else if let checked = account.checkedRecoveryKey(oldKey) {
            recoveryPublicKey = checked
        } else {
            // The new key would be sealed to whatever recovery key the record names: one the
            // cloud wrote would hand it the account.
            throw DeviceError(
                .corrupt,
                removing == nil
                    ? "the account record names a recovery key this account did not (or names none): nothing rotated; replace the recovery key (`keepsake device recovery-key`) to go on"
                    : "the account record names a recovery key this account did not (or names none): nothing rotated, the device not removed; replace the recovery key (`keepsake device recovery-key`), remove the device, then replace the recovery key once more (the device still listed at the first replacement gets that key)"
            )
        }

        // Every object read and checked before anything is written: a missing or changed one
        // stops the rotation with nothing changed.
        var resealed: [(name: String, bytes: Data)] = []
        let replaced = manifest.storedNames
        for name in manifest.names.sorted() {
            guard let kind = CloudObjects.kind(ofObjectNamed: name),
                let stored = manifest.storedName(of: name)
            else { continue }
            guard let found = try cloud.checked.readVersioned(stored),
                case let bytes = found.data,
                constantTimeEquals(
                    AccountManifest.mac(bytes, name: name, under: oldKey),
                    manifest.objects[Data(name.utf8)]!)
            else {
                throw DeviceError(
                    .corrupt, "\(name) is not what the account manifest lists: not rotated")
            }
            do {
                resealed.append(
                    (
                        name,
                        try CloudObjects.reseal(
                            bytes, name: name, kind: kind, from: oldKey, to: newKey)
                    ))
            } catch {
                throw DeviceError(.corrupt, "\(name) does not open: not rotated", underlying: error)
            }
        }
        // Each re-sealed copy goes under a name of its own: until the switch below, the
        // account's state is the old one, whole, whatever stops the rotation.
        manifest.layout = AccountManifest.layout
        for (name, bytes) in resealed {
            let mac = AccountManifest.mac(bytes, name: name, under: newKey)
            try cloud.checked.write(
                AccountManifest.storedName(name, mac: mac, layout: manifest.layout), bytes)
            manifest.objects[Data(name.utf8)] = mac
        }
        if let removing { manifest.devices[removing] = nil }
        manifest.devices[record.deviceID] = ManifestKeeper.boxKeyPair(record).publicKey
        // Sealed to every device of the account, this one too: a rotation cut short between the
        // switch below and this device's own record (killed, the Secret Service gone) leaves it
        // to follow its own rotation at its next sync, as any other device does — never out of
        // the account it rotated.
        for (id, publicKey) in manifest.devices {
            let sealed: Data
            do { sealed = try SealedBox.seal(newKey, to: publicKey) } catch {
                throw DeviceError(.corrupt, "device \(id)'s public key: \(error)")
            }
            let wrapped = Envelope.seal(
                sealed, key: AccountObjects.rekeyWrappingKey(oldKey),
                associatedData: AccountObjects.rekeyAssociatedData(id, epoch: epoch))
            try self.account.keys.swap(
                AccountObjects.rekey(id, epoch: epoch), wrapped, ifVersion: nil, on: cloud,
                conflict: conflict)
        }
        if let seed {
            try self.account.keys.writeWitnessSeed(seed, under: newKey, cloud: cloud)
            record.account.wrappedWitnessSeed = try self.account.keys.sealWitnessSeed(seed)
        }
        try self.account.keys.writeRecovery(
            newKey, to: recoveryPublicKey, cloud: cloud, ifVersion: recoveryVersion)
        manifest.epoch = epoch
        manifest.version += 1
        try self.account.keys.swap(
            AccountManifest.name, manifest.sealed(under: newKey), ifVersion: manifestVersion,
            on: cloud, conflict: conflict)
        // The switch: from here every device of the account looks for its new key.
        try self.account.keys.swap(
            AccountObjects.account,
            AccountRecord(accountKey: newKey, epoch: epoch, recoveryPublicKey: recoveryPublicKey)
                .encoded(), ifVersion: accountVersion, on: cloud, conflict: conflict)
        try seen.write(
            account: SeenManifest.account(newKey), epoch: epoch, version: manifest.version)
        for stored in replaced.subtracting(manifest.storedNames).sorted() {
            try? cloud.delete(stored)
        }
        self.account.keys.witness(newKey, epoch: epoch, version: manifest.version, seed: seed)
        if let removing {
            // Told to the removed device, once the switch is made, in the only words it can
            // still read: its old key's.
            try? cloud.write(
                AccountObjects.removed(removing),
                AccountObjects.removalNotice(removing, at: Date(), heldKey: oldKey))
        }
        record.holdAccountKey(
            try self.account.keys.sealCloudKey(newKey), epoch: epoch, underThisPasscode: true)
        // The escrow: the new key under the new passcode, or nothing until the next unlock.
        if let escrow {
            if let passcode {
                _ = EscrowRegistration(keys: self.account.keys).registerOrRetry(
                    newKey, passcode: passcode, escrow: escrow, cloud: cloud, previousKey: oldKey,
                    &record)
            } else {
                if let old = try? cloud.read(AccountObjects.escrow).flatMap(EscrowRecord.parse) {
                    try? escrow.client().remove(old.slot, secret: oldKey)
                }
                try? cloud.delete(AccountObjects.escrow)
                record.account.escrowGeneration = nil
            }
        }
        if let removing {
            for name in (try? cloud.list()) ?? [] where name.hasPrefix("rekey-\(removing)-") {
                try? cloud.delete(name)
            }
        }
        return recoveryText
    }

    /// The account's current key, from `held` (an older epoch's): each rotation's key sealed to
    /// this device, opened in turn. nil when one is missing or does not open (this device was
    /// removed, or the cloud is not the account's) — then the device joins again.
    func followRotations(
        from held: SecureBytes, record: HeldAccountState, to account: AccountRecord
    )
        throws(DeviceError) -> SecureBytes?
    {
        let cloud = try self.account.keys.signedIn()
        let target = account.epoch ?? 0
        let start = record.account.cloudEpoch ?? 0
        guard target > start, target - start <= 1000 else { return nil }
        let pair = ManifestKeeper.boxKeyPair(record)
        var key = held
        for epoch in (start + 1)...target {
            let name = AccountObjects.rekey(record.deviceID, epoch: epoch)
            guard let wrapped = try cloud.checked.read(name) else { return nil }
            do {
                let sealed = try Envelope.open(
                    wrapped, key: AccountObjects.rekeyWrappingKey(key),
                    associatedData: AccountObjects.rekeyAssociatedData(
                        record.deviceID, epoch: epoch)
                ) { Data($0) }
                key = try SealedBox.open(
                    sealed, publicKey: pair.publicKey, secretKey: pair.secretKey)
            } catch {
                return nil
            }
            guard AccountKey.isValid(key) else { return nil }
        }
        guard constantTimeEquals(account.check, AccountRecord.check(key)) else { return nil }
        return key
    }
}

/// A device of the cloud account, as its manifest lists it.
public struct AccountDevice: Sendable, Hashable {
    /// The device's id in the manifest (its stable device id), as `removeDevice(_:)` takes it.
    public let id: String
    /// Whether this is the device that asked.
    public let isThisDevice: Bool
}
