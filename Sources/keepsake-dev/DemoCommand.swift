import AppWiring
import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeCLI
import KeepsakeTestSupport
import Keychain
import Platform
import RecoveryHint
import Sealing

/// `keepsake demo`: the whole story so far, step by step, on private Secret Services that the demo
/// starts and stops itself (one per device). The user's own keyring is never touched.
enum DemoCommand {
    static func run(_ context: Context) throws {
        try context.arguments.allowOnly(["provider"])
        let providerName = context.arguments.value("provider") ?? "gnome-keyring"
        guard let provider = PrivateSecretService.Provider(rawValue: providerName) else {
            throw CommandError.usage(
                "demo [--provider gnome-keyring | keepassxc | kwallet] [--cloud webdav | URL]")
        }
        // `--cloud webdav`: a private Apache (TLS, throwaway CA) the demo starts and stops;
        // `--cloud URL`: that WebDAV server, with credentials from ~/.netrc or `keepsake cloud
        // login`; otherwise a throwaway directory.
        var server: PrivateWebDAV?
        defer { server?.stop() }
        let makeCloud: (String) throws -> DemoCloud
        switch context.cloudLocation {
        case "webdav"?:
            let started = try PrivateWebDAV.start(tls: true)
            server = started
            makeCloud = { name in
                DemoCloud(
                    storage: try WebDAVCloud(
                        url: started.url.appendingPathComponent("\(name)/"),
                        username: started.username, password: started.password,
                        caFile: started.caFile.path),
                    escrowKey: Throwaway.directory(name))
            }
        case .some where context.webDAVURL != nil:
            // Credentials from ~/.netrc only: the demo never reads the user's own keyring.
            let base = context.webDAVURL!
            let login = try Netrc.credentials(
                for: base.host ?? "", in: UserDirectories.home)
            let run = UUID().uuidString.prefix(8).lowercased()
            makeCloud = { name in
                DemoCloud(
                    storage: try WebDAVCloud(
                        url: base.appendingPathComponent("keepsake-demo-\(run)-\(name)/"),
                        username: login?.user, password: login?.password,
                        caFile: context.cloudCA),
                    escrowKey: Throwaway.directory(name))
            }
        default:
            makeCloud = { name in
                let directory = Throwaway.directory(name)
                return DemoCloud(storage: CloudDirectory(directory), escrowKey: directory)
            }
        }
        let say = { (text: String) in Output.line(text) }
        say("Keepsake demo: \"Welcome back\" survives uninstall, reinstall and a new device.")
        say("")
        say(
            "Starting a private Secret Service per device (its own D-Bus and \(provider.rawValue) on a"
        )
        say("throwaway HOME). Your own keyring is never touched.")
        let cloud = try makeCloud("demo-cloud")
        let phone = try DemoDevice(provider: provider, name: "phone", cloud: cloud)
        defer { phone.service.stop() }

        say("")
        say("1. On the phone, the user sets a pin and installs com.example.wallet.")
        let recoveryKey = try phone.account.setLockScreen(
            .pin, passcode: "4711", currentPasscode: nil
        ).recoveryKey
        let lockScreen = try phone.device.status()
        if phone.counter != nil {
            say(
                "   Its guesses are counted by a guess counter service (keepsake-escrow as a user of its own, on its socket; lockscreen status: "
                    + "guessLimit \(lockScreen.guessLimit), countedIn \(lockScreen.countedIn ?? "?")): 10 wrong pins in all disable the phone."
            )
        } else {
            say(
                "   Its guesses are counted in software (guessLimit \(lockScreen.guessLimit)): the demo runs the guess counter as a user of its own only as root."
            )
        }
        try FileManager.default.createDirectory(
            at: phone.app.container, withIntermediateDirectories: true)
        try Data("{\"onboarded\":true}".utf8).write(
            to: phone.app.container.appendingPathComponent("settings.json"))
        say("   They create wallet 0x8A…3F; the app records the recovery hint.")
        phone.hints.set(
            lastAuthenticatorId: "passkey-7", lastWallet: demoWallet, lastLoginAt: 1_795_000_000_000
        )
        try show(phone, cloud: cloud, say: say)
        let report = try BlockStoreSync(account: phone.account).sync()
        say(
            "   The phone syncs: \(report.uploaded) Block Store entry sealed to the cloud account (E2EE: pin set)."
        )
        say("   cloud:      \(cloud.listing())")
        say("   " + statusLine(phone))

        say("")
        say("2. The app is uninstalled: its container is deleted.")
        try phone.device.uninstall(phone.app)
        try show(phone, cloud: cloud, say: say)

        say("")
        say("3. The app is installed again, with an empty container:")
        try FileManager.default.createDirectory(
            at: phone.app.container, withIntermediateDirectories: true)
        say("   " + welcome(phone.hints.get()))

        say("")
        say("4. The phone reboots; after the user unlocks, the hint is there:")
        try phone.service.restart()
        say(
            "   before unlock: " + welcome(phone.hints.get())
                + " (the hint is AfterFirstUnlock; Block Store answers)")
        try phone.account.unlock(passcode: "4711")
        say("   after unlock:  " + welcome(phone.hints.get()))

        say("")
        say(
            "5. A new device joins the cloud account with the phone's pin, which only the account's"
        )
        say(
            "   escrow service (keepsake-escrow: it counts claims, 10 wrong ones destroy it) can check, and"
        )
        say(
            "   only by an exchange (OPRF) that shows neither side the pin or the key — nothing in the"
        )
        say(
            "   cloud lets anyone guess it. Then the two other ways (approval by the phone, the recovery"
        )
        say("   key shown when the phone set its pin), a removal, and a stranger guessing.")
        let tablet = try DemoDevice(provider: provider, name: "tablet", cloud: cloud)
        defer { tablet.service.stop() }
        try tablet.account.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
        say("   before joining: " + welcome(tablet.hints.get()))
        do {
            try BlockStoreSync(account: tablet.account).join(passcode: "0000")
        } catch {
            say(
                "   with a wrong pin: refused (errSecAuthFailed), counted by the escrow, nothing restored."
            )
        }
        let restored = try BlockStoreSync(account: tablet.account).join(passcode: "4711")
        say("   with the phone's pin: \(restored) entry restored. " + welcome(tablet.hints.get()))
        // By approval: the laptop shows a code, the unlocked phone approves that very request.
        let laptop = try DemoDevice(provider: provider, name: "laptop-2", cloud: cloud)
        defer { laptop.service.stop() }
        // The laptop posts a request, the phone answers, the laptop shows a code computed from
        // both (nobody in the middle can pick it), and the user types it on the phone.
        let joinCode = try phone.account.approve(laptop.account)
        let approved = try BlockStoreSync(account: laptop.account).restore()
        say(
            "   by approval (code \(joinCode) shown by the laptop, typed on the phone): \(approved) entry restored. "
                + welcome(laptop.hints.get()))
        // With the recovery key shown once when the phone set its pin.
        let desktop = try DemoDevice(provider: provider, name: "desktop", cloud: cloud)
        defer { desktop.service.stop() }
        if let recoveryKey {
            let unvouched = try desktop.account.join(recoveryKey: recoveryKey).warning
            let recovered = try BlockStoreSync(account: desktop.account).restore()
            say(
                "   with the recovery key: \(recovered) entry restored, the account's state "
                    + (unvouched == nil
                        ? "vouched for by the escrow's witness. " : "unvouched (\(unvouched!)). ")
                    + welcome(desktop.hints.get()))
        }
        // The phone removes the laptop: the account key rotates away from it.
        let laptopID = try laptop.account.accountDevices().first { $0.isThisDevice }!
            .id
        try phone.account.removeDevice(laptopID)
        let stillIn = (try? laptop.account.accountDevices()) != nil
        say(
            "   the phone removes the laptop: the account key rotates; the laptop "
                + (stillIn ? "is still in (unexpected)." : "holds no key of the account any more."))
        // The escrow got the new key at the phone's next unlock; now someone guesses.
        try phone.device.lock()
        try phone.account.unlock(passcode: "4711")
        let stranger = try DemoDevice(provider: provider, name: "stranger", cloud: cloud)
        defer { stranger.service.stop() }
        var wrong = 0
        for guess in 0..<10 {
            do {
                try stranger.account.join(
                    passcode: SecureBytes(copying: Data(String(format: "9%03d", guess).utf8)))
            } catch { wrong += 1 }
        }
        do {
            try stranger.account.join(passcode: "4711")
            say("   after \(wrong) wrong guesses the right pin still joined (unexpected).")
        } catch {
            say(
                "   \(wrong) wrong pins from a stranger's device, then the 11th guess — the right pin: "
                    + "the escrow record is destroyed; approval or the recovery key remain.")
        }

        say("")
        say("6. A device without a lock screen keeps its hint local:")
        let otherCloud = try makeCloud("demo-cloud-2")
        let plain = try DemoDevice(provider: provider, name: "laptop", cloud: otherCloud)
        defer { plain.service.stop() }
        plain.hints.set(lastWallet: "0x51e0A9c3B7d2F4a6C8e1D3b5F7a9C2e4B6d8A1C0")
        let plainReport = try BlockStoreSync(account: plain.account).sync()
        say(
            "   sync: \(plainReport.skipped ?? "done"); its cloud account holds: \(otherCloud.listing())"
        )
        say("   " + welcome(plain.hints.get()))
        say("   " + statusLine(plain))

        say("")
        say(
            "7. The apple profile (key-value store + synchronizable Keychain item), signed out of the cloud:"
        )
        let mac = try DemoDevice(provider: provider, name: "mac", cloud: nil, profile: .apple)
        defer { mac.service.stop() }
        mac.hints.set(lastWallet: "0x77C2e4B6d8A1c3E5f7A9b2D4f6B8a0C1e3D5f7AB")
        try mac.device.uninstall(mac.app)
        say(
            "   after uninstall and reinstall: " + welcome(mac.hints.get())
                + " (from the local key-value cache)")

        say("")
        say(
            "8. The android profile on a device without Block Store (preferences + Auto Backup alone):"
        )
        let android = try DemoDevice(
            provider: provider,
            name: "android", cloud: nil, profile: .android, blockStore: false)
        defer { android.service.stop() }
        try android.account.setLockScreen(.pin, passcode: "1357", currentPasscode: nil)
        android.hints.set(lastWallet: "0x3C9a1E3c5B7d9F2a4C6e8B0d2F4a6C8e0B2d4F9D")
        try android.device.uninstall(android.app)
        say(
            "   the container is gone; at reinstall Auto Backup restores shared_prefs/recovery_hint.xml:"
        )
        say("   " + welcome(android.hints.get()))

        say("")
        say("Done. The private Secret Services are stopped and their files removed.")
    }

