import Escrow
import Device
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
    /// the epoch's key and one of the name key (which every rotation keeps: an account of
    /// someone else's making has another, whatever epoch it shows).
    struct Statement: Equatable {
        var epoch: Int
        var version: UInt64
        var check: Data
        var nameCheck: Data

        init(epoch: Int, version: UInt64, accountKey: SecureBytes) {
            self.init(
                epoch: epoch, version: version, check: AccountRecord.check(accountKey),
                nameCheck: Self.nameCheck(accountKey))
        }

        init(epoch: Int, version: UInt64, check: Data, nameCheck: Data) {
            self.epoch = epoch
            self.version = version
            self.check = check
            self.nameCheck = nameCheck
        }

        static func nameCheck(_ accountKey: SecureBytes) -> Data {
            CloudObjects.accountIdentity(accountKey, context: "keepsake.witness.account.v1")
        }

        func encoded() -> Data {
            var bytes = Data()
            withUnsafeBytes(of: UInt64(epoch).bigEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: version.bigEndian) { bytes.append(contentsOf: $0) }
            return bytes + check + nameCheck
        }

        static func parse(_ bytes: Data) -> Statement? {
            guard bytes.count == 80, let (epoch, version) = EscrowProtocol.order(of: bytes),
                epoch <= UInt64(Int32.max)
            else { return nil }
            let tail = Data(bytes.dropFirst(16))
            return Statement(
                epoch: Int(epoch), version: version, check: Data(tail.prefix(32)),
                nameCheck: Data(tail.suffix(32)))
        }
    }

    // MARK: - The seed in the cloud

    /// The seed sealed under a key of `accountKey`'s epoch (every rotation writes it again under
    /// the new one: an older copy opens under no later key).
    static func sealed(_ seed: SecureBytes, under accountKey: SecureBytes) -> Data {
        seed.withUnsafeBytes {
            Envelope.seal($0, key: objectKey(accountKey), associatedData: binding)
        }
    }

    static func open(_ bytes: Data, under accountKey: SecureBytes) -> SecureBytes? {
        guard
            let seed = try? Envelope.open(
                bytes, key: objectKey(accountKey), associatedData: binding), seed.count == 32
        else { return nil }
        return seed
    }

    private static func objectKey(_ accountKey: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(
            key: AccountKey.epochKey(accountKey), context: "keepsake.witness.object.v1")
    }

    private static let binding = Data("keepsake.witness.seed.object.v1".utf8)

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

extension AccountKeyKeeper {
    /// The witness seed of the account `accountKey` is in: the copy the cloud holds under this
    /// epoch's key (a recovery key replaced on another device brings a new one), else the one
    /// this device keeps in its record (a cloud that withholds the object changes nothing).
    func witnessSeed(_ accountKey: SecureBytes, record: HeldAccountState? = nil) -> SecureBytes? {
        if let cloud, let bytes = try? cloud.read(AccountWitness.object),
            let seed = AccountWitness.open(bytes, under: accountKey)
        {
            return seed
        }
        let kept = record ?? (try? device.accountState())
        return kept?.account.wrappedWitnessSeed.flatMap { try? openWitnessSeed($0) }
    }

    /// Puts the seed in the cloud for the account's devices, sealed under `accountKey`'s epoch.
    func writeWitnessSeed(
        _ seed: SecureBytes, under accountKey: SecureBytes, cloud: any CloudStorage
    ) throws(DeviceError) {
        try cloud.checked.write(
            AccountWitness.object, AccountWitness.sealed(seed, under: accountKey))
    }

    func sealWitnessSeed(_ seed: SecureBytes) throws(DeviceError) -> Data {
        try sealForDevice(seed, context: "keepsake.witness-seed.v1")
    }

    func openWitnessSeed(_ wrapped: Data) throws(DeviceError) -> SecureBytes {
        try openForDevice(wrapped, context: "keepsake.witness-seed.v1", what: "the witness seed")
    }

    /// Signs the account's state for its witness at the escrow: after every manifest this device
    /// wrote, a rotation and the account's creation. Best effort: a witness that could not be
    /// reached lags until the next change, and a joiner is then vouched for the state it last
    /// kept; a newer statement there (another device's) stands.
    func witness(
        _ accountKey: SecureBytes, epoch: Int, version: UInt64, seed: SecureBytes? = nil,
        record: HeldAccountState? = nil
    ) {
        guard let escrow,
            let seed = seed ?? witnessSeed(accountKey, record: record)
        else { return }
        let statement = AccountWitness.Statement(
            epoch: epoch, version: version, accountKey: accountKey)
        try? escrow.client().witness(
            AccountWitness.id(seed), statement: statement.encoded(),
            key: AccountWitness.keyPair(seed))
    }

