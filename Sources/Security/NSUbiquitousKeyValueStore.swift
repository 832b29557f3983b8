// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (Apple's names: NSUbiquitousKeyValueStoreChangeReasonKey, … — the point of this file.)
import CloudAccount
import Device
import Foundation
import KeyValueStore
import Platform

/// Apple's `NSUbiquitousKeyValueStore` by its own name, as `SecItem…` are Apple's Keychain
/// functions: a thin layer over the key-value store's `UbiquitousKeyValueStore`, so that iOS code that
/// keeps values in iCloud's key-value store runs on Linux as written.
///
/// Values are property-list values — `String`, `Data`, `Date`, `Bool`, integers, `Double`/`Float`,
/// and arrays and dictionaries (`[String: Any]`) of them; any other value is refused and logged
/// (Apple raises). `synchronize()` exchanges with the cloud account now (Apple also does it on
/// its own schedule) and answers true when the values are persisted, signed in or not. A change
/// that arrives from another device is posted as `didChangeExternallyNotification` on
/// `NotificationCenter.default`, with this store as the object and Apple's `userInfo` keys.
public final class NSUbiquitousKeyValueStore: @unchecked Sendable {
    // Sendable: its only state is the underlying store, which is thread-safe.

    /// The store underneath (Keepsake's `UbiquitousKeyValueStore`).
    public let store: UbiquitousKeyValueStore

    /// A store over `store`'s app and account; `store`'s own external changes are not posted
    /// (the ones this wrapper's store makes are: see `init(app:account:)`).
    public init(store: UbiquitousKeyValueStore) {
        self.store = store
    }

    /// The store of `app` on `account`'s device, posting its external changes as
    /// `didChangeExternallyNotification` with itself as the object.
    public init(app: App, account: CloudAccount) {
        let poster = ChangePoster()
        store = UbiquitousKeyValueStore(app: app, account: account) { change in
            poster.post(change)
        }
        poster.object = self
    }

    /// The app's store, configured as `SecurityConfiguration` configures the Keychain: the app
    /// from `KEEPSAKE_APP_ID` (`local.keepsake.app` when unset) and `KEEPSAKE_CONTAINER`, the
    /// device directory `keepsake` uses by default (`$XDG_DATA_HOME/keepsake/device`, or
    /// `KEEPSAKE_DEVICE_DIR`), and the cloud account in `KEEPSAKE_CLOUD` (a directory, as
    /// `keepsake --cloud DIR`; unset: signed out, the values stay on the device). A test binds
    /// its own with `NSUbiquitousKeyValueStoreConfiguration.$current`.
    public class var `default`: NSUbiquitousKeyValueStore {
        if let current = NSUbiquitousKeyValueStoreConfiguration.current { return current }
        return NSUbiquitousKeyValueStoreConfiguration.fallback
    }

    // MARK: - Reading

    /// The value, as Foundation hands property-list values: `String`, `Data`, `Date`, `Bool`,
    /// `Int64`, `Double`, `[Any]`, `[String: Any]`; nil when absent.
    public func object(forKey aKey: String) -> Any? { store.object(forKey: aKey).map(Self.bridge) }

    /// The value when it is a string, else nil.
    public func string(forKey aKey: String) -> String? { object(forKey: aKey) as? String }
    /// The value when it is an array, else nil.
    public func array(forKey aKey: String) -> [Any]? { object(forKey: aKey) as? [Any] }
    /// The value when it is a dictionary, else nil.
    public func dictionary(forKey aKey: String) -> [String: Any]? {
        object(forKey: aKey) as? [String: Any]
    }
    /// The value when it is data, else nil.
    public func data(forKey aKey: String) -> Data? { object(forKey: aKey) as? Data }

    /// The value as a 64-bit integer; 0 when absent or not a number (Apple's).
    public func longLong(forKey aKey: String) -> Int64 {
        switch store.object(forKey: aKey) {
        case .int(let value): value
        case .double(let value) where value.isFinite && abs(value) < 9.2e18: Int64(value)
        case .bool(let value): value ? 1 : 0
        default: 0
        }
    }

    /// The value as a double; 0 when absent or not a number (Apple's).
    public func double(forKey aKey: String) -> Double {
        switch store.object(forKey: aKey) {
        case .double(let value): value
        case .int(let value): Double(value)
        case .bool(let value): value ? 1 : 0
        default: 0
        }
    }

