import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Synchronization
import Testing

@testable import Keychain

/// A device with a pin and one app, on its own Secret Service.
private struct PinPhone {
    let service: PrivateSecretService
    let device: Device
    let keychain: Keychain
    static let pin: SecureBytes = "2468"

    init(pin: Bool = true) throws {
        service = try PrivateSecretService.start()
        // A passcode use writes the device record twice: on a loaded machine that can take a
        // while; the bound itself is the fault suites' business.
        device = service.device(timeout: .seconds(20), retryPolicy: .fast)
        keychain = Keychain(app: try ThrowawayApp.make(), device: device)
        if pin { try device.setLockScreen(.pin, passcode: Self.pin, currentPasscode: nil) }
    }

    func add(
        _ account: String, _ constraints: AccessConstraints, _ data: String = "secret",
        authentication: ItemAuthentication = .none
    ) throws {
        try keychain.add(
            GenericPasswordAttributes(service: "acl", account: account, accessControl: constraints),
            data: Data(data.utf8), authentication: authentication)
    }

    /// "ok:<data>" or the status.
    func read(_ account: String, _ authentication: ItemAuthentication = .none) -> String {
        var result = ""
        let code = status {
            result = String(
                decoding: try keychain.data(
                    matching: GenericPasswordQuery(service: "acl", account: account),
                    authentication: authentication),
                as: UTF8.self)
        }
        return code == .success ? "ok:" + result : "\(code)"
    }

    func failures() throws -> Int { try device.status().failedAttempts }
}

private func passcode(_ pin: SecureBytes) -> ItemAuthentication {
    ItemAuthentication(passcode: pin)
}
private func password(_ text: String) -> ItemAuthentication {
    ItemAuthentication(applicationPassword: SecureBytes(copying: Array(text.utf8)))
}

@Suite("Access control: items that need the passcode or the app's password at each use")
struct AccessControlTests {
    let interaction = "\(KeychainStatus.interactionNotAllowed)"
    let authFailed = "\(KeychainStatus.authFailed)"

    @Test(
        "a .devicePasscode item is added without the passcode, read only with it, a wrong one is a counted guess, and the right one reports it (reportWrongPasscodes)"
    )
    func devicePasscode() throws {
        let phone = try PinPhone()
        try phone.add("p", .devicePasscode)
        // Unlocked, but no passcode given for this use: nobody can be asked.
        #expect(phone.read("p") == interaction)
        #expect(phone.read("p", passcode("1111")) == authFailed)
        #expect(try phone.failures() == 1)
        // The right one reports the wrong one before it, as an unlock does; then nothing more.
        let told = Mutex<[Int]>([])
        var reporting = passcode(PinPhone.pin)
        reporting.reportWrongPasscodes = { wrong in told.withLock { $0.append(wrong.count) } }
        #expect(phone.read("p", reporting) == "ok:secret")
        #expect(told.withLock { $0 } == [1])
        #expect(try phone.failures() == 0)
        #expect(phone.read("p", reporting) == "ok:secret")
        #expect(told.withLock { $0 } == [1])
        // Attributes alone need no credential, as on Apple platforms.
        let item = try phone.keychain.items(
            matching: GenericPasswordQuery(service: "acl", account: "p"), returnData: false)[0]
        #expect(item.data == nil && item.attributes.accessControl == .devicePasscode)
        // .userPresence is biometry or the passcode; without biometric hardware, the passcode.
        try phone.add("u", .userPresence)
        #expect(phone.read("u") == interaction)
        #expect(phone.read("u", passcode(PinPhone.pin)) == "ok:secret")
    }

