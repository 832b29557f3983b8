import Foundation
import Keychain
import LocalAuthentication

/// Turns an Apple keychain dictionary into the Keychain's typed values. Every rule about which
/// `kSec…` key is allowed where, and with which value type, lives here.
///
/// Keys that are no `kSec…` key are ignored, as Apple ignores them; wrong value types are
/// `errSecParam`; Apple keys Keepsake does not implement are `errSecUnimplemented` (refused rather
/// than ignored where ignoring would store less or match more than asked). Generic and internet
/// passwords are kept; for the other classes (certificates, keys, identities) adding is
/// `errSecUnimplemented`, finding, updating and deleting answer `errSecItemNotFound`, as Apple
/// does for a keychain holding none of them.
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

    private static let attributeKeys = Set(
        [kSecAttrSynchronizable, kSecAttrAccessible].map { $0 as String }
            + ItemAttribute.all.filter { !$0.location }.map(\.secKey))
    /// Internet passwords' own attributes.
    private static let internetKeys = Set(ItemAttribute.all.filter(\.location).map(\.secKey))
    /// Apple's keys Keepsake refuses with `errSecUnimplemented`: those of this list the
    /// attribute table (`ItemAttribute`) does not hold.
    private static let unimplementedKeys = Set(
        [
            kSecAttrCreator, kSecAttrType, kSecAttrIsInvisible, kSecAttrIsNegative, kSecValueRef,
            kSecMatchCaseInsensitive, kSecMatchItemList, kSecMatchSearchList,
            kSecAttrKeyClass, kSecAttrApplicationLabel, kSecAttrApplicationTag,
            kSecAttrKeySizeInBits, kSecAttrTokenID,
        ].map { $0 as String }
    ).subtracting(ItemAttribute.all.map(\.secKey))
    /// Accepted everywhere: the authentication context and user-interface choice are read where
    /// an item's access constraints need them (`authentication()`); there is no user interface
    /// to show a prompt in, and the keychain is always the data-protection one.
    private static let acceptedKeys: Set<String> = [
        kSecUseDataProtectionKeychain, kSecUseAuthenticationUI, kSecUseNoAuthenticationUI,
        kSecUseOperationPrompt, kSecUseAuthenticationContext,
    ].map { $0 as String }.reduce(into: []) { $0.insert($1) }

    /// Checks every key against what `purpose` allows.
    func checkKeys(for purpose: Purpose) throws(KeychainError) {
        var allowed = Self.attributeKeys.union(Self.acceptedKeys).union(Self.internetKeys)
        allowed.insert(kSecAttrAccessControl as String)
        let returns = [kSecReturnData, kSecReturnAttributes, kSecReturnPersistentRef].map {
            $0 as String
        }
        switch purpose {
        case .add:
            allowed.formUnion([kSecClass as String, kSecValueData as String] + returns)
        case .query:
            // kSecReturnRef: passwords have no item reference on iOS; asked for, none is
            // returned (as iOS does) rather than failing the whole query. kSecValueData in a
            // query (code that reuses its add dictionary) is ignored, as on Apple platforms:
            // items are never matched by their secret.
            allowed.formUnion(
                [
                    kSecClass as String, kSecMatchLimit as String, kSecValueData as String,
                    kSecValuePersistentRef as String, kSecReturnRef as String,
                ] + returns)
        case .update, .delete:
            allowed.formUnion(
                [kSecClass as String, kSecValuePersistentRef as String, kSecValueData as String])
            // A delete ignores return keys, as Apple's does (the "delete, then add the same
            // dictionary" idiom passes them); an update refuses them (errSecParam, as Apple's).
            if purpose == .delete {
                allowed.formUnion([kSecMatchLimit as String, kSecReturnRef as String] + returns)
            }
        case .changes:
            allowed.insert(kSecValueData as String)
            allowed.subtract(Self.acceptedKeys)
        }
        for key in entries.keys.sorted() where !allowed.contains(key) {
            if Self.unimplementedKeys.contains(key) {
                throw KeychainError(KeychainStatus.unimplemented, "\(key) is not implemented")
            }
            if Self.knownKeys.contains(key) {
                throw KeychainError(KeychainStatus.param, "\(key) is not allowed here")
            }
            // Not a kSec… key at all: ignored, as Apple ignores it.
        }
    }

    /// Every `kSec…` key this module knows (so that anything else is recognisably foreign).
    private static let knownKeys: Set<String> = attributeKeys.union(unimplementedKeys).union(
        acceptedKeys
    ).union(internetKeys).union(
        [
            kSecClass, kSecValueData, kSecReturnData, kSecReturnAttributes, kSecReturnPersistentRef,
            kSecReturnRef,
            kSecValuePersistentRef, kSecMatchLimit, kSecAttrAccessControl, kSecAttrCreationDate,
            kSecAttrModificationDate,
        ].map { $0 as String })

    /// The item class: generic or internet password. Another Apple class: adding is
    /// `errSecUnimplemented`; any other call answers `errSecItemNotFound`, as for a keychain
    /// holding none of that class.
    @discardableResult
    func checkClass(for purpose: Purpose) throws(KeychainError) -> ItemClass {
        guard let value = entries[kSecClass as String] else {
            throw KeychainError(KeychainStatus.param, "kSecClass is missing")
        }
        guard let raw = value as? String, !(value is NSNumber) else {
            throw KeychainError(KeychainStatus.param, "kSecClass is not a string")
        }
        if let itemClass = ItemClass(rawValue: raw) { return itemClass }
        let otherClasses = [kSecClassCertificate, kSecClassKey, kSecClassIdentity].map {
            $0 as String
        }
        if otherClasses.contains(raw) {
            if purpose == .add {
                throw KeychainError(
                    KeychainStatus.unimplemented,
                    "only generic and internet passwords are implemented")
            }
            throw KeychainError(KeychainStatus.itemNotFound, "no item of that class")
        }
        throw KeychainError(KeychainStatus.param, "unknown kSecClass")
    }

    private var itemClass: ItemClass {
        (entries[kSecClass as String] as? String).flatMap(ItemClass.init) ?? .genericPassword
    }

    /// `kSecAttrPort`: a number 0…65535.
    func port() throws(KeychainError) -> Int? { try number(kSecAttrPort, in: 0...65535) }

    /// A number attribute: a whole `NSNumber` in `range`; anything else is `errSecParam`.
    func number(_ key: CFString, in range: ClosedRange<Int>) throws(KeychainError) -> Int? {
        guard let value = entries[key as String] else { return nil }
        guard let number = value as? NSNumber, let whole = Int(exactly: number.doubleValue),
            range.contains(whole)
        else {
            throw KeychainError(
                KeychainStatus.param,
                "\(key) must be a number \(range.lowerBound)…\(range.upperBound)")
        }
        return whole
    }

    // MARK: - Typed values

    /// A string attribute: a string, or `Data` holding UTF-8 (Apple accepts data for string
    /// attributes such as the account and service). Data that is not UTF-8 is `errSecParam`.
    func string(_ key: CFString) throws(KeychainError) -> String? {
        guard let value = entries[key as String] else { return nil }
        if let data = value as? Data, !(value is String) {
            guard let string = String(data: data, encoding: .utf8) else {
                throw KeychainError(KeychainStatus.param, "\(key) data is not UTF-8")
            }
            return string
        }
        guard let string = value as? String, !(value is NSNumber) else {
            throw KeychainError(KeychainStatus.param, "\(key) must be a string")
        }
        return string
    }

    func data(_ key: CFString) throws(KeychainError) -> Data? {
        guard let value = entries[key as String] else { return nil }
        if let string = value as? String, !(value is NSNumber),
            key as String == kSecAttrGeneric as String
        {
            return Data(string.utf8)  // Apple accepts a string for the generic attribute too
        }
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

    /// Apple's class values, the deprecated `Always` ones included (read back as given,
    /// protected as their `AfterFirstUnlock` counterparts: never less than Apple recommends).
    static func accessibility(_ raw: String) -> Accessibility? { Accessibility(rawValue: raw) }

    /// Which string attributes came as `Data` (returned as `Data` again).
    private var givenAsData: DataValuedAttributes {
        var given: DataValuedAttributes = []
        for (key, flag) in [
            (kSecAttrAccount, DataValuedAttributes.account), (kSecAttrService, .service),
            (kSecAttrLabel, .label),
        ] where entries[key as String].map({ $0 is Data && !($0 is String) }) ?? false {
            given.insert(flag)
        }
        return given
    }

    /// `kSecAttrAccessControl`, when given.
    func accessControl() throws(KeychainError) -> SecAccessControl? {
        guard let value = entries[kSecAttrAccessControl as String] else { return nil }
        guard entries[kSecAttrAccessible as String] == nil else {
            throw KeychainError(
                KeychainStatus.param, "kSecAttrAccessible and kSecAttrAccessControl together")
        }
        guard let control = value as? SecAccessControl else {
            throw KeychainError(
                KeychainStatus.param, "kSecAttrAccessControl must be a SecAccessControl")
        }
        return control
    }

    /// The access constraints of `kSecAttrAccessControl` (none without it).
    func constraints() throws(KeychainError) -> AccessConstraints {
        guard let control = try accessControl() else { return [] }
        return control.flags.constraints
    }

    /// `kSecAttrAccessible`, or the class of `kSecAttrAccessControl` (not both).
    func accessible() throws(KeychainError) -> Accessibility? {
        if let control = try accessControl() { return control.accessible }
        guard let raw = try string(kSecAttrAccessible) else { return nil }
        guard let accessible = Self.accessibility(raw) else {
            throw KeychainError(KeychainStatus.param, "unknown kSecAttrAccessible value")
        }
        return accessible
    }

    /// `kSecValuePersistentRef`: the item id it names, or nil.
    func persistentID() throws(KeychainError) -> String? {
        guard let value = entries[kSecValuePersistentRef as String] else { return nil }
        guard let data = value as? Data else {
            throw KeychainError(KeychainStatus.param, "kSecValuePersistentRef must be data")
        }
        guard let id = PersistentReference.id(data) else {
            throw KeychainError(KeychainStatus.itemNotFound, "not a persistent reference")
        }
        return id
    }

    /// `kSecMatchLimit`: `…One` (the default), `…All`, or a number n ≥ 1 (up to n items, an
    /// array — even for 1, as Apple returns). `count` is nil for `…One`/`…All`.
    func matchLimit() throws(KeychainError) -> (limit: MatchLimit, count: Int?) {
        guard let value = entries[kSecMatchLimit as String] else { return (.one, nil) }
        if let string = value as? String, !(value is NSNumber) {
            if string == kSecMatchLimitOne as String { return (.one, nil) }
            if string == kSecMatchLimitAll as String { return (.all, nil) }
            throw KeychainError(KeychainStatus.param, "unknown kSecMatchLimit value")
        }
        if let number = value as? Int, !(value is Bool) || value is NSNumber, number >= 1 {
            return (.all, number)
        }
        throw KeychainError(KeychainStatus.param, "kSecMatchLimit must be ≥ 1")
    }

    // MARK: - Whole values

    /// Every item field the dictionary gives, under Apple's keys (`ItemAttribute.all`).
    func fields() throws(KeychainError) -> ItemFields {
        var fields = GenericPasswordQuery().fields  // every field nil
        for attribute in ItemAttribute.all {
            let key = NSString(string: attribute.secKey)
            switch attribute.value {
            case .string(let field): fields[keyPath: field] = try string(key)
            case .data(let field): fields[keyPath: field] = try data(key)
            case .number(let field, let range):
                fields[keyPath: field] = try number(key, in: range)
            }
        }
        return fields
    }

    func query() throws(KeychainError) -> GenericPasswordQuery {
        let fields = try fields()
        var query = GenericPasswordQuery(
            synchronizable: try synchronizable() ?? .no, accessible: try accessible(),
            persistentID: try persistentID(), itemClass: itemClass)
        query.fields = fields
        return query
    }

    /// What a use of protected items is given: the `LAContext` of
    /// `kSecUseAuthenticationContext` (its device passcode and app password), and whether items
    /// needing more are skipped (`kSecUseAuthenticationUISkip`).
    func authentication() throws(KeychainError) -> ItemAuthentication {
        var authentication = ItemAuthentication()
        if let value = entries[kSecUseAuthenticationContext as String] {
            guard let context = value as? LAContext else {
                throw KeychainError(
                    KeychainStatus.param, "kSecUseAuthenticationContext must be an LAContext")
            }
            authentication.passcode = context.devicePasscode
            authentication.applicationPassword = context.applicationPassword
            if context.devicePasscode != nil {
                context.noteWrongPasscodes(nil)
                authentication.reportWrongPasscodes = { context.noteWrongPasscodes($0.notice) }
            }
        }
        if let value = entries[kSecUseAuthenticationUI as String] {
            guard let choice = value as? String, !(value is NSNumber),
                [
                    kSecUseAuthenticationUIAllow, kSecUseAuthenticationUIFail,
                    kSecUseAuthenticationUISkip,
                ]
                .contains(where: { $0 as String == choice })
            else {
                throw KeychainError(KeychainStatus.param, "unknown kSecUseAuthenticationUI value")
            }
            authentication.skipItemsNeedingAuthentication =
                choice == kSecUseAuthenticationUISkip as String
        }
        _ = try bool(kSecUseNoAuthenticationUI)
        return authentication
    }

    private func internet() throws(KeychainError) -> InternetLocation? {
        guard itemClass == .internetPassword else { return nil }
        return InternetLocation(
            server: try string(kSecAttrServer) ?? "", port: try port() ?? 0,
            path: try string(kSecAttrPath) ?? "",
            internetProtocol: try string(kSecAttrProtocol) ?? "",
            authenticationType: try string(kSecAttrAuthenticationType) ?? "",
            securityDomain: try string(kSecAttrSecurityDomain) ?? "")
    }

    /// Internet attributes on a generic password (or the reverse) are `errSecNoSuchAttr`.
    private func checkClassAttributes() throws(KeychainError) {
        let foreign =
            itemClass == .internetPassword
            ? [kSecAttrService, kSecAttrGeneric].map { $0 as String }
            : Array(Self.internetKeys)
        if let key = foreign.sorted().first(where: { entries[$0] != nil }) {
            throw KeychainError(
                KeychainStatus.noSuchAttribute, "\(key) is not an attribute of this class")
        }
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
        try checkClassAttributes()
        let fields = try fields()
        var attributes = GenericPasswordAttributes(
            service: fields.service ?? "", account: fields.account ?? "",
            accessGroup: fields.accessGroup, synchronizable: synchronizable,
            accessible: try accessible() ?? .whenUnlocked, internet: try internet(),
            accessControl: try constraints())
        attributes.fields = fields  // the descriptive ones (`ItemAttribute`) given
        attributes.givenAsData = givenAsData
        return attributes
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
        if let control = try accessControl(), !control.flags.isEmpty {
            throw KeychainError(
                KeychainStatus.unimplemented,
                "changing an item's access constraints: delete it and add it again")
        }
        let fields = try fields()
        var changes = GenericPasswordChanges(
            synchronizable: synchronizable, accessible: try accessible(),
            data: try data(kSecValueData))
        changes.fields = fields
        return changes
    }

    /// The result an item becomes under `kSecReturnAttributes`: Apple's keys, Foundation values.
    static func attributeDictionary(_ item: GenericPasswordItem, withData: Bool) -> NSDictionary {
        let a = item.attributes
        /// A string attribute as it was given: a string, or UTF-8 data.
        func value(_ string: String, _ flag: DataValuedAttributes) -> Any {
            a.givenAsData.contains(flag) ? Data(string.utf8) : string
        }
        var result: [String: Any] = [
            kSecClass as String: a.itemClass.rawValue,
            kSecAttrAccount as String: value(a.account, .account),
            kSecAttrAccessGroup as String: a.accessGroup ?? "",
            kSecAttrSynchronizable as String: NSNumber(value: a.synchronizable),
            kSecAttrAccessible as String: a.accessible.rawValue,
        ]
        if let internet = a.internet {
            result[kSecAttrServer as String] = internet.server
            result[kSecAttrPort as String] = NSNumber(value: internet.port)
            result[kSecAttrPath as String] = internet.path
            result[kSecAttrProtocol as String] = internet.internetProtocol
            result[kSecAttrAuthenticationType as String] = internet.authenticationType
            result[kSecAttrSecurityDomain as String] = internet.securityDomain
        } else {
            result[kSecAttrService as String] = value(a.service, .service)
        }
        if !a.accessControl.isEmpty {
            result[kSecAttrAccessControl as String] = SecAccessControl(
                accessible: a.accessible,
                flags: SecAccessControlCreateFlags(a.accessControl))
        }
        for attribute in ItemAttribute.descriptive {
            result[attribute.secKey] = attribute.foundationValue(in: a.described)
        }
        result[kSecAttrLabel as String] = a.label.map { value($0, .label) }
        result[kSecAttrCreationDate as String] = a.creationDate
        result[kSecAttrModificationDate as String] = a.modificationDate
        // An item added without data has no kSecValueData, as on iOS (not an empty one).
        if withData, let data = item.data { result[kSecValueData as String] = data }
        result[kSecValuePersistentRef as String] = PersistentReference.data(item.persistentID)
        return result as NSDictionary
    }
}

/// Apple's persistent reference for an item: `KSPR1:` and the item's own random id, as data.
/// It names exactly one item across restarts and never another after that one is deleted.
enum PersistentReference {
    private static let prefix = "KSPR1:"

    static func data(_ id: String) -> Data { Data((prefix + id).utf8) }

    static func id(_ data: Data) -> String? {
        guard let text = String(data: data, encoding: .utf8), text.hasPrefix(prefix) else {
            return nil
        }
        let id = String(text.dropFirst(prefix.count))
        return id.isEmpty || id.count > 128 ? nil : id
    }
}
