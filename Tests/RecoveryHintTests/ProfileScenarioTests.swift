import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import KeyValueStore
import Keychain
import RecoveryHint
import Testing

/// Everything a device exchanges with its cloud account, now.
private func syncEverything(_ device: Device) throws {
    _ = try BlockStoreSync(device: device).sync()
    _ = try KeychainSync(device: device).sync()
}

private func restoreEverything(_ device: Device) throws {
    _ = try BlockStoreSync(device: device).restore()
    _ = try KeychainSync(device: device).sync()
}

/// A cloud account that cannot be reached (fault injection).
private struct UnreachableCloud: CloudStorage {
    struct Down: Error {}
    func lock() throws -> AnyObject { throw Down() }
    func read(_ name: String) throws -> Data? { throw Down() }
    func write(_ name: String, _ data: Data) throws { throw Down() }
    func delete(_ name: String) throws { throw Down() }
    func list() throws -> [String] { throw Down() }
}

@Suite("The demo's scenarios for every profile (two private Secret Services, one cloud)")
struct ProfileScenarioTests {
    @Test(
        "set → uninstall → reinstall → welcome back; a new device joining with the old pin is welcomed back too",
        arguments: HintProfile.allCases)
    func welcomeBack(_ profile: HintProfile) throws {
        let cloud = Throwaway.untrusted("cloud")
        let phone = try HintPhone(cloud: cloud)
        try phone.device.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let hint = RecoveryHint(
            lastAuthenticatorId: "passkey-7", lastWallet: demoWallet, lastLoginAt: 1_795_000_000_000
        )
        RecoveryHints(
            service: try RecoveryHintService.make(
                profile: profile, app: phone.app, device: phone.device)
        ).set(hint)
        try syncEverything(phone.device)
        try phone.device.uninstall(phone.app)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: profile, app: phone.app, device: phone.device)
            ).get() == hint)

        let tablet = try HintPhone(cloud: cloud)
        try tablet.device.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: profile, app: tablet.app, device: tablet.device)
            ).get() == .empty)
        try tablet.device.join(passcode: "4711")
        try restoreEverything(tablet.device)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: profile, app: tablet.app, device: tablet.device)
            ).get() == hint)

        // Hygiene: the cloud and both device directories hold no plaintext of the hint, their
        // files are 0600 and their directories 0700.
        for root in [cloud, phone.device.directory, tablet.device.directory] {
            let walker = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isDirectoryKey])!
            for case let url as URL in walker {
                let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
                let mode = (attributes[.posixPermissions] as? Int) ?? 0
                if attributes[.type] as? FileAttributeType == .typeDirectory {
                    #expect(mode == 0o700, "\(url.path)")
                } else {
                    #expect(mode == 0o600, "\(url.path)")
                    let bytes = try Data(contentsOf: url)
                    // The files that are clear by design hold random digits: the account's public
                    // JSON objects (`account`, `account-escrow`: decimal numbers and base64), the
                    // device's `account-manifest-seen` (a 64-digit hex account name and two
                    // numbers), and its sync bookkeeping (`cloud-manifest`, the Keychain's
                    // `manifest`, `cloud-strays`, `cloud-synced`: hex names and digests, times).
                    // A 4-digit pin turns up in them by chance; that nothing passcode-derived is
                    // in them is JoinTests' claim, and the suite-wide sweep checks them for the
                    // secrets of 8 bytes or more the suite stored.
                    let chance = [
                        "account", "account-escrow", "account-manifest-seen", "cloud-manifest",
                        "manifest", "cloud-strays", "cloud-synced",
                    ]
                    let pins = chance.contains(url.lastPathComponent) ? [] : ["4711", "2580"]
                    for plain in [demoWallet, "passkey-7"] + pins {
                        #expect(
                            bytes.range(of: Data(plain.utf8)) == nil,
                            "\(url.lastPathComponent) holds \(plain)")
                    }
                }
                #expect(!url.lastPathComponent.contains("recovery-hint") || root != cloud)
            }
        }
    }

    @Test(
        "a device without a lock screen keeps its hint local: the cloud directory shows nothing",
        arguments: HintProfile.allCases)
    func noLockScreen(_ profile: HintProfile) throws {
        let cloud = Throwaway.untrusted("cloud")
        let phone = try HintPhone(cloud: cloud)
        let hints = RecoveryHints(
            service: try RecoveryHintService.make(
                profile: profile, app: phone.app, device: phone.device))
        hints.set(lastWallet: testWallet("local only"))
        try syncEverything(phone.device)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
        #expect(hints.get().lastWallet == testWallet("local only"))
    }

    @Test(
        "an unreachable cloud fails no write: the hint is kept on the device",
        arguments: HintProfile.allCases)
    func cloudUnreachable(_ profile: HintProfile) throws {
        let service = try PrivateSecretService.start()
        let device = service.device(
            directory: service.root.appendingPathComponent("device"), cloud: UnreachableCloud(),
            tuning: .fast)
        let app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
        let hints = try RecoveryHintService.make(profile: profile, app: app, device: device)
        let outcomes = try hints.set(RecoveryHint(lastWallet: testWallet("kept")))
        #expect(outcomes.contains { $0.succeeded })
        #expect(try hints.get().hint.lastWallet == testWallet("kept"))
    }
}
