import Foundation
import Sealing

/// KeePassXC started headless for a `PrivateSecretService` (PROVIDERS.md): a database whose one
/// exposed group is the Secret Service's collection, made once with `keepassxc-cli import` from
/// KeePass XML (the only way to set `FDO_SECRETS_EXPOSED_GROUP`), integration on, its
/// confirmations as asked.
struct KeePassXCLaunch {
    let service: PrivateSecretService

    /// Makes the database and settings on first use, then runs KeePassXC on them.
    func start() throws {
        let database = service.root.appendingPathComponent("keepsake.kdbx")
        let config = service.root.appendingPathComponent("keepassxc.ini")
        if !FileManager.default.fileExists(atPath: database.path) {
            let group = UUID()
            let rootGroup = UUID()
            func base64(_ uuid: UUID) -> String {
                withUnsafeBytes(of: uuid.uuid) { Data($0).base64EncodedString() }
            }
            let xml = service.root.appendingPathComponent("keepsake.xml")
            try """
            <?xml version="1.0" encoding="utf-8" standalone="yes"?>
            <KeePassFile><Meta><Generator>keepsake</Generator><DatabaseName>keepsake</DatabaseName>
            <CustomData><Item><Key>FDO_SECRETS_EXPOSED_GROUP</Key><Value>{\(group.uuidString.lowercased())}</Value></Item></CustomData>
            </Meta><Root><Group><UUID>\(base64(rootGroup))</UUID><Name>Root</Name>
            <Group><UUID>\(base64(group))</UUID><Name>Secrets</Name></Group></Group></Root></KeePassFile>
            """.write(to: xml, atomically: true, encoding: .utf8)
            try """
            [General]
            SingleInstance=false
            ConfigVersion=2
            AutoSaveAfterEveryChange=\(service.savesAfterEveryChange)
            AutoSaveOnExit=true
            [GUI]
            ShowTrayIcon=false
            CheckForUpdates=false
            [Browser]
            Enabled=false
            [FdoSecrets]
            Enabled=true
            \(service.keepassxcConfirmations.settings)
            [Security]
            LockDatabaseIdle=false
            LockDatabaseScreenLock=false
            """.write(to: config, atomically: true, encoding: .utf8)
            let imported = try Spawn.capture(
                try PrivateSecretService.tool("keepassxc-cli").path,
                ["import", "-q", "-p", xml.path, database.path], environment: service.environment,
                input: Data("\(service.masterPassword)\n\(service.masterPassword)\n".utf8))
            guard imported.status == 0 else {
                throw HarnessError("keepassxc-cli import failed (apt-get install keepassxc)")
            }
        }
        var env = service.environment
        env["KEEPSAKE_MASTER_PASSWORD"] = service.masterPassword
        env["QT_QPA_PLATFORM"] = "offscreen"
        env["XDG_CONFIG_HOME"] = service.home.appendingPathComponent(".config").path
        let keepass = try Daemon(
            "printf '%s\\n' \"$KEEPSAKE_MASTER_PASSWORD\" | env -u KEEPSAKE_MASTER_PASSWORD "
                + "\(try PrivateSecretService.tool("keepassxc").path) --config \(config.path) --localconfig \(config.path) "
                + "--pw-stdin \(database.path)",
            environment: env)
        service.adopt(keepass)
        let probe = service.connection(timeout: .seconds(2))
        try PrivateSecretService.wait(
            "KeePassXC to own org.freedesktop.secrets, its database open", seconds: 30
        ) {
            (try? probe.isLocked(.default)) == false
        }
    }
}

/// KWallet started headless for a `PrivateSecretService` (PROVIDERS.md): kwalletrc with the Secret
/// Service API on and every dialog off; the wallet made and opened the way pam_kwallet does
/// (`pamOpen` with a pre-hashed password); kwalletd5 lists over the Secret Service only wallets
/// that existed when it started, so a new wallet means one restart; then one client `Unlock`
/// (secret-tool's) completes without a dialog.
struct KWalletLaunch {
    let service: PrivateSecretService

