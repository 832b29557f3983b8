// Apple-style code as an iOS plugin keeps a small record in two places that outlive the app:
// iCloud's key-value store and a synchronizable keychain item. Written for iOS — only
// `import Foundation` and `import Security` — with only the edit Linux forces (the observer in
// its block form: no `@objc` selectors). It must compile and behave the same on Linux.
import Foundation
import Security

// `@unchecked Sendable`: Swift 6's language mode asks it of a class its observer captures, on
// Apple's platforms as here; the observer's one write happens on the posting thread.
final class AppleStyleHintPlugin: @unchecked Sendable {
    static let key = "recoveryHint"
    private let store: NSUbiquitousKeyValueStore
    private var observer: NSObjectProtocol?
    /// What the last external change said: its reason and keys.
    private(set) var lastChange: (reason: Int, keys: [String])?

    struct EmptyHint: Error {}

    init(store: NSUbiquitousKeyValueStore = .default) {
        self.store = store
        observer = NotificationCenter.default.addObserver(
            forName: NSUbiquitousKeyValueStore.didChangeExternallyNotification, object: store,
            queue: nil
        ) { [weak self] notification in
            let reason = notification.userInfo?[NSUbiquitousKeyValueStoreChangeReasonKey] as? Int
            let keys = notification.userInfo?[NSUbiquitousKeyValueStoreChangedKeysKey] as? [String]
            self?.lastChange = (reason ?? -1, keys ?? [])
        }
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
    }

    /// Writes both places; an empty record is refused.
    func set(_ hint: [String: Any]) throws {
        guard !hint.isEmpty else { throw EmptyHint() }
        let data = try JSONSerialization.data(withJSONObject: hint, options: [.sortedKeys])
        store.set(data, forKey: Self.key)
        store.synchronize()
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: "recovery-hint",
            kSecAttrAccount as String: "hint",
            kSecAttrSynchronizable as String: kCFBooleanTrue!,
        ]
        var add = query
        add[kSecValueData as String] = data
        add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
        if SecItemAdd(add as CFDictionary, nil) == errSecDuplicateItem {
            _ = SecItemUpdate(
                query as CFDictionary, [kSecValueData as String: data] as CFDictionary)
        }
    }

    /// Reads either: the keychain item, else the key-value store, else `[:]`.
    func get() -> [String: Any] {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: "recovery-hint",
            kSecAttrAccount as String: "hint",
            kSecAttrSynchronizable as String: kCFBooleanTrue!,
            kSecReturnData as String: kCFBooleanTrue!,
            kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: CFTypeRef?
        let data =
            SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess
            ? result as? Data : store.data(forKey: Self.key)
        guard let data,
            let hint = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return hint
    }

    /// Removes the keychain item only (what a keychain reset leaves behind).
    func forgetKeychainItem() {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: "recovery-hint",
            kSecAttrAccount as String: "hint",
            kSecAttrSynchronizable as String: kCFBooleanTrue!,
        ]
        _ = SecItemDelete(query as CFDictionary)
    }

    /// Clears both places.
    func clear() {
        forgetKeychainItem()
        store.removeObject(forKey: Self.key)
        store.synchronize()
    }
}
