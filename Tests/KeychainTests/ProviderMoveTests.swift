import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import SecretService
import Testing

@Suite("Moving to another Secret Service provider")
struct ProviderMoveTests {
    @Test(
        "items moved from gnome-keyring to KeePassXC by a plain Secret Service client (attributes, label, secret) read back there; the lock screen and class keys come along",
        .enabled(if: PrivateSecretService.defaultProvider == .gnomeKeyring))
    func gnomeKeyringToKeePassXC() throws {
        let gnome = try PrivateSecretService.start(provider: .gnomeKeyring)
        let keepass = try PrivateSecretService.start(provider: .keepassxc)
        let app = try ThrowawayApp.make()
        let directory = Throwaway.directory("moved-device")
        let before = gnome.device(directory: directory, tuning: .fast)
        try before.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let keychain = Keychain(app: app, device: before)
        for (account, accessible) in [
            ("afu", Accessibility.afterFirstUnlock), ("wu", Accessibility.whenUnlocked),
        ] {
            try keychain.add(
                GenericPasswordAttributes(
                    service: "moved", account: account, accessible: accessible),
                data: Data("\(account)'s".utf8))
        }
        // The move, as a user would do it with any client: every item of Keepsake's schemas,
        // its attributes (read with gdbus), label and secret, stored anew in KeePassXC.
        let source = gnome.connection()
        let target = keepass.connection()
        var moved = 0
        for schema in ["org.keepsake.Device", "org.keepsake.GenericPassword"] {
            for path in try source.search(["xdg:schema": schema]).unlocked {
                let attributes = try secretToolAttributes(source, path)
                let secret = try #require(try source.secrets(at: [path])[path])
                _ = try target.createItem(label: "moved", attributes: attributes, secret: secret)
                moved += 1
            }
        }
        #expect(moved == 3)
        gnome.stop(keepingRuntimeState: true)

        let after = keepass.device(directory: directory, tuning: .fast)
        let there = Keychain(app: app, device: after)
        func read(_ account: String) -> String {
            do {
                let data = try there.data(
                    matching: GenericPasswordQuery(service: "moved", account: account))
                return String(decoding: data, as: UTF8.self)
            } catch {
                return "\(error.status)"
            }
        }
        #expect(read("afu") == "afu's")
        #expect(read("wu") == "wu's")
        try after.lock()
        #expect(read("wu") == "\(KeychainStatus.interactionNotAllowed)")
        #expect(throws: DeviceError.self) { try after.unlock(passcode: "0000") }
        try after.unlock(passcode: "1234")
        #expect(read("wu") == "wu's")
        print("providers: 3 items moved from gnome-keyring to KeePassXC read back")
    }
}
