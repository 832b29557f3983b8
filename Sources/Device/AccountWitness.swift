import Escrow
import Foundation
import Sealing

/// The account's witness: its latest state — epoch, manifest version and the account key's check
/// value — kept by the account's escrow service (`EscrowProtocol`, "Witness"), so a device that
/// joins fresh can tell the state the cloud shows it from an older or a planted one.
///
/// Its key derives from a seed that derives from the **recovery key**: the cloud, which never
/// holds the recovery key, can neither sign a statement nor name the witness of an account of its
/// own making. A recovery-key joiner derives the seed itself; the escrow's slot releases it with
/// the account key to a passcode joiner; the account's devices read it from `account-witness`
/// (sealed under the epoch's key, bound to the epoch) and sign the state after each change. The
/// escrow keeps a statement only over one that orders no higher, so neither the cloud nor a
/// lagging device winds it back.
enum AccountWitness {
    /// The cloud object that carries the seed to the account's devices.
    static let object = "account-witness"

    static func seed(recoveryKey: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(key: recoveryKey, context: "keepsake.witness.seed.v1")
    }

    static func id(_ seed: SecureBytes) -> Data {
        KeyDerivation.keyedHash(key: seed, context: "keepsake.witness.id.v1").unsafeData()
            .prefix(EscrowProtocol.slotIDLength)
    }

    static func keyPair(_ seed: SecureBytes) -> (publicKey: Data, secretKey: SecureBytes) {
        Signature.keyPair(
            seed: KeyDerivation.keyedHash(key: seed, context: "keepsake.witness.sign.v1"))
    }

    /// What the witness keeps: epoch and manifest version (the order), then the check value of
    /// the epoch's key.
    struct Statement: Equatable {
        var epoch: Int
        var version: UInt64
        var check: Data

        func encoded() -> Data {
            var bytes = Data()
            withUnsafeBytes(of: UInt64(epoch).bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: version.bigEndian) { bytes.append(contentsOf: $0) }
            return bytes + check
        }

        static func parse(_ bytes: Data) -> Statement? {
            guard bytes.count == 48, let (epoch, version) = EscrowProtocol.order(of: bytes),
                epoch <= UInt64(Int32.max)
            else { return nil }
            return Statement(epoch: Int(epoch), version: version, check: Data(bytes.suffix(32)))
        }
    }

    // MARK: - The seed in the cloud

    static func sealed(_ seed: SecureBytes, under accountKey: SecureBytes, epoch: Int) -> Data {
        seed.withUnsafeBytes {
            Envelope.seal($0, key: objectKey(accountKey), associatedData: binding(epoch))
        }
    }

    static func open(_ bytes: Data, under accountKey: SecureBytes, epoch: Int) -> SecureBytes? {
        guard
            let seed = try? Envelope.open(
                bytes, key: objectKey(accountKey), associatedData: binding(epoch)), seed.count == 32
        else { return nil }
        return seed
    }

    private static func objectKey(_ accountKey: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(
            key: AccountKey.epochKey(accountKey), context: "keepsake.witness.object.v1")
    }

    private static func binding(_ epoch: Int) -> Data {
        Data("\(object) \(epoch)".utf8)
    }

    // MARK: - The seed in the escrow

    /// What the escrow's slot holds: the account key's length, the key, and the seed (when
    /// known; without it, the key alone as before).
    static func escrowSecret(_ accountKey: SecureBytes, seed: SecureBytes?) -> SecureBytes {
        guard let seed else { return accountKey }
        return SecureBytes(count: 1 + accountKey.count + seed.count) { out in
            out[0] = UInt8(accountKey.count)
            accountKey.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[1..<(1 + accountKey.count)])
                    .copyMemory(from: $0)
            }
            seed.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[(1 + accountKey.count)...])
                    .copyMemory(from: $0)
            }
        }
    }

    /// The account key and the seed of what an escrow slot released.
    static func split(escrowSecret secret: SecureBytes) -> (key: SecureBytes, seed: SecureBytes?) {
        secret.withUnsafeBytes { bytes in
            guard bytes.count == 65 || bytes.count == 97, Int(bytes[0]) == bytes.count - 33
            else { return (secret, nil) }
            let length = Int(bytes[0])
            let key = SecureBytes(count: length) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[1..<(1 + length)]))
            }
            let seed = SecureBytes(count: 32) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[(1 + length)...]))
            }
            return (key, seed)
        }
    }
}

