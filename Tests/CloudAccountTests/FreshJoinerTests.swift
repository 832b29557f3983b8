import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

@testable import CloudAccount
@testable import Device
@testable import Escrow

/// Every object of a directory cloud, by name.
private func snapshot(_ cloud: URL) throws -> [String: Data] {
    var objects: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: cloud.path)
    where !name.hasPrefix(".") {
        objects[name] = try Data(contentsOf: cloud.appendingPathComponent(name))
    }
    return objects
}

/// Puts `objects` back as the whole cloud: what a cloud that rolls the account back shows.
private func restore(_ objects: [String: Data], to cloud: URL) throws {
    for name in try FileManager.default.contentsOfDirectory(atPath: cloud.path)
    where !name.hasPrefix(".") && objects[name] == nil {
        try FileManager.default.removeItem(at: cloud.appendingPathComponent(name))
    }
    for (name, bytes) in objects { try bytes.write(to: cloud.appendingPathComponent(name)) }
}

/// One more store object in the account, committed (the manifest's version goes up by one).
private func addObject(_ device: CloudAccount, _ text: String) throws {
    let session = try #require(try device.cloudSession())
    let objects = CloudObjects(cloudKey: session.key, kind: CloudObjects.kind("kv-"))
    let name = objects.name("com.example.\(text)")
    try session.write(name, objects.seal(Data(text.utf8), name: name))
    try session.commit()
}

private func refusal(_ body: () throws -> Any?) -> DeviceError? {
    do {
        _ = try body()
        return nil
    } catch let error as DeviceError {
        return error
    } catch {
        Issue.record("not a DeviceError: \(error)")
        return nil
    }
}

