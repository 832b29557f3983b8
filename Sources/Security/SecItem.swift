import Device
import Foundation
import Keychain

/// Which Keychain the `SecItem…` functions act on.
///
/// Apple derives the app from its signature; here the process says it. `current` is task-local so
/// that tests can run apps side by side; otherwise the process-wide default is used, built on
/// first use from `KEEPSAKE_APP_ID` (an app id; `local.keepsake.app` when unset) and the Secret
/// Service on `DBUS_SESSION_BUS_ADDRESS`.
public enum SecurityConfiguration {
    @TaskLocal public static var current: Keychain?

    private static let fallback: Keychain? = {
        let environment = ProcessInfo.processInfo.environment
        let id = environment["KEEPSAKE_APP_ID"] ?? "local.keepsake.app"
        let container = URL(fileURLWithPath: environment["KEEPSAKE_CONTAINER"] ?? ".")
        guard let app = try? App(id: id, container: container) else { return nil }
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

/// Runs one SecItem call: parse, act, map every failure to its OSStatus.
private func status(_ body: () throws(KeychainError) -> Void) -> OSStatus {
    do {
        try body()
        return errSecSuccess
    } catch {
        return error.status.rawValue
    }
}

/// What `kSecReturnData` / `kSecReturnAttributes` ask for, as a result object.
private func result(
    for items: [GenericPasswordItem], limit: MatchLimit, data: Bool, attributes: Bool
) -> CFTypeRef? {
    guard data || attributes else { return nil }
    let values: [AnyObject] = items.map { item in
        attributes
            ? QueryDictionary.attributeDictionary(item, withData: data)
            : (item.data ?? Data()) as NSData
    }
    return limit == .one ? values.first : values as NSArray
}

/// Mirrors `SecItemAdd` for `kSecClassGenericPassword`.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?)
    -> OSStatus
{
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(attributes)
        try dictionary.checkKeys(for: .add)
        try dictionary.checkClass()
        let item = try dictionary.attributes()
        let data = try dictionary.data(kSecValueData) ?? Data()
        let returnData = try dictionary.bool(kSecReturnData) ?? false
        let returnAttributes = try dictionary.bool(kSecReturnAttributes) ?? false
        let keychain = try SecurityConfiguration.keychain()
        try keychain.add(item, data: data)
        if let result, returnData || returnAttributes {
            let stored = try keychain.item(
                matching: GenericPasswordQuery(
                    service: item.service, account: item.account,
                    accessGroup: item.accessGroup ?? keychain.app.accessGroups[0],
                    synchronizable: item.synchronizable ? .yes : .no))
            result.pointee = Security.result(
                for: [stored], limit: .one, data: returnData, attributes: returnAttributes)
        }
    }
}

/// Mirrors `SecItemCopyMatching` for `kSecClassGenericPassword`.
public func SecItemCopyMatching(
    _ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?
) -> OSStatus {
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(query)
        try dictionary.checkKeys(for: .query)
        try dictionary.checkClass()
        let parsed = try dictionary.query()
        let limit = try dictionary.matchLimit()
        let returnData = try dictionary.bool(kSecReturnData) ?? false
        let returnAttributes = try dictionary.bool(kSecReturnAttributes) ?? false
        let items = try SecurityConfiguration.keychain().items(
            matching: parsed, limit: limit, returnData: returnData)
        result?.pointee = Security.result(
            for: items, limit: limit, data: returnData, attributes: returnAttributes)
    }
}

/// Mirrors `SecItemUpdate` for `kSecClassGenericPassword`.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(query)
        try dictionary.checkKeys(for: .update)
        try dictionary.checkClass()
        let changes = try QueryDictionary(attributesToUpdate)
        try changes.checkKeys(for: .changes)
        try SecurityConfiguration.keychain().update(
            matching: try dictionary.query(), with: try changes.changes())
    }
}

/// Mirrors `SecItemDelete` for `kSecClassGenericPassword`.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    status { () throws(KeychainError) in
        let dictionary = try QueryDictionary(query)
        try dictionary.checkKeys(for: .delete)
        try dictionary.checkClass()
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