    /// The value as a boolean; false when absent (Apple's: a number is true when not zero).
    public func bool(forKey aKey: String) -> Bool {
        switch store.object(forKey: aKey) {
        case .bool(let value): value
        case .int(let value): value != 0
        case .double(let value): value != 0
        case .string(let value): ["yes", "true", "1"].contains(value.lowercased())
        default: false
        }
    }

    /// Every key's value.
    public var dictionaryRepresentation: [String: Any] {
        store.dictionaryRepresentation.mapValues(Self.bridge)
    }

    // MARK: - Writing

    /// Sets (nil: removes) a property-list value. A value that is not one is refused, changing
    /// nothing, and logged on standard error (Apple raises `NSInvalidArgumentException`); a write
    /// over the quota changes nothing and posts a quota-violation change, as Apple's.
    public func set(_ anObject: Any?, forKey aKey: String) {
        guard let anObject else { return removeObject(forKey: aKey) }
        guard let value = Self.value(anObject) else {
            FileHandle.standardError.write(
                Data(
                    "NSUbiquitousKeyValueStore: a \(type(of: anObject)) is not a property-list value; \(aKey.debugDescription) not set\n"
                        .utf8))
            return
        }
        store.set(value, forKey: aKey)
    }

    /// Sets a string (nil: removes).
    public func set(_ aString: String?, forKey aKey: String) { set(aString as Any?, forKey: aKey) }
    /// Sets data (nil: removes).
    public func set(_ aData: Data?, forKey aKey: String) { set(aData as Any?, forKey: aKey) }
    /// Sets an array of property-list values (nil: removes).
    public func set(_ anArray: [Any]?, forKey aKey: String) { set(anArray as Any?, forKey: aKey) }
    /// Sets a dictionary of property-list values (nil: removes).
    public func set(_ aDictionary: [String: Any]?, forKey aKey: String) {
        set(aDictionary as Any?, forKey: aKey)
    }
    /// Sets a 64-bit integer.
    public func set(_ value: Int64, forKey aKey: String) { store.set(.int(value), forKey: aKey) }
    /// Sets a double.
    public func set(_ value: Double, forKey aKey: String) {
        store.set(.double(value), forKey: aKey)
    }
    /// Sets a boolean.
    public func set(_ value: Bool, forKey aKey: String) { store.set(.bool(value), forKey: aKey) }

    /// Removes the key's value.
    public func removeObject(forKey aKey: String) { store.removeObject(forKey: aKey) }

    /// Exchanges with the cloud account now. True when the values are persisted (every write is,
    /// at once, in the device's cache), signed in or not; false when the cache cannot be read or
    /// written. What could not reach the cloud goes at a later `synchronize()`.
    @discardableResult
    public func synchronize() -> Bool {
        do { try store.checkedSynchronize() } catch {
            if error.code == .notPersisted { return false }
            // Signed out, no end-to-end encryption, the cloud unreachable: the values are still
            // persisted on the device, which is what Apple's answer says.
        }
        return true
    }

    // MARK: - Notifications

    /// Posted on `NotificationCenter.default` when values changed from outside this process's
    /// writes: another device's (server change), the first exchange with an account (initial
    /// sync), a write over the quota (quota violation), another account (account change).
    public static let didChangeExternallyNotification =
        NSUbiquitousKeyValueStoreDidChangeExternallyNotification

    // MARK: - Bridging

    /// A Foundation value as a stored value; nil for what is not a property-list value.
    static func value(_ object: Any) -> KVValue? {
        switch object {
        case let value as KVValue: return value
        case let value as String: return .string(value)
        case let value as Data: return .data(value)
        case let value as Date: return .date(value)
        case let value as Bool: return .bool(value)
        case let value as Int: return .int(Int64(value))
        case let value as Int64: return .int(value)
        case let value as Int32: return .int(Int64(value))
        case let value as Int16: return .int(Int64(value))
        case let value as Int8: return .int(Int64(value))
        case let value as UInt8: return .int(Int64(value))
        case let value as UInt16: return .int(Int64(value))
        case let value as UInt32: return .int(Int64(value))
        case let value as UInt where value <= UInt(Int64.max): return .int(Int64(value))
        case let value as UInt64 where value <= UInt64(Int64.max): return .int(Int64(value))
        case let value as Double: return .double(value)
        case let value as Float: return .double(Double(value))
        case let value as NSNumber: return .double(value.doubleValue)
        case let value as [Any]:
            var items: [KVValue] = []
            for item in value {
                guard let converted = Self.value(item) else { return nil }
                items.append(converted)
            }
            return .array(items)
        case let value as [String: Any]:
            var entries: [String: KVValue] = [:]
            for (key, item) in value {
                guard let converted = Self.value(item) else { return nil }
                entries[key] = converted
            }
            return .dictionary(entries)
        default: return nil
        }
    }

