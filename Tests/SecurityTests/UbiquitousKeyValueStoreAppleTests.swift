import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import KeyValueStore
import Platform
import Security
import Synchronization
import Testing

/// A device with the app's Keychain and key-value store, bound as `SecurityConfiguration` and
/// `NSUbiquitousKeyValueStoreConfiguration` bind them for a task.
private struct ApplePhone {
    let service: PrivateSecretService
    let account: CloudAccount
    let app: App
    let store: NSUbiquitousKeyValueStore
    let keychain: Keychain

    init(cloud: URL?, joining: Bool = false) throws {
        service = try PrivateSecretService.start()
        account = service.account(cloud: cloud)
        app = try App(
            id: "com.example.wallet", container: service.root.appendingPathComponent("container"))
        if cloud != nil {
            try account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
            if joining { try account.join(passcode: "1234") }
        }
        store = NSUbiquitousKeyValueStore(app: app, account: account)
        keychain = Keychain(app: app, device: account.device)
    }

    /// Runs `body` as this device's app: `default` and the `SecItem…` functions are its.
    func run<R>(_ body: () throws -> R) rethrows -> R {
        try NSUbiquitousKeyValueStoreConfiguration.$current.withValue(store) {
            try SecurityConfiguration.$current.withValue(keychain) { try body() }
        }
    }
}

@Suite("NSUbiquitousKeyValueStore by Apple's name, beside SecItem")
struct UbiquitousKeyValueStoreAppleTests {
    @Test(
        "an Apple-style plugin: get on a fresh device is [:], {} is refused, set writes both, get falls back to the key-value store"
    )
    func onePhone() throws {
        let phone = try ApplePhone(cloud: nil)
        try phone.run {
            let plugin = AppleStyleHintPlugin()
            #expect(plugin.get().isEmpty)
            #expect(throws: AppleStyleHintPlugin.EmptyHint.self) { try plugin.set([:]) }
            try plugin.set(["lastWallet": "0x8a3f000000000000000000000000000000000000"])
            #expect(
                plugin.get()["lastWallet"] as? String
                    == "0x8a3f000000000000000000000000000000000000")
            #expect(NSUbiquitousKeyValueStore.default.data(forKey: AppleStyleHintPlugin.key) != nil)
            // The keychain item gone: the key-value store answers.
            plugin.forgetKeychainItem()
            #expect(
                plugin.get()["lastWallet"] as? String
                    == "0x8a3f000000000000000000000000000000000000")
            plugin.clear()
            #expect(plugin.get().isEmpty)
            // Signed out, synchronize still answers true: the values are persisted.
            #expect(NSUbiquitousKeyValueStore.default.synchronize())
        }
    }

    @Test("Apple's typed setters and getters, property-list values only, dictionaryRepresentation")
    func values() throws {
        let phone = try ApplePhone(cloud: nil)
        let store = phone.store
        store.set("text", forKey: "s")
        store.set(Int64(42), forKey: "i")
        store.set(2.5, forKey: "d")
        store.set(true, forKey: "b")
        store.set(Data([0, 1, 2]), forKey: "data")
        store.set(["a", 1, ["k": false]] as [Any], forKey: "array")
        store.set(
            ["when": Date(timeIntervalSince1970: 1_700_000_000)] as [String: Any], forKey: "dict")
        #expect(store.string(forKey: "s") == "text")
        #expect(store.longLong(forKey: "i") == 42 && store.double(forKey: "i") == 42)
        #expect(store.double(forKey: "d") == 2.5)
        #expect(store.bool(forKey: "b") && !store.bool(forKey: "absent"))
        #expect(store.longLong(forKey: "absent") == 0)
        #expect(store.data(forKey: "data") == Data([0, 1, 2]))
        let array = try #require(store.array(forKey: "array"))
        #expect(array.count == 3 && array[0] as? String == "a" && array[1] as? Int64 == 1)
        #expect((array[2] as? [String: Any])?["k"] as? Bool == false)
        #expect(
            store.dictionary(forKey: "dict")?["when"] as? Date
                == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(store.string(forKey: "i") == nil)
        // Not a property-list value: refused, nothing changed (Apple raises).
        store.set(NSObject(), forKey: "s")
        store.set([NSObject()] as [Any], forKey: "s")
        #expect(store.string(forKey: "s") == "text")
        store.set(nil as Any?, forKey: "s")
        #expect(store.object(forKey: "s") == nil)
        store.removeObject(forKey: "i")
        #expect(Set(store.dictionaryRepresentation.keys) == ["d", "b", "data", "array", "dict"])
        withExtendedLifetime(phone) {}
    }

    @Test(
        "a change from another device arrives as Apple's notification: server change, the key, the store as its object"
    )
    func twoPhones() throws {
        let cloud = Throwaway.untrusted("cloud")
        let first = try ApplePhone(cloud: cloud)
        let second = try ApplePhone(cloud: cloud, joining: true)
        let secondPlugin = second.run { AppleStyleHintPlugin() }
        let posted = Mutex<[(object: ObjectIdentifier?, reason: Int?, keys: [String]?)]>([])
        let observer = NotificationCenter.default.addObserver(
            forName: NSUbiquitousKeyValueStore.didChangeExternallyNotification, object: nil,
            queue: nil
        ) { notification in
            let object = (notification.object as? NSUbiquitousKeyValueStore).map(
                ObjectIdentifier.init)
            posted.withLock {
                $0.append(
                    (
                        object,
                        notification.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int,
                        notification.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String]
                    ))
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        #expect(second.store.synchronize())  // the first exchange: nothing there yet
        try first.run {
            try AppleStyleHintPlugin().set(["lastAuthenticatorId": "passkey-7"])
        }
        #expect(second.store.synchronize())
        let seen = posted.withLock { $0 }.filter { $0.object == ObjectIdentifier(second.store) }
        #expect(seen.last?.reason == NSUbiquitousKeyValueStoreServerChange, "\(seen)")
        #expect(seen.last?.keys == [AppleStyleHintPlugin.key])
        #expect(secondPlugin.lastChange?.reason == NSUbiquitousKeyValueStoreServerChange)
        #expect(secondPlugin.lastChange?.keys == [AppleStyleHintPlugin.key])
        // The second device reads it: its keychain item has not arrived (no keychain sync yet),
        // the key-value store answers.
        #expect(second.run { secondPlugin.get()["lastAuthenticatorId"] as? String } == "passkey-7")
    }

    @Test("a value written through it is the one `keepsake kv get` prints, and the reverse")
    func commandLine() throws {
        let phone = try ApplePhone(cloud: nil)
        let keepsake = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("keepsake")
        var environment = phone.service.environment
        environment["PATH"] = "/usr/bin:/bin"
        let arguments = [
            "--app-id", phone.app.id, "--container", phone.app.container.path, "--device-dir",
            phone.account.device.directory.path,
        ]
        phone.store.set(Data("from-swift".utf8), forKey: "k")
        let read = try Spawn.capture(
            keepsake.path, ["kv", "get", "--key", "k"] + arguments, environment: environment)
        #expect(String(decoding: read.stdout, as: UTF8.self) == "from-swift")
        let written = try Spawn.capture(
            keepsake.path, ["kv", "set", "--key", "other"] + arguments, environment: environment,
            input: Data("from-the-command-line".utf8))
        #expect(written.status == 0)
        // Another process's write is seen at synchronize(), as Apple's.
        phone.store.synchronize()
        #expect(phone.store.string(forKey: "other") == "from-the-command-line")
    }
}
