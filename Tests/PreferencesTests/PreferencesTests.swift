import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Platform
import Preferences
import Testing

struct RuleCase: Decodable, Sendable, CustomTestStringConvertible {
    var name: String
    var file: String?
    var xml: String?
    var e2ee: Bool?
    var cloud: [String]?
    var transfer: [String]?
    var error: String?
    var testDescription: String { name }
}
private struct RuleFile: Decodable { var cases: [RuleCase] }
private func ruleCases() throws -> [RuleCase] {
    try fixtureTable(RuleFile.self, "backup-rules/cases.json", \.cases, atLeast: 5)
}

private func document(_ c: RuleCase) throws -> Data {
    if let file = c.file {
        return try Data(
            contentsOf: fixturesDirectory.appendingPathComponent("backup-rules/\(file)"))
    }
    return Data(c.xml!.utf8)
}

private let sampleFiles = [
    "databases/wallet.db", "files/cache/tmp.bin", "files/notes.txt",
    "shared_prefs/recovery_hint.xml",
    "shared_prefs/settings.xml",
]

/// An Android phone: a device with its own Secret Service, one app.
private struct Android {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }
    let app: App

    init(cloud: URL? = nil) throws {
        service = try PrivateSecretService.start()
        account = service.account(cloud: cloud)
        app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
    }

    func backup(_ rules: String = "data_extraction_rules.xml", allowBackup: Bool = true) throws
        -> AutoBackup
    {
        let xml = try Data(
            contentsOf: fixturesDirectory.appendingPathComponent("backup-rules/\(rules)"))
        return AutoBackup(
            app: app, account: account,
            configuration: try BackupConfiguration.parse(xml, allowBackup: allowBackup))
    }

    func writePrefs(_ name: String, _ values: [String: String]) throws {
        var prefs = try SharedPreferences(app: app, name: name)
        for (k, v) in values { prefs.putString(v, forKey: k) }
        try prefs.commit()
    }
}

@Suite("Backup rules from Fixtures/backup-rules")
struct BackupRuleTests {
    @Test(
        "each document selects the expected files, or is refused with a clear error",
        arguments: try ruleCases())
    func rules(_ c: RuleCase) throws {
        do {
            let configuration = try BackupConfiguration.parse(try document(c))
            #expect(c.error == nil, "expected an error about \(c.error ?? "")")
            #expect(
                configuration.select(
                    sampleFiles, forTransfer: false, endToEndEncryption: c.e2ee ?? false) == c.cloud
            )
            #expect(
                configuration.select(
                    sampleFiles, forTransfer: true, endToEndEncryption: c.e2ee ?? false)
                    == c.transfer)
        } catch let error as PreferencesError {
            let expected = try #require(c.error, "unexpected error \(error)")
            #expect(error.description.contains(expected), "\(error)")
        }
    }

    @Test("inputs the fuzzer found are refused cleanly (Fixtures/fuzz/backup-rules)")
    func fuzzRegressions() throws {
        let directory = fixturesDirectory.appendingPathComponent("fuzz/backup-rules")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.isEmpty)
        for name in names {
            #expect(throws: PreferencesError.self) {
                try BackupConfiguration.parse(
                    try Data(contentsOf: directory.appendingPathComponent(name)))
            }
        }
    }

    @Test("allowBackup false takes nothing")
    func allowBackupFalse() throws {
        let configuration = try BackupConfiguration.parse(
            Data("<full-backup-content/>".utf8), allowBackup: false)
        #expect(
            configuration.select(sampleFiles, forTransfer: false, endToEndEncryption: true).isEmpty)
        #expect(
            configuration.select(sampleFiles, forTransfer: true, endToEndEncryption: true).isEmpty)
    }
}

