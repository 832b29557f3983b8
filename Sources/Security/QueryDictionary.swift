import Foundation
import Keychain

/// Turns an Apple keychain dictionary into the Keychain's typed values. Every rule about which
/// `kSec…` key is allowed where, and with which value type, lives here.
///
/// Unknown keys, wrong value types and classes other than generic password are refused before
/// anything is read or written: `errSecParam`, or `errSecUnimplemented` for Apple keys and classes
/// Keepsake does not implement.
struct QueryDictionary {
    private var entries: [String: Any]

    init(_ dictionary: CFDictionary) throws(KeychainError) {
        var entries: [String: Any] = [:]
        for (key, value) in dictionary {
            guard let key = key as? String else {
                throw KeychainError(KeychainStatus.param, "a dictionary key is not a string")
            }
            guard let value = Self.unwrap(value) else {
                throw KeychainError(KeychainStatus.param, "\(key) is nil")
            }
            entries[key] = value
        }
        self.entries = entries
    }

    /// `kCFBooleanTrue` is implicitly unwrapped; inside `Any` it arrives as an Optional.
    private static func unwrap(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first.flatMap { unwrap($0.value) }
    }

    enum Purpose { case add, query, update, delete, changes }

    private static let attributeKeys: Set<String> = [
        kSecAttrService, kSecAttrAccount, kSecAttrAccessGroup, kSecAttrSynchronizable,
        kSecAttrAccessible, kSecAttrLabel, kSecAttrComment, kSecAttrDescription, kSecAttrGeneric,
    ].map { $0 as String }.reduce(into: []) { $0.insert($1) }
    private static let unimplementedKeys: Set<String> = [
        kSecAttrCreator, kSecAttrType, kSecAttrIsInvisible, kSecAttrIsNegative,
        kSecAttrAccessControl, kSecReturnRef, kSecReturnPersistentRef, kSecValueRef,
        kSecValuePersistentRef, kSecMatchCaseInsensitive, kSecUseAuthenticationContext,
    ].map { $0 as String }.reduce(into: []) { $0.insert($1) }

    /// Checks every key against what `purpose` allows.
    func checkKeys(for purpose: Purpose) throws(KeychainError) {
        var allowed = Self.attributeKeys
        allowed.insert(kSecUseDataProtectionKeychain as String)
        switch purpose {
        case .add:
            allowed.formUnion(
                [kSecClass, kSecValueData, kSecReturnData, kSecReturnAttributes].map {
                    $0 as String
                })
        case .query:
            allowed.formUnion(
                [kSecClass, kSecReturnData, kSecReturnAttributes, kSecMatchLimit].map {
                    $0 as String
                })
        case .update, .delete:
            allowed.insert(kSecClass as String)
            if purpose == .delete { allowed.insert(kSecMatchLimit as String) }
        case .changes:
            allowed.insert(kSecValueData as String)
            allowed.remove(kSecUseDataProtectionKeychain as String)
        }
        for key in entries.keys.sorted() where !allowed.contains(key) {
            if Self.unimplementedKeys.contains(key) {
                throw KeychainError(KeychainStatus.unimplemented, "\(key) is not implemented")
            }
            throw KeychainError(KeychainStatus.param, "\(key) is not allowed here")
        }
    }

    /// The item class must be generic password.
    func checkClass() throws(KeychainError) {
        guard let value = entries[kSecClass as String] else {
            throw KeychainError(KeychainStatus.param, "kSecClass is missing")
        }
        guard let itemClass = value as? String else {
            throw KeychainError(KeychainStatus.param, "kSecClass is not a string")
        }
        if itemClass == kSecClassGenericPassword as String { return }
        let otherClasses = [
            kSecClassInternetPassword, kSecClassCertificate, kSecClassKey, kSecClassIdentity,
        ].map { $0 as String }
        if otherClasses.contains(itemClass) {
            throw KeychainError(
                KeychainStatus.unimplemented, "only kSecClassGenericPassword is implemented")
        }
        throw KeychainError(KeychainStatus.param, "unknown kSecClass")
    }

    // MARK: - Typed values

    func string(_ key: CFString) throws(KeychainError) -> String? {
        guard let value = entries[key as String] else { return nil }
        guard let string = value as? String, !(value is NSNumber) else {
            throw KeychainError(KeychainStatus.param, "\(key) must be a string")
        }
        return string
    }

    func data(_ key: CFString) throws(KeychainError) -> Data? {
        guard let value = entries[key as String] else { return nil }
        guard let data = value as? Data else {
            throw KeychainError(KeychainStatus.param, "\(key) must be data")
        }
        return data
    }

