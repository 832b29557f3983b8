import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

@testable import CloudAccount
@testable import Device

private let keyValue = CloudObjects.kind("kv-")

/// Writes one key-value object for `app` through a session, as the store does.
private func writeObject(_ device: CloudAccount, app: String, _ value: String) throws {
    let session = try #require(try device.cloudSession())
    let objects = CloudObjects(cloudKey: session.key, kind: keyValue)
    let name = objects.name(app)
    try session.write(name, objects.seal(Data(value.utf8), name: name))
    try session.commit()
}

/// Whether `key` opens a copy in the cloud of the object for `app` (any copy the directory
/// holds, listed or not), and what it holds.
private func open(_ cloud: URL, app: String, with key: SecureBytes) -> String? {
    let objects = CloudObjects(cloudKey: key, kind: keyValue)
    let name = objects.name(app)
    let copies = ((try? CloudDirectory(cloud).list()) ?? []).filter {
        AccountManifest.objectName(ofStored: $0) == name
    }
    for copy in copies {
        guard let bytes = try? CloudDirectory(cloud).read(copy) else { continue }
        if let value = try? objects.open(bytes, name: name, { String(decoding: $0, as: UTF8.self) })
        {
            return value
        }
    }
    return nil
}

/// A phone with the pin 4711 that made the account on `cloud` and wrote `object` (when given),
/// and a tablet with the pin 2580 that joined with the phone's passcode. Their Secret Services
/// live as long as the returned value.
private func phoneAndTablet(_ cloud: URL, writing object: (app: String, value: String)? = nil)
    throws -> (services: [PrivateSecretService], phone: CloudAccount, tablet: CloudAccount)
{
    let (phoneService, phone) = try member(cloud)
    try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
    if let object { try writeObject(phone, app: object.app, object.value) }
    let (tabletService, tablet) = try member(cloud)
    try tablet.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
    try tablet.join(passcode: "4711")
    return ([phoneService, tabletService], phone, tablet)
}

/// The objects the cloud directory holds copies of, of one kind.
private func objectNames(_ cloud: URL, _ prefix: String) throws -> Set<String> {
    Set(
        try CloudDirectory(cloud).list().filter { $0.hasPrefix(prefix) }.map(
            AccountManifest.objectName(ofStored:)))
}