/// A device that joins fresh (recovery key, or passcode through the escrow) has seen no version of
/// the account; the account's witness at its escrow vouches for the latest state, under a key
/// that derives from the recovery key — which the cloud never holds.
@Suite(
    "Fresh joiners against a hostile cloud: rollback and planting through each join path",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct FreshJoinerTests {
    @Test(
        "with the recovery key: a manifest rolled back to an older version, and the whole account rolled back behind a rotation (made while the cloud withheld the seed's copy), are refused; nothing is joined"
    )
    func recoveryKeyRollback() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        let recoveryKey = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        try addObject(phone, "first")
        let older = try snapshot(cloud)
        try addObject(phone, "second")

        // The manifest alone put back: one version behind what the witness keeps.
        let (laptopService, laptop) = try member(cloud)
        defer { withExtendedLifetime(laptopService) {} }
        let current = try snapshot(cloud)
        try restore(older, to: cloud)
        let error = try #require(
            refusal { try laptop.join(recoveryKey: recoveryKey) })
        #expect(error.code == .corrupt && error.message.contains("rolled back"), "\(error)")
        #expect(try laptop.keys.cloudKey(forUpload: false) == nil)
        // Shown the real state, the same device joins, vouched for.
        try restore(current, to: cloud)
        #expect(try laptop.join(recoveryKey: recoveryKey) == .vouched)
        #expect(
            try laptop.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))

        // A rotation (a new passcode) moves the account to epoch 1; the whole epoch-0 account
        // put back (its record, manifest, recovery record and witness seed) is refused.
        // The cloud withholds the seed's copy from the rotating phone: it signs with its own.
        let beforeRotation = try snapshot(cloud)
        try FileManager.default.removeItem(at: cloud.appendingPathComponent(AccountWitness.object))
        _ = try phone.setLockScreen(.pin, passcode: "1357", currentPasscode: "4711")
        try restore(beforeRotation, to: cloud)
        let (desktopService, desktop) = try member(cloud)
        defer { withExtendedLifetime(desktopService) {} }
        let behind = try #require(
            refusal { try desktop.join(recoveryKey: recoveryKey) })
        #expect(
            behind.code == .corrupt && behind.message.contains("epoch 0, witnessed 1"), "\(behind)")
        #expect(try desktop.keys.cloudKey(forUpload: false) == nil)
    }

    @Test(
        "with the recovery key: an account the cloud planted — its own key sealed to the recovery public key it copied, its own manifest, at the witnessed epoch or a later one — is refused; nothing is joined"
    )
    func recoveryKeyPlanted() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        let recoveryKey = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        let bytes = try #require(try CloudDirectory(cloud).read("account"))
        let real = try #require(AccountRecord.parse(bytes))
        let publicKey = try #require(real.recoveryPublicKey)
        // The cloud's own account: a key of its own, sealed to the public key it copied.
        let planted = SecureBytes(randomCount: 32)
        try SealedBox.seal(planted, to: publicKey).write(
            to: cloud.appendingPathComponent("account-recovery"))
        try AccountRecord(
            check: AccountRecord.check(planted), epoch: 0, recoveryPublicKey: publicKey
        )
        .encoded().write(to: cloud.appendingPathComponent("account"))
        try AccountManifest(version: 9, epoch: 0, objects: [:], devices: [:]).sealed(under: planted)
            .write(to: cloud.appendingPathComponent(AccountManifest.name))
        // A witness seed of its own in the cloud changes nothing: the joiner derives its own.
        try AccountWitness.sealed(SecureBytes(randomCount: 32), under: planted).write(
            to: cloud.appendingPathComponent(AccountWitness.object))
        let (laptopService, laptop) = try member(cloud)
        defer { withExtendedLifetime(laptopService) {} }
        let error = try #require(
            refusal { try laptop.join(recoveryKey: recoveryKey) })
        #expect(error.code == .corrupt && error.message.contains("planted"), "\(error)")
        #expect(try laptop.keys.cloudKey(forUpload: false) == nil)
        // The same account claiming a later epoch than the witness keeps (record and manifest
        // alike): its key's lineage is not the account's, at any epoch.
        for epoch in [1, 7] {
            try AccountRecord(
                check: AccountRecord.check(planted), epoch: epoch, recoveryPublicKey: publicKey
            ).encoded().write(to: cloud.appendingPathComponent("account"))
            try AccountManifest(version: 1, epoch: epoch, objects: [:], devices: [:])
                .sealed(under: planted)
                .write(to: cloud.appendingPathComponent(AccountManifest.name))
            let later = try #require(
                refusal { try laptop.join(recoveryKey: recoveryKey) })
            #expect(later.code == .corrupt && later.message.contains("planted"), "\(later)")
            #expect(try laptop.keys.cloudKey(forUpload: false) == nil)
        }
    }

    @Test(
        "with the passcode through the escrow: a rolled-back manifest, or an account record whose epoch was raised over it, is refused (the slot releases the witness seed with the key, whatever the cloud shows)"
    )
    func passcodeRollback() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        try addObject(phone, "first")
        let older = try snapshot(cloud)
        try addObject(phone, "second")
        let current = try snapshot(cloud)
        // The cloud withholds the seed object too: the joiner has it from the escrow.
        var withheld = older
        withheld[AccountWitness.object] = nil
        try restore(withheld, to: cloud)
        let (tabletService, tablet) = try member(cloud)
        defer { withExtendedLifetime(tabletService) {} }
        let error = try #require(refusal { try tablet.join(passcode: "4711") })
        #expect(error.code == .corrupt && error.message.contains("rolled back"), "\(error)")
        #expect(try tablet.keys.cloudKey(forUpload: false) == nil)
        // The account record's epoch raised over the old manifest (the record is the cloud's to
        // write; the manifest's epoch is sealed): refused, nothing joined.
        let bytes = try #require(try CloudDirectory(cloud).read("account"))
        var record = try #require(AccountRecord.parse(bytes))
        record.epoch = 99
        try record.encoded().write(to: cloud.appendingPathComponent("account"))
        let raised = try #require(refusal { try tablet.join(passcode: "4711") })
        #expect(raised.code == .corrupt, "\(raised)")
        #expect(try tablet.keys.cloudKey(forUpload: false) == nil)
        try restore(current, to: cloud)
        #expect(try tablet.join(passcode: "4711") == .vouched)
        // What the witness kept is what the tablet saw: an older manifest is refused from now on.
        try restore(older, to: cloud)
        #expect(
            refusal { _ = try tablet.cloudSession(forUpload: false) }?.code
                == .corrupt)
    }

    @Test(
        "without an escrow nothing can vouch for the account's state: the recovery-key join goes through and says so"
    )
    func noEscrowSaysSo() throws {
        let cloud = Throwaway.untrusted("cloud")
        let phoneService = try PrivateSecretService.start()
        defer { withExtendedLifetime(phoneService) {} }
        let phone = phoneService.account(cloud: CloudDirectory(cloud), tuning: .fast)
        let recoveryKey = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        let laptopService = try PrivateSecretService.start()
        defer { withExtendedLifetime(laptopService) {} }
        let laptop = laptopService.account(cloud: CloudDirectory(cloud), tuning: .fast)
        let vouching = try laptop.join(recoveryKey: recoveryKey)
        #expect(vouching == .noEscrow)
        let note = try #require(vouching.warning)
        #expect(note.contains("nothing vouched") && note.contains("--escrow"), "\(note)")
        #expect(
            try laptop.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))
    }

    @Test(
        "the escrow's witness keeps the newest statement only: an older one, one under another key, or one whose signature does not verify is refused; anyone may read it, and a reader checks it with its own key"
    )
    func witnessAtTheEscrow() throws {
        let cloud = Throwaway.untrusted("cloud")
        let client = try PrivateEscrow.of(cloud).configuration.client()
        let seed = SecureBytes(randomCount: 32)
        let id = AccountWitness.id(seed)
        let key = AccountWitness.keyPair(seed)
        func statement(_ epoch: Int, _ version: UInt64) -> Data {
            AccountWitness.Statement(
                epoch: epoch, version: version, check: Data(count: 32), nameCheck: Data(count: 32)
            )
            .encoded()
        }
        #expect(try client.witnessed(id, publicKey: key.publicKey) == nil)
        try client.witness(id, statement: statement(0, 5), key: key)
        try client.witness(id, statement: statement(0, 5), key: key)  // the same: kept
        #expect(throws: EscrowError(.stale, "")) {
            try client.witness(id, statement: statement(0, 4), key: key)
        }
        try client.witness(id, statement: statement(1, 2), key: key)  // a later epoch
        #expect(throws: EscrowError(.stale, "")) {
            try client.witness(id, statement: statement(0, 9), key: key)
        }
        let other = AccountWitness.keyPair(SecureBytes(randomCount: 32))
        #expect(throws: EscrowError(.authFailed, "")) {
            try client.witness(id, statement: statement(7, 7), key: other)
        }
        // A signature over another statement.
        let (status, _) = try PrivateEscrow.of(cloud).configuration.transport()(
            "POST", EscrowProtocol.Path.witness.rawValue,
            EscrowProtocol.message([
                (.slot, id), (.owner, key.publicKey), (.statement, statement(9, 9)),
                (
                    .signature,
                    Signature.sign(
                        EscrowProtocol.witnessProof(id: id, statement: statement(9, 10)),
                        secretKey: key.secretKey)
                ),
            ]))
        #expect(status == 403)
        #expect(try client.witnessed(id, publicKey: key.publicKey) == statement(1, 2))
        #expect(throws: EscrowError(.authFailed, "")) {
            _ = try client.witnessed(id, publicKey: other.publicKey)
        }
    }
}
