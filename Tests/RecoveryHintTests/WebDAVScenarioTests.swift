import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import RecoveryHint
import Synchronization
import Testing

/// A device of its own (private Secret Service, kernel keyring) on a WebDAV account, with the
/// account's escrow service.
private struct WebDAVPhone {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }
    let app: App

    init(cloud: WebDAVCloud, escrow: PrivateEscrow) throws {
        service = try PrivateSecretService.start()
        account = service.account(
            cloud: cloud, escrow: escrow.configuration, timeout: .seconds(20), tuning: .fast)
        app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
    }

    var hints: RecoveryHints {
        get throws {
            RecoveryHints(
                service: try RecoveryHintService.make(profile: .linux, app: app, account: account))
        }
    }

    func syncAll() throws {
        _ = try BlockStoreSync(account: account).sync()
        _ = try KeychainSync(account: account).sync()
    }
}

@Suite(
    "Two devices on one Apache mod_dav account (TLS, basic auth)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct WebDAVScenarioTests {
    @Test(
        "the hint set on the phone is welcomed back on new devices joined with the passcode, by approval and with the recovery key"
    )
    func everyJoinPath() throws {
        let server = try PrivateWebDAV.start(tls: true)
        defer { server.stop() }
        let escrow = try PrivateEscrow()
        let phone = try WebDAVPhone(cloud: try server.cloud(), escrow: escrow)
        let recoveryKey = try #require(
            try phone.account.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
                .recoveryKey)
        let hint = RecoveryHint(
            lastAuthenticatorId: "passkey-7", lastWallet: demoWallet, lastLoginAt: 1_795_000_000_000
        )
        try phone.hints.set(hint)
        try phone.syncAll()

        for path in ["passcode", "approval", "recovery key"] {
            let tablet = try WebDAVPhone(cloud: try server.cloud(), escrow: escrow)
            try tablet.account.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
            #expect(try tablet.hints.get() == .empty)
            switch path {
            case "passcode": try tablet.account.join(passcode: "4711")
            case "approval":
                try phone.account.approve(tablet.account, timeout: .seconds(20))
            default: try tablet.account.join(recoveryKey: recoveryKey)
            }
            _ = try BlockStoreSync(account: tablet.account).restore()
            _ = try KeychainSync(account: tablet.account).sync()
            #expect(try tablet.hints.get() == hint, "joined with \(path)")
        }
        // What the server holds is sealed.
        for file in try FileManager.default.subpathsOfDirectory(atPath: server.documentRoot.path) {
            guard
                let bytes = FileManager.default.contents(
                    atPath: server.documentRoot.appendingPathComponent(file).path)
            else { continue }
            for plain in [demoWallet, "passkey-7", "com.example.wallet"] {
                #expect(bytes.range(of: Data(plain.utf8)) == nil, "\(file) holds \(plain)")
            }
        }
    }

    @Test(
        "both devices syncing at once, round after round, lose nothing: each ends with every entry of both"
    )
    func concurrentSyncs() throws {
        let server = try PrivateWebDAV.start()
        defer { server.stop() }
        let escrow = try PrivateEscrow()
        let phone = try WebDAVPhone(cloud: try server.cloud(), escrow: escrow)
        let recoveryKey = try #require(
            try phone.account.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
                .recoveryKey)
        let tablet = try WebDAVPhone(cloud: try server.cloud(), escrow: escrow)
        try tablet.account.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
        try tablet.account.join(recoveryKey: recoveryKey)

        let failures = Mutex<[String]>([])
        let rounds = 6
        let group = DispatchGroup()
        for (name, device) in [("phone", phone), ("tablet", tablet)] {
            group.enter()
            Thread {
                defer { group.leave() }
                let client = BlockStoreClient(app: device.app, device: device.device)
                for round in 0..<rounds {
                    do {
                        try client.storeBytes(
                            StoreBytesData(
                                bytes: Data("\(name) \(round)".utf8), key: "\(name)-\(round)",
                                shouldBackupToCloud: true))
                        _ = try BlockStoreSync(account: device.account).sync()
                    } catch {
                        failures.withLock { $0.append("\(name) \(round): \(error)") }
                    }
                }
            }.start()
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        let all = Set(["phone", "tablet"].flatMap { name in (0..<rounds).map { "\(name)-\($0)" } })
        // Apache's mod_dav_fs grants overlapping exclusive locks now and then under concurrent
        // LOCKs, so two syncs may run at once: neither may remove what the other uploaded
        // (StrayObjects), and the manifest's compare-and-swap merges their lists.
        for (name, device) in [("phone", phone), ("tablet", tablet)] {
            _ = try BlockStoreSync(account: device.account).restore()
            let entries = try BlockStoreClient(app: device.app, device: device.device).entries()
            #expect(
                entries.count == 2 * rounds,
                "\(name) lacks \(all.subtracting(entries.map(\.key)).sorted())")
        }
    }
}
