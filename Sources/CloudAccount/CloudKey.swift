import Escrow
import Device
import Foundation
import Sealing
import Synchronization

/// The cloud account's key on this device, and the three ways a device gets it.
///
/// The account key (from which every cloud copy's key derives) is created by the first device with
/// an E2EE-capable lock screen, held on each device sealed under its AfterFirstUnlock class key,
/// and in the cloud never under anything a guess can be tested against (`AccountObjects`). A new
/// device joins by approval of an existing unlocked device, with the recovery key, or with an
/// existing device's passcode through the account's escrow service.
///
/// `AccountKeyKeeper` is that key's keeper on this device: reading the account record, making
/// the account, adopting a key, the upkeep after an unlock (its escrow registration is
/// `EscrowRegistration`'s), and the
/// witness seed kept beside the key. The account (`CloudAccount.keys`) asks it; it asks the
/// account back only for what the account does with the key (rotation, the manifest, joins).
package struct AccountKeyKeeper {
    /// The account whose key this is.
    let account: CloudAccount

    /// The device that holds the key.
    var device: Device { account.device }
    /// The account's storage; nil when signed out.
    var cloud: (any CloudStorage)? { account.cloud }
    /// The account's escrow service, when it uses one.
    var escrow: EscrowConfiguration? { account.escrow }
}

extension CloudAccount {
    /// The keeper of the account key on this device.
    package var keys: AccountKeyKeeper { AccountKeyKeeper(account: self) }
}

extension AccountKeyKeeper {
    /// The account key as this device holds it, with the device record it came from, without
    /// asking the cloud whether it is still the account's (`cloudKey` follows rotations): nil
    /// when signed out, not in an account, or (for uploads) without E2EE.
    func heldCloudKey(forUpload: Bool) throws(DeviceError) -> (
        key: SecureBytes, record: HeldAccountState
    )? {
        guard cloud != nil else { return nil }
        let record = try device.accountState()
        if forUpload && !record.hasKnowledgeFactor { return nil }
        guard let wrapped = record.account.wrappedCloudKey else { return nil }
        return (try openCloudKey(wrapped), record)
    }

    /// The account's cloud key, when this device holds the key the account uses (set up here, or
    /// joined), is signed in and unlocked since boot. For uploads E2EE must be available too
    /// (`forUpload`); restoring needs only the key. nil otherwise — nothing is exchanged then.
    package func cloudKey(forUpload: Bool = true) throws(DeviceError) -> SecureBytes? {
        guard let (key, record) = try heldCloudKey(forUpload: forUpload) else { return nil }
        guard let account = try readAccount() else { return nil }
        if constantTimeEquals(account.check, AccountRecord.check(key)) { return key }
        // An account record of an epoch before the one this device holds is the cloud put back
        // (a rollback), never a removal: nothing to join again.
        try SeenManifest.refuseOlderEpoch(account.epoch ?? 0, than: record.account.cloudEpoch ?? 0)
        // Rotated since this device last looked: follow the new keys sealed to it, keep the last.
        guard
            let current = try self.account.rotation.followRotations(
                from: key, record: record, to: account)
        else {
            return nil
        }
        try adopt(current, followed: true, since: record)
        for epoch in ((record.account.cloudEpoch ?? 0) + 1)...(account.epoch ?? 0) {
            try? cloud?.delete(AccountObjects.rekey(record.deviceID, epoch: epoch))
        }
        return current
    }

    /// Why this device has no session with its cloud account now (what a sync that skips says,
    /// with what to do): signed out; no end-to-end-encryption-capable lock screen; never joined;
    /// no longer in the account (removed from another device, or the key rotated without it).
    package func whyNoCloudSession(forUpload: Bool = true) throws(DeviceError) -> String {
        guard cloud != nil else { return "signed out" }
        if forUpload, try !device.isEndToEndEncryptionAvailable() {
            return
                "this device has no end-to-end-encryption-capable lock screen: set a pin, pattern or password (keepsake lockscreen set) for its copies to go to the cloud account"
        }
        guard let (key, record) = try heldCloudKey(forUpload: forUpload) else {
            return
                "this device does not hold the cloud account's key: join the account first (keepsake device join)"
        }
        guard let account = try readAccount() else {
            return "the cloud account has no account record (never made there, or deleted)"
        }
        guard constantTimeEquals(account.check, AccountRecord.check(key)) else {
            do {
                try SeenManifest.refuseOlderEpoch(
                    account.epoch ?? 0, than: record.account.cloudEpoch ?? 0)
            } catch {
                return error.message
            }
            if let removed = try? removedOn(key, deviceID: record.deviceID) {
                return
                    "this device was removed from the cloud account on \(removed): join it again (keepsake device join)"
            }
            return
                "this device is no longer in the cloud account (removed from another device, or the account key changed without it): join it again (keepsake device join)"
        }
        return "the cloud account could not be opened just now: sync again"
    }

