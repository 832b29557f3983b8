import Foundation
import Sealing

/// The cloud account's key on this device: held sealed under the AfterFirstUnlock class key, and
/// joined by proving the passcode of a device that set it up (the account-key blob in the cloud).
extension Device {
    /// The account's cloud key, when this device holds the key the account uses (set up here, or
    /// joined), is signed in and unlocked since boot. For uploads E2EE must be available too
    /// (`forUpload`); restoring needs only the key, which a join proved the passcode for.
    /// nil otherwise — nothing is exchanged then.
    package func cloudKey(forUpload: Bool = true) throws(DeviceError) -> SecureBytes? {
        guard let cloud else { return nil }
        let record = try records.load().record
        if forUpload && !record.kind.hasKnowledgeFactor { return nil }
        guard let wrapped = record.wrappedCloudKey else { return nil }
        let key = try openCloudKey(wrapped)
        guard let blobBytes = try cloudCall({ try cloud.read(AccountKeyBlob.name) }) else {
            return nil
        }
        let blob = try AccountKeyBlob.decode(blobBytes)
        return constantTimeEquals(blob.check, AccountKeyBlob.check(key)) ? key : nil
    }

    /// Joins the signed-in cloud account by proving the passcode of a device that set it up.
    /// Wrong passcodes answer authFailed with the same growing delays as unlock.
    public func join(passcode: SecureBytes) throws(DeviceError) {
        guard let cloud else { throw DeviceError(.notAvailable, "signed out: no cloud account") }
        guard let bytes = try cloudCall({ try cloud.read(AccountKeyBlob.name) }) else {
            throw DeviceError(.notAvailable, "the cloud account has no key to join")
        }
        let blob = try AccountKeyBlob.decode(bytes)
        _ = try LockScreenKind.scalarCount(passcode)
        try guessLimit.exclusively { () throws(DeviceError) in
            var (path, record) = try records.load()
            let limit = guessLimit
            try limit.admit(record)
            limit.countAttempt(&record)
            path = try records.store(record, replacing: path)
            let kek = try PasscodeKeys.passcodeKey(passcode, salt: blob.salt, cost: blob.cost)
            guard
                let cloudKey = try? Envelope.open(
                    blob.wrappedKey, key: kek, associatedData: AccountKeyBlob.associatedData()),
                constantTimeEquals(blob.check, AccountKeyBlob.check(cloudKey))
            else {
                throw DeviceError(.authFailed, "wrong passcode for the cloud account")
            }
            record.failures = 0
            record.notBefore = 0
            record.wrappedCloudKey = try sealCloudKey(cloudKey)
            try records.store(record, replacing: path)
        }
    }

    private func sealCloudKey(_ cloudKey: SecureBytes) throws(DeviceError) -> Data {
        let classKey = try classKey(.afterFirstUnlock)
        return cloudKey.withUnsafeBytes {
            Envelope.seal($0, key: classKey, associatedData: Data("keepsake.cloudkey.v1".utf8))
        }
    }

    private func openCloudKey(_ wrapped: Data) throws(DeviceError) -> SecureBytes {
        let classKey = try classKey(.afterFirstUnlock)
        do {
            return try Envelope.open(
                wrapped, key: classKey, associatedData: Data("keepsake.cloudkey.v1".utf8))
        } catch {
            throw DeviceError(.corrupt, "the cloud key does not open")
        }
    }

    /// With the passcode at hand (set or unlock): creates the account key when neither this
    /// device nor the cloud has one, and (re)writes the cloud's account-key blob when this device
    /// holds the account's key.
    func maintainCloudKey(_ record: inout DeviceRecord, passcode: SecureBytes)
        throws(DeviceError) -> Bool
    {
        guard record.kind.hasKnowledgeFactor else { return false }
        var changed = false
        let blob = try cloud.flatMap { cloud throws(DeviceError) in
            try cloudCall({ try cloud.read(AccountKeyBlob.name) }).map {
                bytes throws(DeviceError) in try AccountKeyBlob.decode(bytes)
            }
        }
        var cloudKey = try record.wrappedCloudKey.map { wrapped throws(DeviceError) in
            try openCloudKey(wrapped)
        }
        if cloudKey == nil && blob == nil {
            let key = SecureBytes(randomCount: Envelope.keyLength)
            record.wrappedCloudKey = try sealCloudKey(key)
            cloudKey = key
            changed = true
        }
        guard let cloud, let cloudKey else { return changed }
        let check = AccountKeyBlob.check(cloudKey)
        if let blob, !constantTimeEquals(blob.check, check) { return changed }  // another account key: join first
        if let blob,
            (try? Envelope.open(
                blob.wrappedKey,
                key: try PasscodeKeys.passcodeKey(passcode, salt: blob.salt, cost: blob.cost),
                associatedData: AccountKeyBlob.associatedData())) != nil
        {
            return changed  // already wrapped under this passcode
        }
        let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
        let kek = try PasscodeKeys.passcodeKey(passcode, salt: salt, cost: passcodeCost)
        let wrapped = cloudKey.withUnsafeBytes {
            Envelope.seal($0, key: kek, associatedData: AccountKeyBlob.associatedData())
        }
        let newBlob = AccountKeyBlob(
            salt: salt, cost: passcodeCost, wrappedKey: wrapped, check: check)
        try cloudCall { try cloud.write(AccountKeyBlob.name, newBlob.encoded()) }
        return changed
    }

    private func cloudCall<R>(_ body: () throws -> R) throws(DeviceError) -> R {
        do { return try body() } catch let error as DeviceError { throw error } catch {
            throw DeviceError(
                .notAvailable, "cloud account unreachable: \(error)",
                underlying: error as? any Error & Sendable)
        }
    }

}