    /// Runs kwalletd5 with its wallet open, unlocked over the Secret Service and settled.
    func start() throws {
        let config = service.home.appendingPathComponent(".config")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try """
        [Wallet]
        First Use=false
        Enabled=true
        Close When Idle=false
        Leave Open=true
        Prompt on Open=false
        Launch Manager=false
        Default Wallet=kdewallet

        [org.freedesktop.secrets]
        apiEnabled=true
        """.write(to: config.appendingPathComponent("kwalletrc"), atomically: true, encoding: .utf8)
        let wallet = service.dataHome.appendingPathComponent("kwalletd/kdewallet.kwl")
        let isNew = !FileManager.default.fileExists(atPath: wallet.path)
        try runRetrying()
        if isNew {
            service.stopProvider()
            try runRetrying()
        }
        // One client unlock (Unlock, then its prompt, which KWallet completes on its own).
        let probe = service.connection(timeout: .seconds(2))
        try PrivateSecretService.wait(
            "KWallet to open its wallet over the Secret Service", seconds: 30
        ) {
            if let reply = try? service.run(
                "gdbus",
                [
                    "call", "--session", "--timeout", "5", "--dest", "org.freedesktop.secrets",
                    "--object-path",
                    "/org/freedesktop/secrets", "--method", "org.freedesktop.Secret.Service.Unlock",
                    "['/org/freedesktop/secrets/aliases/default']",
                ]),
                let prompt = String(decoding: reply, as: UTF8.self).split(separator: "'").first(
                    where: { $0.hasPrefix("/org/freedesktop/secrets/prompt/") })
            {
                _ = try? service.run(
                    "gdbus",
                    [
                        "call", "--session", "--timeout", "5", "--dest", "org.freedesktop.secrets",
                        "--object-path",
                        String(prompt), "--method", "org.freedesktop.Secret.Prompt.Prompt", "",
                    ])
            }
            return (try? probe.isLocked(.default)) == false
        }
        // Settled: an item created now is found at the path its creation answered. Right after
        // the wallet opens, kwalletd can still register its entries under paths of its own, and a
        // search then answers another path for an item a test just made (seen under load).
        try PrivateSecretService.wait(
            "KWallet to answer a search with the path it created", seconds: 30
        ) {
            let marker = UUID().uuidString
            guard
                let made = try? probe.createItem(
                    label: "keepsake-settle-\(marker)", attributes: ["keepsake-settle": marker],
                    secret: Data())
            else { return false }
            let found = try? probe.search(["keepsake-settle": marker]).unlocked
            for path in Set((found ?? []) + [made]) { try? probe.deleteItem(at: path) }
            return found == [made]
        }
    }

    /// kwalletd5 now and then never takes `pamOpen` on a busy machine: started again, it does.
    private func runRetrying() throws {
        try HarnessError.retrying(run, afterFailure: service.stopProvider)
    }

    /// Starts kwalletd5 and opens (or makes) the wallet with `pamOpen`.
    private func run() throws {
        let daemon = try Daemon(
            "exec \(try PrivateSecretService.tool("kwalletd5").path)",
            environment: service.kwalletEnvironment)
        service.adopt(daemon)
        // The 56-byte hash pam_kwallet would derive from the login password; any stable bytes do
        // for a throwaway wallet.
        let fixed = SecureBytes(copying: Data(repeating: 0x4B, count: 32))
        let hash = Array(
            (["kwallet-1", "kwallet-2"].map {
                KeyDerivation.keyedHash(key: fixed, context: $0, Data(service.masterPassword.utf8))
                    .unsafeData()
            }.reduce(Data(), +)).prefix(56))
        let bytes =
            "[" + hash.map { String(format: "byte 0x%02x", $0) }.joined(separator: ",") + "]"
        try PrivateSecretService.wait("kwalletd5 to take pamOpen", seconds: 12) {
            (try? service.run(
                "gdbus",
                [
                    "call", "--session", "--timeout", "5", "--dest", "org.kde.kwalletd5",
                    "--object-path",
                    "/modules/kwalletd5", "--method", "org.kde.KWallet.pamOpen", "kdewallet",
                    bytes, "0",
                ])) != nil
        }
        // The Service answering (its collections): a new wallet is no collection yet.
        try PrivateSecretService.wait("KWallet to own org.freedesktop.secrets", seconds: 30) {
            (try? service.run(
                "gdbus",
                [
                    "call", "--session", "--timeout", "2", "--dest", "org.freedesktop.secrets",
                    "--object-path", "/org/freedesktop/secrets", "--method",
                    "org.freedesktop.DBus.Properties.Get", "org.freedesktop.Secret.Service",
                    "Collections",
                ])) != nil
        }
    }
}