@Suite("SharedPreferences and Auto Backup")
struct AutoBackupTests {
    @Test("preferences live in the container in Android's format and are gone at uninstall")
    func preferences() throws {
        let phone = try Android()
        try phone.writePrefs("recovery_hint", ["hint": "{\"lastWallet\":\"a<b&c\"}"])
        let text = try String(
            contentsOf: phone.app.container.appendingPathComponent(
                "shared_prefs/recovery_hint.xml"), encoding: .utf8)
        #expect(
            text.contains(
                "<string name=\"hint\">{&quot;lastWallet&quot;:&quot;a&lt;b&amp;c&quot;}</string>"))
        #expect(
            try SharedPreferences(app: phone.app, name: "recovery_hint").string(forKey: "hint")
                == "{\"lastWallet\":\"a<b&c\"}")
        try phone.device.uninstall(phone.app)
        #expect(
            try SharedPreferences(app: phone.app, name: "recovery_hint").string(forKey: "hint")
                == nil)
    }

    @Test("keys and values with tabs, line ends, markup and quotes survive commit and reopen")
    func whitespaceRoundTrip() throws {
        let phone = try Android()
        let values = [
            "tab\tkey": "a\tb", "line\nkey": "first\nsecond", "cr\rkey": "x\r\ny",
            "<&\"'>": "  leading and trailing  ", "ünïcödé ✓": "",
        ]
        try phone.writePrefs("odd", values)
        #expect(try SharedPreferences(app: phone.app, name: "odd").values == values)
    }

    @Test("the backup is restored at reinstall before first launch, only the files the rules take")
    func restoreAtReinstall() throws {
        let phone = try Android()
        try phone.writePrefs("recovery_hint", ["hint": "kept"])
        try phone.writePrefs("settings", ["theme": "dark"])
        let report = try phone.backup("full_backup_content.xml").backup()
        #expect(report.files == ["shared_prefs/recovery_hint.xml"] && report.cloud == false)
        try phone.device.uninstall(phone.app)
        #expect(
            try phone.backup("full_backup_content.xml").restoreIfNeeded() == [
                "shared_prefs/recovery_hint.xml"
            ])
        #expect(
            try SharedPreferences(app: phone.app, name: "recovery_hint").string(forKey: "hint")
                == "kept")
        #expect(
            try SharedPreferences(app: phone.app, name: "settings").string(forKey: "theme") == nil)
        // Not on a running install: the container has files.
        #expect(try phone.backup("full_backup_content.xml").restoreIfNeeded() == [])
    }

    @Test(
        "with data-extraction-rules and no E2EE nothing is backed up to the cloud; with a pin it is, sealed"
    )
    func cloudOnlyWithE2EE() throws {
        let cloud = Throwaway.untrusted("cloud")
        let phone = try Android(cloud: cloud)
        try phone.writePrefs("recovery_hint", ["hint": "the hint"])
        #expect(try phone.backup().backup().files == [])
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
        try phone.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let report = try phone.backup().backup()
        #expect(report.files == ["shared_prefs/recovery_hint.xml"] && report.cloud)
        for name in try FileManager.default.contentsOfDirectory(atPath: cloud.path) {
            #expect(
                try Data(contentsOf: cloud.appendingPathComponent(name)).range(
                    of: Data("the hint".utf8)) == nil)
        }
        // A new device that joined restores the app's backup from the cloud at install.
        let other = try Android(cloud: cloud)
        try other.account.join(passcode: "1234")
        #expect(try other.backup().restoreIfNeeded() == ["shared_prefs/recovery_hint.xml"])
        #expect(
            try SharedPreferences(app: other.app, name: "recovery_hint").string(forKey: "hint")
                == "the hint")
    }

    @Test("a backup over 25 MB is refused whole")
    func quota() throws {
        let phone = try Android()
        try Files.writeAtomically(
            Data(count: 20 * 1024 * 1024),
            to: phone.app.container.appendingPathComponent("files/a.bin"))
        try Files.writeAtomically(
            Data(count: 6 * 1024 * 1024),
            to: phone.app.container.appendingPathComponent("files/b.bin"))
        let backup = AutoBackup(app: phone.app, account: phone.account, configuration: .everything)
        #expect(throws: PreferencesError.self) { try backup.backup() }
        try FileManager.default.removeItem(
            at: phone.app.container.appendingPathComponent("files/b.bin"))
        #expect(try backup.backup().files == ["files/a.bin"])
    }

    @Test("device-to-device transfer carries the device-transfer files even with cloud backup off")
    func deviceTransfer() throws {
        let phone = try Android()
        try phone.writePrefs("recovery_hint", ["hint": "carried"])
        try phone.writePrefs("settings", ["theme": "dark"])
        let payload = try phone.backup().transferOut()  // no E2EE: cloud backup is off
        let other = try Android()
        try other.backup().transferIn(payload)
        #expect(
            try SharedPreferences(app: other.app, name: "recovery_hint").string(forKey: "hint")
                == "carried")
        #expect(
            try SharedPreferences(app: other.app, name: "settings").string(forKey: "theme") == nil)
    }

    @Test("a tampered local backup is refused, never restored wrong")
    func tamperedBackup() throws {
        let phone = try Android()
        try phone.writePrefs("recovery_hint", ["hint": "kept"])
        try phone.backup("full_backup_content.xml").backup()
        let file = phone.device.appDataDirectory(phone.app, store: "autobackup")
            .appendingPathComponent("backup")
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count / 2] ^= 1
        try bytes.write(to: file)
        try phone.device.uninstall(phone.app)
        #expect(throws: PreferencesError.self) {
            try phone.backup("full_backup_content.xml").restoreIfNeeded()
        }
        #expect(
            try SharedPreferences(app: phone.app, name: "recovery_hint").string(forKey: "hint")
                == nil)
    }
}
