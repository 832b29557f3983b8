import Foundation
import KeepsakeTestSupport
import Sealing
import Synchronization
import Testing

@testable import CloudAccount
@testable import Device

/// The real WebDAV account with a writer that ignores the account's lock (or whose lock expired)
/// slipped in: just before this device's first write of one chosen object, that writer puts bytes
/// of its own there through the same real server.
private func interfered(_ server: WebDAVCloud, before target: String, writing theirs: Data) -> (
    cloud: InterceptedCloud, interfered: @Sendable () -> Bool
) {
    let done = Mutex(false)
    let cloud = InterceptedCloud(server) { name in
        guard name == target,
            done.withLock({ old in
                defer { old = true }; return !old
            })
        else {
            return
        }
        try server.write(name, theirs)
    }
    return (cloud, { done.withLock { $0 } })
}

@Suite(
    "Account objects two devices may race on WebDAV are compare-and-swapped (a private Apache)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct WebDAVRaceTests {
    @Test(
        "a rotation that meets another writer's change stops there, and never writes over it",
        // (No store object: a rotation writes each re-sealed copy under a name of its own and
        // never over a copy, so nothing another writer put anywhere is written over; another
        // writer's new copies meet the manifest's compare-and-swap, the case here.)
        arguments: [AccountObjects.recovery, AccountManifest.name, AccountObjects.account])
    func rotationMeetsAnotherWriter(_ target: String) throws {
        // Not swept: the other writer's bytes are plain test text on the server.
        let server = try PrivateWebDAV.start(swept: false)
        defer { server.stop() }
        let real = try server.cloud()
        // Set up on the plain server; then the same account through the interfering one.
        let (setUp, _, service) = try phoneWithOneObject(on: real)
        defer { withExtendedLifetime(service) {} }
        let name = target
        let theirs = Data("another writer's \(name)".utf8)
        let (cloud, interferedYet) = interfered(real, before: name, writing: theirs)
        let phone = service.account(directory: setUp.device.directory, cloud: cloud, tuning: .fast)
        let keyBefore = try #require(try phone.keys.cloudKey(forUpload: false))

        #expect(throws: DeviceError.self) { _ = try phone.replaceRecoveryKey() }
        #expect(interferedYet())
        // What the other writer put there stays; this device keeps the key it had.
        #expect(try real.read(name) == theirs)
        // (Where the other writer replaced the account record itself, this device's key no
        // longer matches it: it follows or joins at its next sync.)
        if target != AccountObjects.account {
            #expect(try phone.keys.cloudKey(forUpload: false) == keyBefore)
        }
    }

    @Test(
        "two approvals of one join request: the first stays (one answer a request), the new device joins by it"
    )
    func approvalsRace() throws {
        let server = try PrivateWebDAV.start()
        defer { server.stop() }
        let real = try server.cloud()
        let (phone, _, service) = try phoneWithOneObject(on: real)
        defer { withExtendedLifetime(service) {} }
        let laptopService = try PrivateSecretService.start()
        let laptop = laptopService.account(
            directory: Throwaway.directory("laptop"), cloud: try server.cloud(), tuning: .fast)
        try laptop.setLockScreen(.pin, passcode: "2468", currentPasscode: nil)
        let ticket = try laptop.requestJoin()
        let shown = try #require(
            try laptop.awaitCode(of: ticket, timeout: .seconds(5)))
        try phone.approveJoin(code: shown)
        let first = try #require(try real.read(AccountObjects.joinApproval(ticket.id)))
        // A second approval (here the same device again): made only where there is none, it
        // leaves the first — one answer a request.
        #expect(code { try phone.approveJoin(code: shown) } == .authFailed)
        #expect(try real.read(AccountObjects.joinApproval(ticket.id)) == first)
        #expect(try laptop.awaitApproval(of: ticket, timeout: .seconds(5)))
        #expect(
            try laptop.keys.cloudKey(forUpload: false)
                == phone.keys.cloudKey(forUpload: false))
    }

    @Test(
        "an escrow registration that meets another writer's escrow record leaves it, drops its own slot and registers again at the next unlock"
    )
    func escrowRegistrationRace() throws {
        // Not swept: the other writer's bytes are plain test text on the server.
        let server = try PrivateWebDAV.start(swept: false)
        defer { server.stop() }
        let escrow = try PrivateEscrow()
        let real = try server.cloud()
        let theirs = Data("another device's escrow record".utf8)
        let (cloud, interferedYet) = interfered(
            real, before: AccountObjects.escrow, writing: theirs)
        let service = try PrivateSecretService.start()
        let phone = service.account(
            directory: Throwaway.directory("phone"), cloud: cloud, escrow: escrow.configuration,
            tuning: .fast)
        // The registration loses: the pin is set all the same, the other record stays. (On a
        // busy machine the pin's cloud work may not get as far as the registration: each unlock
        // takes it up again, until a registration has met the other writer.)
        _ = try? phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        for _ in 0..<5 where !interferedYet() {
            try phone.device.reboot()
            _ = try? phone.unlock(passcode: "4711")
        }
        #expect(interferedYet())
        #expect(try real.read(AccountObjects.escrow) == theirs)
        #expect(try phone.device.lockScreenKind() == .pin)
        // At the next unlock it registers over what it finds (compare-and-swap against it).
        try phone.device.reboot()
        _ = try phone.unlock(passcode: "4711")
        #expect(try real.read(AccountObjects.escrow) != theirs)
        // And the escrow answers the phone's passcode: a new device joins with it.
        let tabletService = try PrivateSecretService.start()
        let tablet = tabletService.account(
            directory: Throwaway.directory("tablet"), cloud: try server.cloud(),
            escrow: escrow.configuration, tuning: .fast)
        try tablet.setLockScreen(.pin, passcode: "2468", currentPasscode: nil)
        try tablet.join(passcode: "4711")
        #expect(
            try tablet.keys.cloudKey(forUpload: false)
                == phone.keys.cloudKey(forUpload: false))
    }
}