    func bool(_ key: CFString) throws(KeychainError) -> Bool? {
        guard let value = entries[key as String] else { return nil }
        if let bool = value as? Bool, !(value is String) { return bool }
        throw KeychainError(KeychainStatus.param, "\(key) must be a boolean")
    }

    func synchronizable() throws(KeychainError) -> SynchronizableMatch? {
        guard let value = entries[kSecAttrSynchronizable as String] else { return nil }
        if let string = value as? String, !(value is NSNumber) {
            guard string == kSecAttrSynchronizableAny as String else {
                throw KeychainError(
                    KeychainStatus.param, "kSecAttrSynchronizable must be a boolean or …Any")
            }
            return .any
        }
        guard let bool = try bool(kSecAttrSynchronizable) else { return nil }
        return bool ? .yes : .no
    }

    func accessible() throws(KeychainError) -> Accessibility? {
        guard let raw = try string(kSecAttrAccessible) else { return nil }
        guard let accessible = Accessibility(rawValue: raw) else {
            throw KeychainError(KeychainStatus.param, "unknown kSecAttrAccessible value")
        }
        return accessible
    }

    func matchLimit() throws(KeychainError) -> MatchLimit {
        guard let value = entries[kSecMatchLimit as String] else { return .one }
        if let string = value as? String, !(value is NSNumber) {
            if string == kSecMatchLimitOne as String { return .one }
            if string == kSecMatchLimitAll as String { return .all }
            throw KeychainError(KeychainStatus.param, "unknown kSecMatchLimit value")
        }
        if let number = value as? Int, number == 1 { return .one }
        throw KeychainError(KeychainStatus.unimplemented, "numeric kSecMatchLimit other than 1")
    }

    // MARK: - Whole values

    func query() throws(KeychainError) -> GenericPasswordQuery {
        GenericPasswordQuery(
            service: try string(kSecAttrService), account: try string(kSecAttrAccount),
            accessGroup: try string(kSecAttrAccessGroup),
            synchronizable: try synchronizable() ?? .no, accessible: try accessible(),
            label: try string(kSecAttrLabel), comment: try string(kSecAttrComment),
            itemDescription: try string(kSecAttrDescription), generic: try data(kSecAttrGeneric))
    }

    func attributes() throws(KeychainError) -> GenericPasswordAttributes {
        let synchronizable: Bool
        switch try self.synchronizable() {
        case .any:
            throw KeychainError(
                KeychainStatus.param, "kSecAttrSynchronizableAny is for queries, not for add")
        case .yes: synchronizable = true
        case .no, nil: synchronizable = false
        }
        return GenericPasswordAttributes(
            service: try string(kSecAttrService) ?? "", account: try string(kSecAttrAccount) ?? "",
            accessGroup: try string(kSecAttrAccessGroup), synchronizable: synchronizable,
            accessible: try accessible() ?? .whenUnlocked, label: try string(kSecAttrLabel),
            comment: try string(kSecAttrComment), itemDescription: try string(kSecAttrDescription),
            generic: try data(kSecAttrGeneric))
    }

    func changes() throws(KeychainError) -> GenericPasswordChanges {
        var synchronizable: Bool?
        switch try self.synchronizable() {
        case .any:
            throw KeychainError(
                KeychainStatus.param, "kSecAttrSynchronizableAny cannot be set on an item")
        case .yes: synchronizable = true
        case .no: synchronizable = false
        case nil: synchronizable = nil
        }
        return GenericPasswordChanges(
            service: try string(kSecAttrService), account: try string(kSecAttrAccount),
            accessGroup: try string(kSecAttrAccessGroup), synchronizable: synchronizable,
            accessible: try accessible(), label: try string(kSecAttrLabel),
            comment: try string(kSecAttrComment), itemDescription: try string(kSecAttrDescription),
            generic: try data(kSecAttrGeneric), data: try data(kSecValueData))
    }

    /// The result an item becomes under `kSecReturnAttributes`: Apple's keys, Foundation values.
    static func attributeDictionary(_ item: GenericPasswordItem, withData: Bool) -> NSDictionary {
        let a = item.attributes
        var result: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: a.service,
            kSecAttrAccount as String: a.account,
            kSecAttrAccessGroup as String: a.accessGroup ?? "",
            kSecAttrSynchronizable as String: NSNumber(value: a.synchronizable),
            kSecAttrAccessible as String: a.accessible.rawValue,
        ]
        result[kSecAttrLabel as String] = a.label
        result[kSecAttrComment as String] = a.comment
        result[kSecAttrDescription as String] = a.itemDescription
        result[kSecAttrGeneric as String] = a.generic
        result[kSecAttrCreationDate as String] = a.creationDate
        result[kSecAttrModificationDate as String] = a.modificationDate
        if withData { result[kSecValueData as String] = item.data ?? Data() }
        return result as NSDictionary
    }
}