    /// When another device removed this one (`removed-<id>`, sealed under the key this device
    /// still holds), as an ISO 8601 date; nil when no such record opens.
    private func removedOn(_ heldKey: SecureBytes, deviceID id: String) throws -> String? {
        guard let bytes = try cloud?.read(AccountObjects.removed(id)),
            let date = AccountObjects.removalDate(bytes, deviceID: id, heldKey: heldKey)
        else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: date)
    }

    // MARK: - Keeping the account

    /// Makes this device the one creator of the account, on any WebDAV server: it posts an
    /// intent of its own (`creating-<device>`, a name no other device writes), then lists the
    /// account; when another creator's live intent is there too, it withdraws and tries again
    /// after a random pause. Of two creators at most one sees only itself (whoever lists last
    /// sees the other's intent), so at most one goes on; the other finds the account made.
    /// An intent older than two minutes (a creator that died) is not counted.
    func claimAccountCreation(_ deviceID: String, on cloud: any CloudStorage) throws(DeviceError) {
        let mine = AccountObjects.creating(deviceID)
        for attempt in 0..<40 {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            try cloud.checked.write(mine, Data(String(now).utf8))
            let others = try cloud.checked.list().filter {
                $0.hasPrefix("creating-") && $0 != mine
            }
            let live = others.filter { name in
                guard let bytes = try? cloud.read(name), bytes.count <= 32,
                    let stamp = Int64(String(decoding: bytes, as: UTF8.self))
                else { return false }
                return abs(now - stamp) < 120_000
            }
            if live.isEmpty { return }
            try? cloud.delete(mine)
            if try readAccount() != nil { return }  // made meanwhile: the caller sees it
            Thread.sleep(
                forTimeInterval: Double.random(in: 0.02...0.1) * Double(min(attempt + 1, 10)))
        }
        throw DeviceError(
            .notAvailable, "another device keeps making the cloud account: try again")
    }

    /// With the passcode at hand (set or unlock): creates the account when neither this device
    /// nor the cloud has one (returning the recovery key to show once), and registers the account
    /// key with the escrow under this passcode when an escrow is configured and this device's
    /// passcode changed since it last did.
    ///
    /// When the passcode changed since this device made, rotated or joined under the key (the
    /// device's count of passcode changes against the one the account noted), the account key
    /// is rotated (every cloud object re-sealed, the escrow registered under the new passcode).
    func maintainCloudKey(
        _ record: inout HeldAccountState, passcode: SecureBytes
    ) throws(DeviceError) -> (changed: Bool, recoveryKey: SecureBytes?) {
        guard record.hasKnowledgeFactor, let cloud else { return (false, nil) }
        var changed = false
        var recoveryKey: SecureBytes?
        let account = try readAccount()
        var accountKey = try record.account.wrappedCloudKey.map { wrapped throws(DeviceError) in
            try openCloudKey(wrapped)
        }
        if accountKey == nil && account == nil {
            // Made under the account's lock, and only if no device made it meanwhile: two new
            // devices signing in at once make one account, never one over the other.
            let lock = try cloud.checked.lock()
            defer { withExtendedLifetime(lock) {} }
            // The lock is not always exclusive (Apache's mod_dav_fs grants overlapping ones),
            // nor a conditional PUT atomic there: one creator at a time by intents of their own.
            try claimAccountCreation(record.deviceID, on: cloud)
            defer { try? cloud.delete(AccountObjects.creating(record.deviceID)) }
            guard try readAccount() == nil else {
                throw DeviceError(
                    .notAvailable,
                    "another device made the cloud account meanwhile: join it (approval, recovery key or passcode)"
                )
            }
            let key = SecureBytes(randomCount: Envelope.keyLength)
            let recovery = RecoveryKey.make()
            let recoveryPublicKey = RecoveryKey.keyPair(recovery.key).publicKey
            // Over what is there now (nothing, or what a creation that never finished left): a
            // creator that ignored the lock and wrote meanwhile is never written over.
            let otherCreator = "another device made the cloud account meanwhile: join it"
            let recoveryVersion = try currentVersion(of: AccountObjects.recovery, on: cloud)
            let manifestVersion = try currentVersion(of: AccountManifest.name, on: cloud)
            try writeRecovery(
                key, to: recoveryPublicKey, cloud: cloud, ifVersion: recoveryVersion)
            var manifest = AccountManifest(
                version: 1, epoch: 0, objects: [:], devices: [:], layout: AccountManifest.layout)
            manifest.devices[record.deviceID] = ManifestKeeper.boxKeyPair(record).publicKey
            try swap(
                AccountManifest.name, manifest.sealed(under: key), ifVersion: manifestVersion,
                on: cloud, conflict: otherCreator)
            try self.account.manifests.seen
                .write(
                    account: SeenManifest.account(key), epoch: 0, version: 1)
            let seed = AccountWitness.seed(recoveryKey: recovery.key)
            try writeWitnessSeed(seed, under: key, cloud: cloud)
            record.account.wrappedWitnessSeed = try sealWitnessSeed(seed)
            witness(key, epoch: 0, version: 1, seed: seed)
            // Written last, and only where there is none: until it is there, no device takes the
            // account for made.
            let made = try cloud.checked.write(
                AccountObjects.account,
                AccountRecord(accountKey: key, epoch: 0, recoveryPublicKey: recoveryPublicKey)
                    .encoded(), ifVersion: nil)
            guard made else {
                throw DeviceError(
                    .notAvailable,
                    "another device made the cloud account meanwhile: join it (approval, recovery key or passcode)"
                )
            }
            recoveryKey = recovery.text
            record.holdAccountKey(try sealCloudKey(key), epoch: 0, underThisPasscode: true)
            accountKey = key
            changed = true
        } else if let held = accountKey, let account,
            !constantTimeEquals(account.check, AccountRecord.check(held))
        {
            // Rotated elsewhere since this device last looked.
            accountKey = try self.account.rotation.followRotations(
                from: held, record: record, to: account)
            if let followed = accountKey {
                record.holdAccountKey(
                    try sealCloudKey(followed), epoch: account.epoch ?? 0, underThisPasscode: false)
                changed = true
            }
        }
        guard let accountKey else { return (changed, nil) }
        if let account, !constantTimeEquals(account.check, AccountRecord.check(accountKey)) {
            return (changed, nil)  // another account's key: join first
        }
        var notRotated: DeviceError?
        if record.account.owesRotation(passcodeChanges: record.passcodeChanges)
            && recoveryKey == nil
        {
            do {
                _ = try self.account.rotation.rotateAccountKey(
                    &record, from: accountKey, passcode: passcode)
                return (true, nil)
            } catch {
                // Not rotated (the cloud unreachable, another writer, an account record naming a
                // recovery key the account did not): the escrow takes the new passcode all the
                // same, below, its old slot removed, so the old passcode opens nothing there from
                // now on. The rotation is still owed (the key is noted under the passcode before):
                // it is tried again at the next unlock.
                notRotated = error
            }
        }
        if let escrow, record.account.escrowGeneration != record.generation,
            EscrowRegistration(keys: self).registerOrRetry(
                accountKey, passcode: passcode, escrow: escrow, cloud: cloud, &record)
        {
            changed = true
        }
        if let notRotated { throw notRotated }
        return (changed, recoveryKey)
    }

    /// `account-recovery`: the account key sealed to the recovery key's public key — so any
    /// device re-seals it after a rotation without knowing the recovery key.
    /// Written only over the copy at `version` (read under the account's lock).
    func writeRecovery(
        _ accountKey: SecureBytes, to recoveryPublicKey: Data, cloud: any CloudStorage,
        ifVersion version: CloudObjectVersion?
    ) throws(DeviceError) {
        let sealed: Data
        do { sealed = try SealedBox.seal(accountKey, to: recoveryPublicKey) } catch {
            throw DeviceError(.corrupt, "the recovery public key: \(error)", underlying: error)
        }
        try swap(
            AccountObjects.recovery, sealed, ifVersion: version, on: cloud,
            conflict: "another device is changing the account: try again")
    }

    /// The account record the cloud shows, once it confirms `accountKey`; refuses a key it does
    /// not confirm.
    func checkAccount(_ accountKey: SecureBytes) throws(DeviceError) -> AccountRecord {
        guard AccountKey.isValid(accountKey), let account = try readAccount(),
            constantTimeEquals(account.check, AccountRecord.check(accountKey))
        else { throw DeviceError(.corrupt, "the key does not match the cloud account") }
        return account
    }

    /// Keeps `accountKey` on this device, once the account's check value confirms it: joined
    /// (noted under this device's passcode), or `followed` from another device's rotation (a
    /// rotation this device owes for its own passcode change is still owed). `read` is the
    /// device record as the join or the sync began: a record whose knowledge factor went since,
    /// or a device erased since, keeps nothing (`.notAvailable`).
    func adopt(
        _ accountKey: SecureBytes, witnessSeed: SecureBytes? = nil, followed: Bool = false,
        since read: HeldAccountState
    ) throws(DeviceError) {
        let account = try checkAccount(accountKey)
        // The account's state as its sealed manifest says, checked against the newest this
        // device saw (it joins again, or its key was wiped): a state put back is refused before
        // anything is kept — the record's epoch is the cloud's word, the manifest's is sealed.
        let epoch: Int
        if let cloud {
            epoch =
                try self.account.manifests.read(
                    key: accountKey, epoch: account.epoch ?? 0, cloud: cloud,
                    seen: self.account.manifests.seen
                ).manifest.epoch
        } else {
            epoch = account.epoch ?? 0
        }
        let sealed = try sealCloudKey(accountKey)
        let sealedSeed = try witnessSeed.map { seed throws(DeviceError) in
            try sealWitnessSeed(seed)
        }
        let stored = try device.replaceAccountState(since: read) { record throws(DeviceError) in
            record.holdAccountKey(sealed, epoch: epoch, underThisPasscode: !followed)
            if let sealedSeed { record.account.wrappedWitnessSeed = sealedSeed }
        }
        guard let record = stored else {
            throw DeviceError(
                .notAvailable,
                "the lock screen's passcode was removed (or the device erased) meanwhile: the account key is not kept; join again"
            )
        }
        // In the manifest's device list, so that rotations seal the next key to it too (the
        // cloud reached once the device's lock is released).
        try self.account.manifests.enter(record, key: accountKey)
        try? cloud?.delete(AccountObjects.removed(record.deviceID))  // back in: no longer true
    }

    func readAccount() throws(DeviceError) -> AccountRecord? {
        try readAccountVersioned()?.account
    }

    /// The account record with the version it was read at, for a compare-and-swap of it.
    func readAccountVersioned() throws(DeviceError) -> (
        account: AccountRecord, version: CloudObjectVersion
    )? {
        guard let cloud else { return nil }
        guard let found = try cloud.checked.readVersioned(AccountObjects.account) else {
            return nil
        }
        guard let account = AccountRecord.parse(found.data) else {
            throw DeviceError(.corrupt, "the cloud account's record does not decode")
        }
        return (account, found.version)
    }

    func signedIn() throws(DeviceError) -> any CloudStorage {
        guard let cloud else { throw DeviceError(.notAvailable, "signed out: no cloud account") }
        return cloud
    }

    func sealCloudKey(_ cloudKey: SecureBytes) throws(DeviceError) -> Data {
        try sealForDevice(cloudKey, context: "keepsake.cloudkey.v1")
    }

    func openCloudKey(_ wrapped: Data) throws(DeviceError) -> SecureBytes {
        try openForDevice(wrapped, context: "keepsake.cloudkey.v1", what: "the cloud key")
    }

    /// A key of the account kept on this device: sealed under the AfterFirstUnlock class key,
    /// bound to `context`.
    func sealForDevice(_ secret: SecureBytes, context: String) throws(DeviceError) -> Data {
        let classKey = try device.classKey(.afterFirstUnlock)
        return secret.withUnsafeBytes {
            Envelope.seal($0, key: classKey, associatedData: Data(context.utf8))
        }
    }

    func openForDevice(_ wrapped: Data, context: String, what: String) throws(DeviceError)
        -> SecureBytes
    {
        let classKey = try device.classKey(.afterFirstUnlock)
        do {
            return try Envelope.open(wrapped, key: classKey, associatedData: Data(context.utf8))
        } catch {
            throw DeviceError(.corrupt, "\(what) does not open")
        }
    }

    /// Writes `name` only where it is still at `version` (nil: only where there is none): a
    /// writer that ignored the account's lock (or whose lock expired) is never written over.
    /// Another writer first is `.notAvailable` with `conflict` (try again: what it wrote stays).
    func swap(
        _ name: String, _ data: Data, ifVersion version: CloudObjectVersion?,
        on cloud: any CloudStorage, conflict: String
    ) throws(DeviceError) {
        guard try cloud.checked.write(name, data, ifVersion: version) else {
            throw DeviceError(.notAvailable, "\(name) changed meanwhile: \(conflict)")
        }
    }

    /// The version of `name` now (nil: none), for a later `swap`.
    func currentVersion(of name: String, on cloud: any CloudStorage) throws(DeviceError)
        -> CloudObjectVersion?
    {
        try cloud.checked.readVersioned(name)?.version
    }
}