    struct DemoDevice {
        let service: PrivateSecretService
        /// The device and the cloud account it is signed in to (signed out: `cloud` nil).
        let account: CloudAccount
        var device: Device { account.device }
        let app: App
        let hints: RecoveryHints
        /// The device's guess counter: a private keepsake-escrow of its own, as a user of its own
        /// (nil when this process cannot start one: not root).
        let counter: PrivateEscrow?

        init(
            provider: PrivateSecretService.Provider, name: String, cloud: DemoCloud?,
            profile: HintProfile = .linux, blockStore: Bool = true
        ) throws {
            // Saving after every change, as users run KeePassXC: the phone reboots (step 4).
            service = try PrivateSecretService.start(
                masterPassword: "\(name)-login-password", provider: provider,
                savesAfterEveryChange: true)
            counter = PrivateEscrow.canRunCounter ? try PrivateEscrow.counter() : nil
            account =
                CloudAccount(
                    secretService: service.connection(),
                    directory: service.root.appendingPathComponent("device"),
                    cloud: cloud?.storage,
                    escrow: try cloud.map { try PrivateEscrow.of($0.escrowKey).configuration },
                    counter: counter?.configuration,
                    tuning: DeviceTuning(passcodeCost: .interactive, retryPolicy: RetryPolicy())
                )
            if !blockStore { try account.device.updateSettings { $0.blockStoreAvailable = false } }
            app = try App(
                id: "com.example.wallet",
                container: service.root.appendingPathComponent("containers/com.example.wallet"))
            hints = RecoveryHints(
                service: try RecoveryHintService.make(profile: profile, app: app, account: account)
            ) { _ in }
        }
    }

