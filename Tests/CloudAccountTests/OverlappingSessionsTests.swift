import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import CloudAccount
@testable import Device

/// A cloud whose account lock is granted to everyone at once, as Apache's mod_dav_fs now and then
/// grants one exclusive WebDAV lock to two concurrent LOCKs (fault injection: every other call
/// goes to the real directory cloud).
private struct OverlappingLockCloud: CloudStorage {
    let real: CloudDirectory
    func read(_ name: String) throws -> Data? { try real.read(name) }
    func write(_ name: String, _ data: Data) throws { try real.write(name, data) }
    func delete(_ name: String) throws { try real.delete(name) }
    func list() throws -> [String] { try real.list() }
    func lock() throws -> AnyObject { NSObject() }
    func readVersioned(_ name: String) throws -> VersionedObject? { try real.readVersioned(name) }
    func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?) throws -> Bool
    {
        try real.write(name, data, ifVersion: expected)
    }
}

@Suite(
    "Two syncs at once under a lock that is not exclusive",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct OverlappingSessionsTests {
    @Test(
        "a session opened while another's upload is not yet in the manifest leaves that upload alone: after both commit the manifest lists both objects and the cloud holds both"
    )
    func neitherRemovesTheOthersUpload() throws {
        let directory = Throwaway.untrusted("cloud")
        let cloud = OverlappingLockCloud(real: CloudDirectory(directory))
        let (phone, service) = try phoneWithPin(on: cloud)
        defer {
            try? phone.device.reboot()  // its runtime keyring goes with the test
            withExtendedLifetime(service) {}
        }
        let recovery = try phone.replaceRecoveryKey()
        let tabletService = try PrivateSecretService.start()
        let tablet = tabletService.account(
            directory: Throwaway.directory("tablet"), cloud: cloud, tuning: .fast)
        defer { try? tablet.device.reboot() }
        try tablet.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
        try tablet.join(recoveryKey: recovery)
        // The tablet's sync writes its object; the phone's opens before the tablet commits.
        let tabletSession = try #require(try tablet.cloudSession())
        let objects = CloudObjects(cloudKey: tabletSession.key, kind: CloudObjects.kind("kv-"))
        let theirs = objects.name("com.example.tablet")
        try tabletSession.write(theirs, objects.seal(Data("tablet".utf8), name: theirs))
        let phoneSession = try #require(try phone.cloudSession())
        let mine = objects.name("com.example.phone")
        try phoneSession.write(mine, objects.seal(Data("phone".utf8), name: mine))
        try phoneSession.commit()
        #expect(
            try cloud.list().contains { AccountManifest.objectName(ofStored: $0) == theirs },
            "the phone's sync removed the tablet's upload")
        try tabletSession.commit()
        // Both listed, both there: a restore on either device takes the account as it is.
        for device in [phone, tablet] {
            let session = try #require(try device.cloudSession(forUpload: false))
            #expect(Set(session.list()).isSuperset(of: [mine, theirs]))
            #expect(try session.read(mine) != nil && session.read(theirs) != nil)
        }
    }
}