    /// At a recovery-key or passcode join, before the key is adopted: the account state the cloud
    /// shows (`account`, the record that confirmed the key, and its manifest, sealed under the
    /// key, with the epoch in it) checked against what its
    /// witness keeps. Returns whether anything vouched for it (no escrow, no seed, no statement
    /// kept yet, or a witness one rotation behind: not).
    ///
    /// - Throws: `.corrupt` when the cloud shows an older epoch or manifest version than the
    ///   witness keeps (rolled back), an account whose keys the witness does not know (planted),
    ///   or a manifest that is missing, does not open or disagrees with the account record;
    ///   `.notAvailable` when the escrow could not be asked.
    func checkWitness(_ accountKey: SecureBytes, seed: SecureBytes?, account: AccountRecord)
        throws(DeviceError) -> JoinVouching
    {
        guard let escrow else { return .noEscrow }
        guard let seed else { return .noWitnessSeed }
        let cloud = try signedIn()
        let kept: Data?
        do {
            kept = try escrow.client().witnessed(
                AccountWitness.id(seed), publicKey: AccountWitness.keyPair(seed).publicKey)
        } catch { throw DeviceError(escrow: error) }
        guard let kept else { return .nothingWitnessed }
        guard let witnessed = AccountWitness.Statement.parse(kept) else {
            throw DeviceError(
                .corrupt, "the account's witness keeps a statement that does not decode")
        }
        // The key's lineage first: an account of someone else's making (sealed to a recovery
        // public key it copied) has a name key of its own, at any epoch it claims.
        guard
            constantTimeEquals(
                witnessed.nameCheck, AccountWitness.Statement.nameCheck(accountKey))
        else {
            throw DeviceError(
                .corrupt,
                "the cloud shows an account its escrow's witness does not know (planted): nothing joined"
            )
        }
        // The epoch and version as the manifest says them, sealed under the key (the account
        // record's epoch is the cloud's to write).
        guard let bytes = try cloud.checked.read(AccountManifest.name),
            let manifest = try? AccountManifest.open(bytes, under: accountKey)
        else {
            throw DeviceError(.corrupt, "the cloud account's manifest is gone or does not open")
        }
        guard manifest.epoch == account.epoch ?? 0 else {
            throw DeviceError(
                .corrupt,
                "the cloud account's record and manifest disagree on its epoch: nothing joined")
        }
        let rolledBack =
            "the cloud shows an older account state than its escrow witnessed: rolled back, nothing joined or restored"
        if manifest.epoch < witnessed.epoch {
            throw DeviceError(
                .corrupt, "\(rolledBack) (epoch \(manifest.epoch), witnessed \(witnessed.epoch))")
        }
        if manifest.epoch == witnessed.epoch {
            guard constantTimeEquals(witnessed.check, AccountRecord.check(accountKey)) else {
                throw DeviceError(
                    .corrupt,
                    "the cloud shows an account key its escrow's witness does not know at epoch \(manifest.epoch) (planted): nothing joined"
                )
            }
            guard manifest.version >= witnessed.version else {
                throw DeviceError(
                    .corrupt,
                    "\(rolledBack) (manifest version \(manifest.version), witnessed \(witnessed.version))"
                )
            }
        }
        // From here on the device refuses anything older than what it was shown and checked.
        try self.account.manifests.seen.raise(
            account: SeenManifest.account(accountKey), epoch: manifest.epoch,
            version: manifest.version)
        if manifest.epoch > witnessed.epoch {
            // A real rotation the witness did not hear of (the key opened this epoch's manifest,
            // and its name key is the witnessed one): vouched for the lineage, not the version.
            return .witnessBehind(witnessed: witnessed.epoch, current: manifest.epoch)
        }
        return .vouched
    }
}

/// Whether anything vouched that a join by recovery key or passcode took the account's latest
/// state: the account's escrow witness, which keeps the newest state any device signed. Unvouched,
/// a cloud that rolled the account back would not be noticed at the join — tell the user
/// (`warning`).
public enum JoinVouching: Sendable, Equatable {
    /// The escrow's witness vouched for the state joined.
    case vouched
    /// No escrow service is configured (`--escrow URL`).
    case noEscrow
    /// The account's escrow slot holds no witness seed.
    case noWitnessSeed
    /// The escrow keeps no state of this account yet.
    case nothingWitnessed
    /// The witness is behind a rotation: the key's lineage is vouched for (the witnessed epoch's
    /// name key), the version at the current epoch is not.
    case witnessBehind(witnessed: Int, current: Int)

    /// Whether the witness vouched for the state joined.
    public var isVouched: Bool { self == .vouched }

    /// What to tell the user when nothing vouched for the state joined; nil when the witness did.
    public var warning: String? {
        let unvouched = "nothing vouched that the cloud shows this account's latest state"
        return switch self {
        case .vouched: nil
        case .noEscrow:
            "\(unvouched) (no escrow service is configured: --escrow URL): a cloud that rolled the account back would not be noticed at this join"
        case .noWitnessSeed: "\(unvouched) (the account's escrow slot holds no witness seed)"
        case .nothingWitnessed: "\(unvouched) (the escrow keeps no state of this account yet)"
        case .witnessBehind(let witnessed, let current):
            "\(unvouched) (its escrow witnessed epoch \(witnessed), the account is at \(current): the version is not vouched for)"
        }
    }
}
