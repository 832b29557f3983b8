import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import KeyValueStore
import Keychain
import RecoveryHint
import Sealing
import Testing

/// Everything a device exchanges with its cloud account, now.
private func syncEverything(_ device: CloudAccount) throws {
    _ = try BlockStoreSync(account: device).sync()
    _ = try KeychainSync(account: device).sync()
}

private func restoreEverything(_ device: CloudAccount) throws {
    _ = try BlockStoreSync(account: device).restore()
    _ = try KeychainSync(account: device).sync()
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

/// The scenario's pins: long enough that no file of random digits holds one by chance.
private let phonePin = "73926150481736205914"
private let tabletPin = "58203746195827364019"
private func pin(_ digits: String) -> SecureBytes { SecureBytes(copying: Data(digits.utf8)) }

@Suite("The demo's scenarios for every profile (two private Secret Services, one cloud)")
struct ProfileScenarioTests {
    @Test(
        "set → uninstall → reinstall → welcome back; a new device joining with the old pin is welcomed back too",
        arguments: HintProfile.allCases)
    func welcomeBack(_ profile: HintProfile) throws {
        let cloud = Throwaway.untrusted("cloud")
        let phone = try HintPhone(cloud: cloud)
        // Pins of 20 digits, so that the hygiene check below cannot find one by chance.
        try phone.account.setLockScreen(.pin, passcode: pin(phonePin), currentPasscode: nil)
        let hint = RecoveryHint(
            lastAuthenticatorId: "passkey-7", lastWallet: demoWallet, lastLoginAt: 1_795_000_000_000
        )
        RecoveryHints(
            service: try RecoveryHintService.make(
                profile: profile, app: phone.app, account: phone.account)
        ).set(hint)
        try syncEverything(phone.account)
        try phone.device.uninstall(phone.app)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: profile, app: phone.app, account: phone.account)
            ).get() == hint)

        let tablet = try HintPhone(cloud: cloud)
        try tablet.account.setLockScreen(.pin, passcode: pin(tabletPin), currentPasscode: nil)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: profile, app: tablet.app, account: tablet.account)
            ).get() == .empty)
        try tablet.account.join(passcode: pin(phonePin))
        try restoreEverything(tablet.account)
        #expect(
            RecoveryHints(
                service: try RecoveryHintService.make(
                    profile: profile, app: tablet.app, account: tablet.account)
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
                    // No check here passes or fails by chance (docs/testing.md): a file of L
                    // bytes holds a given 20-digit pin by chance with a probability below
                    // L · 10⁻²⁰ even were it all decimal digits (device files are under 64 KiB:
                    // below 10⁻¹⁵ a run for every file, pin and profile), and the wallet (42
                    // characters) and authenticator id (9, with a '-') are as far out of reach.
                    let pins = [phonePin, tabletPin]
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
                profile: profile, app: phone.app, account: phone.account))
        hints.set(lastWallet: testWallet("local only"))
        try syncEverything(phone.account)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
        #expect(hints.get().lastWallet == testWallet("local only"))
    }

    @Test(
        "an unreachable cloud fails no write: the hint is kept on the device",
        arguments: HintProfile.allCases)
    func cloudUnreachable(_ profile: HintProfile) throws {
        let service = try PrivateSecretService.start()
        let device = service.account(
            directory: service.root.appendingPathComponent("device"), cloud: UnreachableCloud(),
            tuning: .fast)
        let app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
        let hints = try RecoveryHintService.make(profile: profile, app: app, account: device)
        let outcomes = try hints.set(RecoveryHint(lastWallet: testWallet("kept")))
        #expect(outcomes.contains { $0.succeeded })
        #expect(try hints.get().hint.lastWallet == testWallet("kept"))
    }
}