@Suite(
    "Account key rotation, device removal and the account manifest",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct RotationTests {
    @Test(
        "a passcode change rotates the account key: every object re-sealed under the same name, the old key opens nothing, a joined device follows, the escrow answers only the new passcode"
    )
    func passcodeChange() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        try writeObject(phone, app: "com.example.wallet", "before")
        let (tabletService, tablet) = try member(cloud)
        defer { withExtendedLifetime(tabletService) {} }
        try tablet.join(passcode: "4711")
        let old = try #require(try phone.keys.cloudKey())
        let namesBefore = try objectNames(cloud, "kv-")

        try phone.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        let new = try #require(try phone.keys.cloudKey())
        #expect(old != new)
        #expect(try objectNames(cloud, "kv-") == namesBefore)
        #expect(try CloudDirectory(cloud).list().filter { $0.hasPrefix("kv-") }.count == 1)
        // The object was re-sealed: the old key opens it no more, the new one does.
        #expect(open(cloud, app: "com.example.wallet", with: old) == nil)
        #expect(open(cloud, app: "com.example.wallet", with: new) == "before")
        // Written after: the old key opens nothing.
        try writeObject(phone, app: "com.example.wallet", "after")
        #expect(open(cloud, app: "com.example.wallet", with: old) == nil)
        // The tablet finds the new key sealed to it and reads what was written after.
        #expect(try tablet.keys.cloudKey(forUpload: false) == new)
        #expect(
            open(
                cloud, app: "com.example.wallet",
                with: try #require(try tablet.keys.cloudKey(forUpload: false)))
                == "after")
        // Its rekey objects are consumed.
        #expect(try CloudDirectory(cloud).list().filter { $0.hasPrefix("rekey-") }.isEmpty)
        // The escrow holds the new key under the new passcode only.
        try expectEscrowAnswersOnly("8642", not: "4711", key: new, on: cloud)
        print("rotation: passcode change re-sealed the account's objects; the old key opens none")
    }

    @Test(
        "a passcode changed through the device alone (the account not told) has the account rotate its key at its next unlock: the device's count of passcode changes says the key is older than the passcode; the escrow then answers only the new passcode"
    )
    func passcodeChangedBehindTheAccount() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        try writeObject(phone, app: "com.example.wallet", "before")
        let old = try #require(try phone.keys.cloudKey())

        // The device alone: the account's key and escrow stay as they were, for now.
        try phone.device.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        #expect(try phone.keys.cloudKey() == old)
        // The account's next unlock sees the passcode is newer than its key, and rotates.
        let report = try phone.unlockReporting(passcode: "8642")
        #expect(report.problem == nil)
        let new = try #require(try phone.keys.cloudKey())
        #expect(new != old)
        #expect(open(cloud, app: "com.example.wallet", with: old) == nil)
        #expect(open(cloud, app: "com.example.wallet", with: new) == "before")
        // Noted: the unlock after rotates nothing more.
        try phone.unlock(passcode: "8642")
        #expect(try phone.keys.cloudKey() == new)
        try expectEscrowAnswersOnly("8642", not: "4711", key: new, on: cloud)
    }

    @Test(
        "an unlock that re-seals the device record (raising the passcode's cost) rotates nothing: the passcode did not change"
    )
    func resealIsNoPasscodeChange() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let key = try #require(try phone.keys.cloudKey())
        let generation = try phone.device.records.load().record.generation
        // The same device at a higher cost: its unlock re-seals the record.
        let raising = CloudAccount(
            phoneService.device(
                tuning: DeviceTuning(passcodeCost: .interactive, retryPolicy: .fast)),
            cloud: phone.cloud, escrow: phone.escrow)
        let report = try raising.unlockReporting(passcode: "4711")
        #expect(report.problem == nil)
        #expect(try phone.device.records.load().record.generation != generation)
        #expect(try phone.keys.cloudKey() == key)
    }

    @Test(
        "a rotation a device owes for its own passcode change is still made after it follows another device's rotation"
    )
    func owedRotationSurvivesFollowing() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (services, phone, tablet) = try phoneAndTablet(
            cloud, writing: ("com.example.wallet", "before"))
        defer { withExtendedLifetime(services) {} }
        // The phone's passcode changes behind the account; the tablet rotates meanwhile.
        try phone.device.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        _ = try tablet.replaceRecoveryKey()
        let tablets = try #require(try tablet.keys.cloudKey())
        // A sync on the phone follows the tablet's rotation...
        #expect(try phone.keys.cloudKey() == tablets)
        // ...and its next unlock still makes the rotation it owes.
        #expect(try phone.unlockReporting(passcode: "8642").problem == nil)
        let rotated = try #require(try phone.keys.cloudKey())
        #expect(rotated != tablets)
        #expect(open(cloud, app: "com.example.wallet", with: rotated) == "before")
        #expect(try tablet.keys.cloudKey(forUpload: false) == rotated)
    }

    @Test(
        "a removed device no longer gets the key: its old key opens nothing written after, and it must join again"
    )
    func removal() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (services, phone, tablet) = try phoneAndTablet(cloud)
        defer { withExtendedLifetime(services) {} }
        let (laptopService, laptop) = try member(cloud)
        defer { withExtendedLifetime(laptopService) {} }
        try laptop.join(passcode: "4711")
        let devices = try phone.accountDevices()
        #expect(devices.count == 3)
        #expect(devices.filter(\.isThisDevice).count == 1)
        let tabletID = try #require(
            try tablet.accountDevices().first { $0.isThisDevice }?.id)
        let tabletKey = try #require(try tablet.keys.cloudKey())

        // Its own id, or an unknown one, is refused.
        let phoneID = try #require(devices.first { $0.isThisDevice }?.id)
        #expect(code { try phone.removeDevice(phoneID) } == .invalidPasscode)
        do { try phone.removeDevice(phoneID) } catch {
            #expect(error.message.contains("is this device"), "\(error)")  // says what it is
        }
        #expect(
            code { try phone.removeDevice("0000000000000000") } == .invalidPasscode)
        // A locked device removes nothing.
        try phone.device.lock()
        #expect(code { try phone.removeDevice(tabletID) } == .interactionNotAllowed)
        try phone.unlock(passcode: "4711")

        try phone.removeDevice(tabletID)
        #expect(try phone.accountDevices().map(\.id).contains(tabletID) == false)
        try writeObject(phone, app: "com.example.wallet", "after removal")
        #expect(open(cloud, app: "com.example.wallet", with: tabletKey) == nil)
        // The tablet finds no key sealed to it: it holds none of the account's any more.
        #expect(try tablet.keys.cloudKey() == nil)
        #expect(try tablet.cloudSession() == nil)
        // The laptop, still a member, follows.
        #expect(
            open(
                cloud, app: "com.example.wallet",
                with: try #require(try laptop.keys.cloudKey(forUpload: false)))
                == "after removal")
        // The escrow went with the old key; the phone's next unlock registers the new one.
        #expect(try CloudDirectory(cloud).read("account-escrow") == nil)
        try phone.device.lock()
        try phone.unlock(passcode: "4711")
        #expect(try CloudDirectory(cloud).read("account-escrow") != nil)
        try tablet.join(passcode: "4711")
        #expect(
            try tablet.keys.cloudKey() == (try phone.keys.cloudKey()))
    }

    @Test(
        "a replaced recovery key opens only the old account key, and that key opens nothing written after"
    )
    func recoveryReplacement() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        let first = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        let oldRecord = try #require(try CloudDirectory(cloud).read("account-recovery"))
        let old = try #require(try phone.keys.cloudKey())
        _ = try phone.replaceRecoveryKey()
        try writeObject(phone, app: "com.example.wallet", "after")
        // The old record, kept by whoever held the cloud, opened with the old recovery key:
        let pair = RecoveryKey.keyPair(try #require(RecoveryKey.parse(first)))
        let recovered = try SealedBox.open(
            oldRecord, publicKey: pair.publicKey, secretKey: pair.secretKey)
        #expect(recovered == old)
        #expect(open(cloud, app: "com.example.wallet", with: recovered) == nil)
        #expect(
            open(
                cloud, app: "com.example.wallet",
                with: try #require(try phone.keys.cloudKey()))
                == "after")
    }

    @Test(
        "a rotation seals the new key only to the recovery key the account named: one the cloud wrote into the account record (its tag kept, changed or dropped) stops it with nothing changed; the account's own goes on, and replacing the recovery key heals the record"
    )
    func recoveryKeyFromTheCloud() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        let first = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        let directory = CloudDirectory(cloud)
        let genuine = try #require(try directory.read(AccountObjects.account))
        let recoveryBefore = try #require(try directory.read(AccountObjects.recovery))
        let key = try #require(try phone.keys.cloudKey())
        let mallory = SealedBox.keyPair()
        let account = try #require(AccountRecord.parse(genuine))
        for tag in [account.recoveryTag, Data(repeating: 7, count: 32), nil] {
            var planted = account
            planted.recoveryPublicKey = mallory.publicKey
            planted.recoveryTag = tag
            try directory.write(AccountObjects.account, planted.encoded())
            #expect(
                code {
                    _ = try phone.rotation.rotateAccountKey(
                        removing: nil, replacingRecoveryKey: false)
                }
                    == .corrupt)
            #expect(try directory.read(AccountObjects.recovery) == recoveryBefore)
            #expect(try phone.keys.cloudKey() == key)
        }
        // The account's own record: the rotation goes on, sealed to the recovery key shown first.
        try directory.write(AccountObjects.account, genuine)
        _ = try phone.rotation.rotateAccountKey(
            removing: nil, replacingRecoveryKey: false)
        let rotated = try #require(try phone.keys.cloudKey())
        #expect(rotated != key)
        let pair = RecoveryKey.keyPair(try #require(RecoveryKey.parse(first)))
        let resealed = try #require(try directory.read(AccountObjects.recovery))
        #expect(
            try SealedBox.open(resealed, publicKey: pair.publicKey, secretKey: pair.secretKey)
                == rotated)
        // A planted record again: replacing the recovery key does not need the old one.
        let current = try #require(try directory.read(AccountObjects.account))
        var planted = try #require(AccountRecord.parse(current))
        planted.recoveryPublicKey = mallory.publicKey
        try directory.write(AccountObjects.account, planted.encoded())
        let replaced = try phone.replaceRecoveryKey()
        let newPair = RecoveryKey.keyPair(try #require(RecoveryKey.parse(replaced)))
        let replacedRecord = try #require(try directory.read(AccountObjects.recovery))
        let opened = try SealedBox.open(
            replacedRecord, publicKey: newPair.publicKey, secretKey: newPair.secretKey)
        #expect(opened == (try phone.keys.cloudKey()))
        _ = try phone.rotation.rotateAccountKey(
            removing: nil, replacingRecoveryKey: false)
    }

    @Test(
        "a passcode change that cannot rotate the account key (its record names no recovery key the account tagged) still moves the escrow to the new passcode: the old one joins nothing, the problem is said"
    )
    func passcodeChangeWithoutRotation() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let directory = CloudDirectory(cloud)
        let genuine = try #require(try directory.read(AccountObjects.account))
        var untagged = try #require(AccountRecord.parse(genuine))
        untagged.recoveryTag = nil  // as an account made before the tag, or a cloud dropping it
        try directory.write(AccountObjects.account, untagged.encoded())
        let key = try #require(try phone.keys.cloudKey())
        let change = try phone.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        #expect(change.problem?.contains("recovery key") == true)
        #expect(try phone.keys.cloudKey() == key)  // not rotated
        try expectEscrowAnswersOnly("8642", not: "4711", key: key, on: cloud)
    }

    @Test(
        "the manifest: an older copy, a deleted manifest, a dropped or changed object are refused with a clear error; a planted one is never read"
    )
    func manifest() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (services, phone, tablet) = try phoneAndTablet(cloud, writing: ("a", "one"))
        defer { withExtendedLifetime(services) {} }
        let directory = CloudDirectory(cloud)
        let manifestV1 = try #require(try directory.read("account-manifest"))
        let storedV1 = try #require(try directory.list().first { $0.hasPrefix("kv-") })
        let name = AccountManifest.objectName(ofStored: storedV1)
        let objectV1 = try #require(try directory.read(storedV1))
        try writeObject(phone, app: "a", "two")
        // Sees the newer version.
        #expect(try tablet.cloudSession(forUpload: false) != nil)

        func refusal(_ body: () throws -> Void) -> String {
            do {
                try body()
                return "accepted"
            } catch let error as DeviceError {
                return error.code == .corrupt ? error.message : "\(error)"
            } catch {
                return "\(error)"
            }
        }
        let manifestNow = try #require(try directory.read("account-manifest"))
        // Each copy has a name of its own: the new one, and the old one is gone once the
        // manifest no longer lists it.
        let stored = try #require(try directory.list().first { $0.hasPrefix("kv-") })
        #expect(stored != storedV1)
        #expect(try directory.read(storedV1) == nil)
        let objectV2 = try #require(try directory.read(stored))
        // An older copy put back under its own name: never read (the manifest names the new).
        try directory.write(storedV1, objectV1)
        #expect(try tablet.cloudSession()?.read(name) == objectV2)
        try directory.delete(storedV1)
        // An older copy under the current copy's name.
        try directory.write(stored, objectV1)
        let changed = refusal { _ = try tablet.cloudSession()?.read(name) }
        #expect(changed.contains("not the copy the account manifest lists"), "\(changed)")
        try directory.write(stored, objectV2)
        // A dropped object.
        try directory.delete(stored)
        let dropped = refusal { _ = try tablet.cloudSession(forUpload: false) }
        #expect(dropped.contains("gone from the cloud"), "\(dropped)")
        let gone = refusal { _ = try tablet.cloudSession()?.read(name) }
        #expect(gone.contains("deleted behind it"), "\(gone)")
        try directory.write(stored, objectV2)
        // A planted object (a copy under a name the manifest does not list): a restore reads
        // nothing of it; an upload leaves it while it is young (it may be another session's
        // upload that its manifest does not list yet, or a dead writer's) and removes it once it
        // has been a stray longer than any session holds the account's lock.
        let planted = "kv-" + String(repeating: "ab", count: 32)
        try directory.write(planted, objectV2)
        do {
            let restore = try #require(try tablet.cloudSession(forUpload: false))
            #expect(restore.list() == [name])
            #expect(try restore.read(planted) == nil)
        }  // its lock let go
        try #require(try phone.cloudSession()).commit()
        #expect(try directory.read(planted) != nil)
        // Its first sighting, aged past StrayObjects.age (as if four minutes had passed).
        let strays = phone.device.directory.appendingPathComponent("cloud-strays")
        let aged = String(decoding: try Data(contentsOf: strays), as: UTF8.self)
            .replacingOccurrences(of: #" [0-9]+\n"#, with: " 0\n", options: .regularExpression)
        try Data(aged.utf8).write(to: strays)
        try #require(try phone.cloudSession()).commit()
        #expect(try directory.read(planted) == nil)
        #expect(
            refusal { _ = try tablet.cloudSession(forUpload: false) } == "accepted")
        // The whole older state (manifest and object together): rolled back.
        try directory.write("account-manifest", manifestV1)
        try directory.write(storedV1, objectV1)
        let rolledBack = refusal { _ = try tablet.cloudSession(forUpload: false) }
        #expect(
            rolledBack.contains("older account state than this device has seen"), "\(rolledBack)")
        let rolledBackUpload = refusal { _ = try tablet.cloudSession() }
        #expect(
            rolledBackUpload.contains("older account state than this device has seen"),
            "\(rolledBackUpload)")
        try directory.write("account-manifest", manifestNow)
        try directory.delete(storedV1)
        #expect(
            refusal { _ = try tablet.cloudSession(forUpload: false) } == "accepted")
        // A deleted manifest.
        try directory.delete("account-manifest")
        let deleted = refusal { _ = try tablet.cloudSession(forUpload: false) }
        #expect(deleted.contains("is gone"), "\(deleted)")
        print(
            "manifest: an older copy, a drop, a rollback and a deleted manifest refused; a plant never read"
        )
    }

    @Test(
        "a cloud rolled back behind a device (the account as it was before a deletion and a passcode change) is named a rollback, never a removal: its sync fails with errSecDecode-style corrupt, and a join again with the recovery key is refused, so nothing deleted comes back"
    )
    func rollbackNamed() throws {
        let cloud = Throwaway.untrusted("cloud")
        // No escrow, so no witness: the device's own memory of the account is all that tells.
        let phoneService = try PrivateSecretService.start()
        defer { withExtendedLifetime(phoneService) {} }
        let phone = phoneService.account(cloud: CloudDirectory(cloud), tuning: .fast)
        #expect(phone.escrow == nil)
        let recoveryKey = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        try writeObject(phone, app: "a", "to be deleted")
        let directory = CloudDirectory(cloud)
        var before: [String: Data] = [:]
        for name in try directory.list() { before[name] = try directory.read(name) }
        // The entry deleted, then the passcode changed (a rotation: epoch 1).
        do {
            let session = try #require(try phone.cloudSession())
            for name in session.list() { session.delete(name) }
            try session.commit()
        }
        try phone.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        // The cloud put back as it was.
        for name in try directory.list() where before[name] == nil { try directory.delete(name) }
        for (name, bytes) in before { try directory.write(name, bytes) }

        func refusal(_ body: () throws -> Void) -> String {
            do {
                try body()
                return "accepted"
            } catch let error as DeviceError {
                return error.code == .corrupt ? error.message : "\(error)"
            } catch {
                return "\(error)"
            }
        }
        let sync = refusal { _ = try phone.cloudSession() }
        #expect(sync.contains("older account state than this device has seen"), "\(sync)")
        #expect(!sync.contains("join it again ("), "\(sync)")
        let status = try phone.keys.whyNoCloudSession()
        #expect(status.contains("older account state"), "\(status)")
        let joined = refusal { _ = try phone.join(recoveryKey: recoveryKey) }
        #expect(joined.contains("older account state than this device has seen"), "\(joined)")
        print("rollback: \(sync)")
    }

    @Test(
        "an account written before 0.4.0 (each object over in place) is moved to a copy per name by its next upload; an object a killed sync left failing the manifest's check is dropped from it (healed), and every later sync goes on"
    )
    func wedgedAccountHeals() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        try writeObject(phone, app: "kept", "kept")
        try writeObject(phone, app: "wedged", "before")
        let key = try #require(try phone.keys.cloudKey())
        let objects = CloudObjects(cloudKey: key, kind: keyValue)
        let directory = CloudDirectory(cloud)
        // The account as the earlier layout wrote it: every object under its name alone.
        var manifest = try AccountManifest.open(
            try #require(try directory.read(AccountManifest.name)), under: key)
        for name in manifest.names {
            let stored = try #require(manifest.storedName(of: name))
            try directory.write(name, try #require(try directory.read(stored)))
            try directory.delete(stored)
        }
        manifest.layout = nil
        manifest.version += 1
        try directory.write(AccountManifest.name, manifest.sealed(under: key))
        // A sync killed between its write and its commit, in that layout: the object written
        // over in place, the manifest still listing the old copy.
        let wedged = objects.name("wedged")
        try directory.write(wedged, objects.seal(Data("after".utf8), name: wedged))
        #expect(
            (try? #require(try phone.cloudSession(forUpload: false)).read(wedged))
                == nil,
            "the wedge reads as the earlier versions did: refused")

        // The next upload moves the account and heals it.
        try #require(try phone.cloudSession()).commit()
        let moved = try AccountManifest.open(
            try #require(try directory.read(AccountManifest.name)), under: key)
        #expect(moved.layout == AccountManifest.layout)
        #expect(moved.names == [objects.name("kept")])
        #expect(open(cloud, app: "kept", with: key) == "kept")
        #expect(try directory.list().filter { $0.hasPrefix("kv-") }.allSatisfy { $0.contains("_") })
        // Every later sync goes on, and the healed object is written again.
        try writeObject(phone, app: "wedged", "again")
        #expect(open(cloud, app: "wedged", with: key) == "again")
    }
}