extension Device {
    /// The witness seed the account's devices share (`account-witness`, sealed under the epoch's
    /// key): nil when the cloud holds none that opens under `accountKey`.
    func witnessSeed(_ accountKey: SecureBytes, epoch: Int) -> SecureBytes? {
        guard let cloud, let bytes = try? cloud.read(AccountWitness.object) else { return nil }
        return AccountWitness.open(bytes, under: accountKey, epoch: epoch)
    }

    /// Puts the seed in the cloud for the account's devices, sealed under `accountKey`'s epoch.
    func writeWitnessSeed(
        _ seed: SecureBytes, under accountKey: SecureBytes, epoch: Int, cloud: any CloudStorage
    ) throws(DeviceError) {
        try cloudCall {
            try cloud.write(
                AccountWitness.object,
                AccountWitness.sealed(seed, under: accountKey, epoch: epoch))
        }
    }

    /// Signs the account's state for its witness at the escrow: after every manifest this device
    /// wrote, a rotation and the account's creation. Best effort: a witness that could not be
    /// reached (or a seed the cloud withholds) lags until the next change, and a joiner is then
    /// vouched for the state it last kept; a newer statement there (another device's) stands.
    func witness(
        _ accountKey: SecureBytes, epoch: Int, version: UInt64, seed: SecureBytes? = nil
    ) {
        guard let escrow, let seed = seed ?? witnessSeed(accountKey, epoch: epoch) else { return }
        let statement = AccountWitness.Statement(
            epoch: epoch, version: version, check: AccountRecord.check(accountKey))
        try? escrow.client().witness(
            AccountWitness.id(seed), statement: statement.encoded(),
            key: AccountWitness.keyPair(seed))
    }

    /// At a recovery-key or passcode join, before the key is adopted: the account state the cloud
    /// shows, checked against what its witness keeps. Returns what to tell the user when nothing
    /// vouched for it (no escrow, no seed, no statement kept yet, or one behind the cloud's).
    ///
    /// - Throws: `.corrupt` when the cloud shows an older epoch or manifest version than the
    ///   witness keeps (rolled back), or an account the witness does not know at its epoch
    ///   (planted); `.notAvailable` when the escrow could not be asked.
    func checkWitness(_ accountKey: SecureBytes, seed: SecureBytes?) throws(DeviceError) -> String?
    {
        let unvouched =
            "nothing vouched that the cloud shows this account's latest state"
        guard let escrow else {
            return
                "\(unvouched) (no escrow service is configured: --escrow URL): a cloud that rolled the account back would not be noticed at this join"
        }
        guard let seed else {
            return "\(unvouched) (the account's escrow slot holds no witness seed)"
        }
        let cloud = try signedIn()
        let kept = try escrowCall { () throws(EscrowError) in
            try escrow.client().witnessed(
                AccountWitness.id(seed), publicKey: AccountWitness.keyPair(seed).publicKey)
        }
        guard let kept else {
            return "\(unvouched) (the escrow keeps no state of this account yet)"
        }
        guard let witnessed = AccountWitness.Statement.parse(kept) else {
            throw DeviceError(
                .corrupt, "the account's witness keeps a statement that does not decode")
        }
        let account = try readAccount()
        let epoch = account?.epoch ?? 0
        let rolledBack =
            "the cloud shows an older account state than its escrow witnessed: rolled back, nothing joined or restored"
        if epoch < witnessed.epoch {
            throw DeviceError(
                .corrupt, "\(rolledBack) (epoch \(epoch), witnessed \(witnessed.epoch))")
        }
        if epoch > witnessed.epoch {
            return
                "\(unvouched) (its escrow witnessed epoch \(witnessed.epoch), the cloud shows \(epoch))"
        }
        guard constantTimeEquals(witnessed.check, AccountRecord.check(accountKey)) else {
            throw DeviceError(
                .corrupt,
                "the cloud shows an account its escrow's witness does not know (planted): nothing joined"
            )
        }
        guard let bytes = try cloudCall({ try cloud.read(AccountManifest.name) }),
            let manifest = try? AccountManifest.open(bytes, under: accountKey)
        else {
            throw DeviceError(.corrupt, "the cloud account's manifest is gone or does not open")
        }
        guard manifest.version >= witnessed.version else {
            throw DeviceError(
                .corrupt,
                "\(rolledBack) (manifest version \(manifest.version), witnessed \(witnessed.version))"
            )
        }
        // From here on the device refuses anything older than what the witness kept.
        let seen = seenManifest
        let id = SeenManifest.account(accountKey)
        if let highest = seen.read(account: id),
            (highest.epoch, highest.version) >= (witnessed.epoch, witnessed.version)
        {
        } else {
            try seen.write(account: id, epoch: witnessed.epoch, version: witnessed.version)
        }
        return nil
    }
}
