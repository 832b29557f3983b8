// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (Apple's C names: SecItemAdd, CFErrorGetCode, … — the point of this module.)
import Device
import Foundation
import Keychain

/// Which Keychain the `SecItem…` functions act on.
///
/// Apple derives the app from its signature; here the process says it. `current` is task-local so
/// that tests can run apps side by side; otherwise the process-wide default is used, built on
/// first use from `KEEPSAKE_APP_ID` (an app id; `local.keepsake.app` when unset), its extra access
/// groups from `KEEPSAKE_ACCESS_GROUPS` (comma-separated, as an entitlements file lists them) and
/// the Secret Service on `DBUS_SESSION_BUS_ADDRESS`.
public enum SecurityConfiguration {
    /// The Keychain this task's `SecItem…` calls use (bound with `$current.withValue`); nil: the
    /// process-wide default.
    @TaskLocal public static var current: Keychain?

    private static let fallback: Keychain? = {
        let environment = ProcessInfo.processInfo.environment
        let id = environment["KEEPSAKE_APP_ID"] ?? "local.keepsake.app"
        let container = URL(fileURLWithPath: environment["KEEPSAKE_CONTAINER"] ?? ".")
        // The app's extra access groups, as an entitlements file gives them: its own id first.
        let extra = (environment["KEEPSAKE_ACCESS_GROUPS"] ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && $0 != id }
        guard let app = try? App(id: id, container: container, accessGroups: [id] + extra) else {
            return nil
        }
        return Keychain(app: app)
    }()

    static func keychain() throws(KeychainError) -> Keychain {
        if let current { return current }
        guard let fallback else {
            throw KeychainError(KeychainStatus.param, "KEEPSAKE_APP_ID is not a reverse-DNS app id")
        }
        return fallback
    }
}

/// Runs one SecItem call: parse, act, map every failure to its OSStatus (its whole error kept
/// as this thread's `SecItemDiagnostics.lastFailure`).
private func status(_ body: () throws(KeychainError) -> Void) -> OSStatus {
    do {
        try body()
        return errSecSuccess
    } catch {
        // The error itself: its text is made only when a test asks (a miss is a frequent answer).
        Thread.current.threadDictionary[SecItemDiagnostics.key] = error
        return error.status.rawValue
    }
}

/// What an `OSStatus` alone does not say: the whole error of this thread's last failed SecItem
/// call, for a test's failure message (Keepsake's errors carry no secret).
package enum SecItemDiagnostics {
    fileprivate static let key = "keepsake.secItem.lastFailure"
    package static var lastFailure: String {
        (Thread.current.threadDictionary[key] as? KeychainError)?.description ?? "none"
    }
}

/// What the `kSecReturn…` keys ask for.
private struct Returns {
    var data: Bool
    var attributes: Bool
    var persistentRef: Bool

    init(_ dictionary: QueryDictionary) throws(KeychainError) {
        data = try dictionary.bool(kSecReturnData) ?? false
        attributes = try dictionary.bool(kSecReturnAttributes) ?? false
        persistentRef = try dictionary.bool(kSecReturnPersistentRef) ?? false
        _ = try dictionary.bool(kSecReturnRef)  // a boolean, and no reference to return
    }

    var any: Bool { data || attributes || persistentRef }

    /// One item as Apple returns it: a dictionary when attributes or more than one kind were
    /// asked for, else the data or the persistent reference alone.
    func value(_ item: GenericPasswordItem) -> AnyObject {
        if attributes || (data && persistentRef) {
            let dictionary =
                QueryDictionary.attributeDictionary(item, withData: data)
                .mutableCopy() as! NSMutableDictionary
            if !attributes {
                let keep: Set<String> = [kSecValueData as String, kSecValuePersistentRef as String]
                for key in dictionary.allKeys.compactMap({ $0 as? String })
                where !keep.contains(key) {
                    dictionary.removeObject(forKey: key)
                }
            }
            if !persistentRef { dictionary.removeObject(forKey: kSecValuePersistentRef as String) }
            return dictionary
        }
        if persistentRef { return PersistentReference.data(item.persistentID) as NSData }
        return (item.data ?? Data()) as NSData
    }

    /// The result object for `items`: one value for `…One`, an array otherwise.
    func result(_ items: [GenericPasswordItem], asArray: Bool) -> CFTypeRef? {
        guard any else { return nil }
        let values = items.map(value)
        return asArray ? values as NSArray : values.first
    }
}

/// Mirrors `SecItemAdd` for generic and internet passwords.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?)
    -> OSStatus
{
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(attributes)
        try dictionary.checkKeys(for: .add)
        let itemClass = try dictionary.checkClass(for: .add)
        let item = try dictionary.attributes()
        let data = try dictionary.data(kSecValueData)  // nil: an item without data, as on iOS
        let returns = try Returns(dictionary)
        let authentication = try dictionary.authentication()
        let keychain = try SecurityConfiguration.keychain()
        let id = try keychain.add(item, data: data, authentication: authentication)
        if let result, returns.any {
            var stored = try keychain.items(
                matching: GenericPasswordQuery(
                    synchronizable: .any, persistentID: id, itemClass: itemClass),
                returnData: false)[0]
            if returns.data { stored.data = data }  // what was just given, not a second use
            result.pointee = returns.result([stored], asArray: false)
        }
    }
}

/// Mirrors `SecItemCopyMatching` for generic and internet passwords.
public func SecItemCopyMatching(
    _ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?
) -> OSStatus {
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(query)
        try dictionary.checkKeys(for: .query)
        try dictionary.checkClass(for: .query)
        let parsed = try dictionary.query()
        let (limit, count) = try dictionary.matchLimit()
        let returns = try Returns(dictionary)
        var items = try SecurityConfiguration.keychain().items(
            matching: parsed, limit: limit, returnData: returns.data,
            authentication: try dictionary.authentication())
        if let count { items = Array(items.prefix(count)) }
        result?.pointee = returns.result(items, asArray: limit == .all)
    }
}

/// Mirrors `SecItemUpdate` for generic and internet passwords.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(query)
        try dictionary.checkKeys(for: .update)
        try dictionary.checkClass(for: .update)
        let changes = try QueryDictionary(attributesToUpdate)
        try changes.checkKeys(for: .changes)
        try SecurityConfiguration.keychain().update(
            matching: try dictionary.query(), with: try changes.changes(),
            authentication: try dictionary.authentication())
    }
}

/// Mirrors `SecItemDelete` for generic and internet passwords.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(query)
        try dictionary.checkKeys(for: .delete)
        try dictionary.checkClass(for: .delete)
        try SecurityConfiguration.keychain().delete(matching: try dictionary.query())
    }
}

/// Mirrors `SecCopyErrorMessageString`: Apple's message for the status (for a number Apple does
/// not name, `OSStatus <n>`).
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?)
    -> CFString?
{
    KeychainStatus(status).message as NSString
}