    @Test(
        "an unlocked device alone never opens a passcode item: its key is sealed to a key no runtime state holds"
    )
    func notFromRuntimeState() throws {
        let phone = try PinPhone()
        try phone.add("p", .devicePasscode, "only with the pin")
        // The stored record's data is the sealed blob, not the secret.
        let paths = try phone.keychain.secretService.search(["service": "acl"]).unlocked
        let stored = try phone.keychain.secretService.secrets(at: paths)[paths[0]]!
        var keys: [ProtectionClass: SecureBytes] = [:]
        keys[.whenUnlocked] = try phone.device.classKey(.whenUnlocked)
        let record = try SealedItem.parse(stored).open(key: keys[.whenUnlocked]!)
        #expect(!record.data.isEmpty)
        #expect(record.data.range(of: Data("only with the pin".utf8)) == nil)
        #expect(
            status {
                _ = try ProtectedData.open(
                    record.data, constraints: .devicePasscode,
                    credentials: .init(presencePublicKey: try phone.device.presencePublicKey()))
            } == KeychainStatus.authFailed)
        // A flipped constraint flag in the record does not open either.
        #expect(
            status {
                _ = try ProtectedData.open(
                    record.data, constraints: .userPresence,
                    credentials: .init(
                        presencePublicKey: try phone.device.presencePublicKey(),
                        presenceSecretKey: try phone.device.presenceSecretKey(
                            passcode: PinPhone.pin
                        ).key))
            } == KeychainStatus.authFailed)
    }

    @Test("wrong passcodes on protected items count toward the same guess limit as unlocking")
    func sharedGuessLimit() throws {
        let phone = try PinPhone()
        try phone.add("p", .devicePasscode)
        #expect(phone.read("p", passcode("0000")) == authFailed)
        #expect(status { try phone.device.unlock(passcode: "0001") } == KeychainStatus.authFailed)
        #expect(try phone.failures() == 2)
        // The next attempt waits out the growing delay, then the right pin opens the item.
        #expect(phone.read("p", passcode(PinPhone.pin)) == "ok:secret")
    }

    @Test(
        "passcode items survive a passcode change and a reboot; without a passcode they cannot be added"
    )
    func passcodeChange() throws {
        let phone = try PinPhone()
        try phone.add("p", .devicePasscode)
        try phone.device.setLockScreen(.pin, passcode: "1357", currentPasscode: PinPhone.pin)
        try phone.device.reboot()
        try phone.device.unlock(passcode: "1357")
        #expect(phone.read("p", passcode(PinPhone.pin)) == authFailed)
        #expect(phone.read("p", passcode("1357")) == "ok:secret")

        let bare = try PinPhone(pin: false)
        #expect(status { try bare.add("p", .devicePasscode) } == KeychainStatus.authFailed)
        #expect(try bare.keychain.secretService.search(["service": "acl"]).unlocked.isEmpty)
    }

    @Test(
        ".applicationPassword items are sealed under the app's password: needed to add and to read")
    func applicationPassword() throws {
        let phone = try PinPhone(pin: false)
        #expect(status { try phone.add("a", .applicationPassword) } == KeychainStatus.authFailed)
        try phone.add("a", .applicationPassword, authentication: password("open sesame"))
        #expect(phone.read("a") == interaction)
        #expect(phone.read("a", password("wrong")) == authFailed)
        #expect(phone.read("a", password("open sesame")) == "ok:secret")
    }

    @Test("several constraints: all are needed unless .or; with .or either opens")
    func conjunctions() throws {
        let phone = try PinPhone()
        let both = ItemAuthentication(
            passcode: PinPhone.pin, applicationPassword: SecureBytes(copying: Array("pw".utf8)))
        try phone.add("and", [.devicePasscode, .applicationPassword], authentication: both)
        #expect(phone.read("and", passcode(PinPhone.pin)) == interaction)
        #expect(phone.read("and", password("pw")) == interaction)
        #expect(
            phone.read(
                "and",
                ItemAuthentication(
                    passcode: PinPhone.pin,
                    applicationPassword: SecureBytes(copying: Array("no".utf8)))) == authFailed)
        #expect(phone.read("and", both) == "ok:secret")

        try phone.add("or", [.devicePasscode, .or, .applicationPassword], authentication: both)
        #expect(phone.read("or", passcode(PinPhone.pin)) == "ok:secret")
        #expect(phone.read("or", password("pw")) == "ok:secret")
        #expect(phone.read("or") == interaction)
    }

    @Test(
        "biometry: as on a Mac without Touch ID, alone it never opens; or'ed with the passcode, the passcode opens"
    )
    func biometry() throws {
        let phone = try PinPhone()
        try phone.add("bio", .biometryAny)
        #expect(phone.read("bio", passcode(PinPhone.pin)) == authFailed)
        try phone.add("bio-or", [.biometryCurrentSet, .or, .devicePasscode])
        #expect(phone.read("bio-or", passcode(PinPhone.pin)) == "ok:secret")
    }

    @Test(
        "skipping: a query told to skip items needing authentication leaves them out instead of failing"
    )
    func skip() throws {
        let phone = try PinPhone()
        try phone.keychain.add(
            GenericPasswordAttributes(service: "acl", account: "plain"), data: Data("p".utf8))
        try phone.add("p", .devicePasscode)
        let items = try phone.keychain.items(
            matching: GenericPasswordQuery(service: "acl"), limit: .all,
            authentication: ItemAuthentication(skipItemsNeedingAuthentication: true))
        #expect(items.map(\.attributes.account) == ["plain"])
        #expect(
            status {
                _ = try phone.keychain.items(
                    matching: GenericPasswordQuery(service: "acl"), limit: .all)
            } == KeychainStatus.interactionNotAllowed)
    }

    @Test("new data for a protected item needs its credentials; attribute changes do not; no sync")
    func updates() throws {
        let phone = try PinPhone()
        try phone.add("p", .devicePasscode)
        let query = GenericPasswordQuery(service: "acl", account: "p")
        #expect(
            status {
                try phone.keychain.update(
                    matching: query, with: GenericPasswordChanges(data: Data("new".utf8)))
            } == KeychainStatus.interactionNotAllowed)
        try phone.keychain.update(matching: query, with: GenericPasswordChanges(label: "renamed"))
        try phone.keychain.update(
            matching: query, with: GenericPasswordChanges(data: Data("new".utf8)),
            authentication: passcode(PinPhone.pin))
        #expect(phone.read("p", passcode(PinPhone.pin)) == "ok:new")
        // Items with constraints stay on the device, as on Apple platforms.
        #expect(
            status {
                try phone.keychain.add(
                    GenericPasswordAttributes(
                        service: "acl", account: "s", synchronizable: true,
                        accessControl: .devicePasscode), data: Data())
            } == KeychainStatus.param)
        #expect(
            status {
                try phone.keychain.update(
                    matching: query, with: GenericPasswordChanges(synchronizable: true))
            } == KeychainStatus.param)
        #expect(
            status { try phone.add("k", .privateKeyUsage) } == KeychainStatus.param)
        #expect(
            status { try phone.add("k", [.or, .and, .devicePasscode]) } == KeychainStatus.param)
    }
}