    /// A stored value as Foundation hands it.
    static func bridge(_ value: KVValue) -> Any {
        switch value {
        case .string(let value): value
        case .data(let value): value
        case .date(let value): value
        case .int(let value): value
        case .double(let value): value
        case .bool(let value): value
        case .array(let items): items.map(bridge)
        case .dictionary(let entries): entries.mapValues(bridge)
        }
    }
}

/// Apple's `NSUbiquitousKeyValueStoreDidChangeExternallyNotification`.
public let NSUbiquitousKeyValueStoreDidChangeExternallyNotification = Notification.Name(
    "NSUbiquitousKeyValueStoreDidChangeExternallyNotification")
/// `userInfo` key: why the values changed (an `Int`: one of the four reasons below).
public let NSUbiquitousKeyValueStoreChangeReasonKey = "NSUbiquitousKeyValueStoreChangeReasonKey"
/// `userInfo` key: the keys whose values changed (`[String]`).
public let NSUbiquitousKeyValueStoreChangedKeysKey = "NSUbiquitousKeyValueStoreChangedKeysKey"
/// Another device changed values.
public let NSUbiquitousKeyValueStoreServerChange = 0
/// The first exchange with the account brought values in.
public let NSUbiquitousKeyValueStoreInitialSyncChange = 1
/// A write over the quota (1024 keys, 1 MB, keys of 64 bytes) was refused.
public let NSUbiquitousKeyValueStoreQuotaViolationChange = 2
/// The account changed.
public let NSUbiquitousKeyValueStoreAccountChange = 3

/// Which store `NSUbiquitousKeyValueStore.default` is: a task-local override for tests, else the
/// process-wide one made on first use from the environment (see `default`).
public enum NSUbiquitousKeyValueStoreConfiguration {
    /// The store `default` answers in this task (bound with `$current.withValue`); nil: the
    /// process-wide one.
    @TaskLocal public static var current: NSUbiquitousKeyValueStore?

    static let fallback: NSUbiquitousKeyValueStore = {
        let environment = ProcessInfo.processInfo.environment
        let id = environment["KEEPSAKE_APP_ID"] ?? "local.keepsake.app"
        let container =
            environment["KEEPSAKE_CONTAINER"].map { URL(fileURLWithPath: $0) }
            ?? UserDirectories.container(of: id)
        let deviceDirectory =
            environment["KEEPSAKE_DEVICE_DIR"].map { URL(fileURLWithPath: $0) }
            ?? UserDirectories.device
        // An app id that is not reverse DNS: the local fallback app, so that reads answer nil
        // and writes go nowhere visible, as an iOS app without the entitlement sees.
        let app =
            (try? App(id: id, container: container))
            ?? (try! App(id: "local.keepsake.app", container: container))
        let cloud = environment["KEEPSAKE_CLOUD"].flatMap { $0.isEmpty ? nil : $0 }.map {
            CloudDirectory(URL(fileURLWithPath: $0)) as any CloudStorage
        }
        let account = CloudAccount(
            secretService: .shared(), directory: deviceDirectory, cloud: cloud)
        return NSUbiquitousKeyValueStore(app: app, account: account)
    }()
}

/// Posts a store's external changes as Apple's notification, with the store as the object.
private final class ChangePoster: @unchecked Sendable {
    // Sendable: `object` is set once, in the store's initializer, before any change can come.
    weak var object: NSUbiquitousKeyValueStore?

    func post(_ change: KVExternalChange) {
        NotificationCenter.default.post(
            name: NSUbiquitousKeyValueStoreDidChangeExternallyNotification, object: object,
            userInfo: [
                NSUbiquitousKeyValueStoreChangeReasonKey: change.reason.rawValue,
                NSUbiquitousKeyValueStoreChangedKeysKey: change.changedKeys,
            ])
    }
}