extension AccountKeyKeeper {
    /// Stores what the cloud account's upkeep changed in the record (the account key, its epoch,
    /// the escrow registration) onto the record as it is now, under the device's lock again: another
    /// process may have unlocked (counted a guess) or set a lock screen meanwhile. Under a newer
    /// generation only a key this upkeep made or rotated to is kept (it is sealed under a class
    /// key, which a passcode change keeps); the escrow is registered again at the next unlock.
    /// Nothing is kept in a record whose state went meanwhile (the passcode removed, and set
    /// again).
    func storeAfterCloud(_ record: HeldAccountState, read: HeldAccountState) throws(DeviceError) {
        // Nothing when the passcode went meanwhile (another process), or went and came back, or
        // the device was erased: the account's keys went with it, and none comes back.
        let stored = try device.replaceAccountState(since: read) { current in
            let (kept, now) = (record.account, current.account)
            var state = now
            // The witness seed is the account's, whatever the passcode: kept once known.
            if kept.wrappedWitnessSeed != nil { state.wrappedWitnessSeed = kept.wrappedWitnessSeed }
            if current.generation == read.generation {
                (state.wrappedCloudKey, state.cloudEpoch, state.keyPasscodeChanges) = (
                    kept.wrappedCloudKey, kept.cloudEpoch, kept.keyPasscodeChanges
                )
                (state.escrowGeneration, state.rotationPending) = (
                    kept.escrowGeneration, kept.rotationPending
                )
            } else if kept.wrappedCloudKey != nil,
                now.wrappedCloudKey == nil || (kept.cloudEpoch ?? 0) > (now.cloudEpoch ?? 0)
            {
                // Another process changed the lock screen meanwhile: a key this upkeep made or
                // rotated to is kept (the old one may open nothing the account writes from now
                // on), noted under the passcode the upkeep read, so a passcode that changed
                // since has the next unlock rotate it again.
                (state.wrappedCloudKey, state.cloudEpoch, state.keyPasscodeChanges) = (
                    kept.wrappedCloudKey, kept.cloudEpoch, kept.keyPasscodeChanges
                )
            }
            current.account = state
        }
        // The rotation's key sealed to this device (`rotateAccountKey`) is not needed once the
        // record holds it (the cloud is reached after the device's lock, never under it).
        if let stored = stored?.account.cloudEpoch, stored > (read.account.cloudEpoch ?? 0) {
            try? cloud?.delete(AccountObjects.rekey(read.deviceID, epoch: stored))
        }
    }
}
