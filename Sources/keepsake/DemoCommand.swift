import Device
import Foundation
import KeepsakeTestSupport
import Keychain

/// `keepsake demo`: the story so far, told step by step on a private Secret Service that the demo
/// starts and stops itself. The user's own keyring is never touched.
enum DemoCommand {
    static func run(_ context: Context) throws {
        try context.arguments.allowOnly([])
        let say = { (text: String) in Output.line(text) }
        say("Keepsake demo: a wallet app's secrets outlive the app.")
        say("")
        say("1. Starting a private Secret Service (its own D-Bus and gnome-keyring on a throwaway")
        say("   HOME). Your own keyring is never touched.")
        let service = try PrivateSecretService.start(masterPassword: "demo-login-password")
        defer { service.stop() }
        let root = service.root
        let container = root.appendingPathComponent("containers/com.example.wallet")
        let app = try App(id: "com.example.wallet", container: container)
        let keychain = Keychain(app: app, secretService: service.connection())

        say("")
        say("2. The app com.example.wallet is installed; its container is \(container.lastPathComponent)/.")
        try FileManager.default.createDirectory(at: container, withIntermediateDirectories: true)
        try Data("{\"onboarded\":true}".utf8).write(to: container.appendingPathComponent("settings.json"))
        let hint = "{\"lastWallet\":\"0x8A…3F\",\"lastAuthenticatorId\":\"passkey-7\"}"
        try keychain.add(
            GenericPasswordAttributes(
                service: "com.example.wallet.recovery", account: "hint",
                accessible: .afterFirstUnlock, label: "Wallet recovery hint"),
            data: Data(hint.utf8))
        say("   The user creates wallet 0x8A…3F. The app writes settings.json into its container")
        say("   and a recovery hint into the Keychain (accessible after first unlock).")
        try show(container: container, keychain: keychain, say: say)

        say("")
        say("3. The app is uninstalled: its container is deleted.")
        try app.uninstall()
        try show(container: container, keychain: keychain, say: say)

        say("")
        say("4. The app is installed again, with an empty container, and reads the Keychain:")
        try FileManager.default.createDirectory(at: container, withIntermediateDirectories: true)
        say("   " + (try welcome(keychain)))

        say("")
        say("5. The device reboots (the Secret Service restarts and unlocks at login):")
        try service.restart()
        say("   " + (try welcome(keychain)))

        say("")
        say("Done. The private Secret Service is stopped and its files removed.")
    }

    static func welcome(_ keychain: Keychain) throws -> String {
        let query = GenericPasswordQuery(service: "com.example.wallet.recovery", account: "hint")
        guard let data = try keychain.dataIfPresent(matching: query) else {
            return "Create a wallet (no hint found)."
        }
        let hint = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let wallet = hint?["lastWallet"] as? String ?? "?"
        return "Welcome back, your last wallet is \(wallet)."
    }

    static func show(container: URL, keychain: Keychain, say: (String) -> Void) throws {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: container.path)) ?? []
        say(
            "   container: "
                + (FileManager.default.fileExists(atPath: container.path)
                    ? (files.isEmpty ? "(empty)" : files.sorted().joined(separator: ", "))
                    : "(gone)"))
        let items = try KeychainCommand.listItems(
            keychain, GenericPasswordQuery(service: "com.example.wallet.recovery"))
        say(
            "   keychain:  "
                + (items.isEmpty
                    ? "(nothing)"
                    : items.map { "\($0.attributes.service) / \($0.attributes.account)" }.joined(
                        separator: ", ")))
    }
}