    static func welcome(_ hint: RecoveryHint) -> String {
        guard let wallet = hint.lastWallet else { return "\"Create a wallet\" (no hint found)." }
        return "\"Welcome back, your last wallet is \(wallet)\"."
    }

    /// The demo's cloud account: a directory or a WebDAV collection, and what names its escrow.
    struct DemoCloud {
        let storage: any CloudStorage
        let escrowKey: URL

        func listing() -> String {
            guard let names = try? storage.list() else { return "(unreachable)" }
            if names.isEmpty { return "(nothing)" }
            return names.map { $0.count > 20 ? String($0.prefix(14)) + "…" : $0 }.joined(
                separator: ", ")
        }
    }

    /// `keepsake status` in one line: the account, then Block Store's and the hint's copies.
    static func statusLine(_ demo: DemoDevice) -> String {
        let status = SyncStatus.read(app: demo.app, account: demo.account)
        func copies(_ store: StoreStatus) -> String {
            "\(store.local) here, \(store.cloud.map(String.init) ?? "-") in the cloud, "
                + "\(store.pending.map(String.init) ?? "-") pending"
        }
        let account =
            status.account.manifestVersion.map { "account verified (manifest v\($0))" }
            ?? "account not read"
        let why = status.account.notSyncing.map { "; nothing goes to the cloud: \($0)" } ?? ""
        return "keepsake status: \(account); blockstore \(copies(status.blockStore)); "
            + "hint \(copies(status.hint))\(why)"
    }

    static func show(_ phone: DemoDevice, cloud: DemoCloud, say: (String) -> Void) throws {
        let container = phone.app.container
        let files = Files.list(container)
        say(
            "   container:  "
                + (FileManager.default.fileExists(atPath: container.path)
                    ? (files.isEmpty ? "(empty)" : files.joined(separator: ", ")) : "(gone)"))
        let keychain = Keychain(app: phone.app, device: phone.device)
        let items = try keychain.listing(GenericPasswordQuery(service: KeychainHintStore.service))
        say(
            "   keychain:   "
                + (items.isEmpty
                    ? "(nothing)"
                    : items.map {
                        "\($0.attributes.service) / \($0.attributes.account) (\($0.attributes.accessible.commandLineName))"
                    }.joined(separator: ", ")))
        let entries = try BlockStoreClient(app: phone.app, device: phone.device).entries()
        say(
            "   blockstore: "
                + (entries.isEmpty
                    ? "(nothing)"
                    : entries.map { "\($0.key)\($0.shouldBackupToCloud ? " (backed up)" : "")" }
                        .joined(separator: ", ")))
    }
}
