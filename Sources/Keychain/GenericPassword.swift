import Foundation

/// The data-protection classes of `kSecAttrAccessible`, with Apple's raw values.
public enum Accessibility: String, Sendable, Hashable, CaseIterable, Codable {
    /// `kSecAttrAccessibleWhenUnlocked`: readable only while the device is unlocked.
    case whenUnlocked = "ak"
    /// `kSecAttrAccessibleAfterFirstUnlock`: readable from the first unlock after a reboot.
    case afterFirstUnlock = "ck"
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: readable while unlocked, only while a
    /// passcode is set; never leaves the device.
    case whenPasscodeSetThisDeviceOnly = "akpu"
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`: as `whenUnlocked`; never leaves the device.
    case whenUnlockedThisDeviceOnly = "aku"
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: as `afterFirstUnlock`; never leaves the
    /// device.
    case afterFirstUnlockThisDeviceOnly = "cku"
    /// Deprecated by Apple, still accepted and read back as given; protected as
    /// `afterFirstUnlock` (never less protected than the classes Apple recommends instead).
    case always = "dk"
    /// Deprecated by Apple; protected as `afterFirstUnlockThisDeviceOnly`.
    case alwaysThisDeviceOnly = "dku"

    /// `…ThisDeviceOnly` items never leave the device and cannot be synchronizable.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: false
        default: true
        }
    }

    /// The command line's name (`after-first-unlock`).
    public var commandLineName: String {
        switch self {
        case .whenUnlocked: "when-unlocked"
        case .afterFirstUnlock: "after-first-unlock"
        case .whenPasscodeSetThisDeviceOnly: "when-passcode-set-this-device-only"
        case .whenUnlockedThisDeviceOnly: "when-unlocked-this-device-only"
        case .afterFirstUnlockThisDeviceOnly: "after-first-unlock-this-device-only"
        case .always: "always"
        case .alwaysThisDeviceOnly: "always-this-device-only"
        }
    }

    /// The class a command-line name names (`after-first-unlock`); nil for an unknown name.
    public init?(commandLineName: String) {
        guard let match = Self.allCases.first(where: { $0.commandLineName == commandLineName })
        else { return nil }
        self = match
    }
}

/// `kSecAttrSynchronizable` in a query: absent/false, true, or `kSecAttrSynchronizableAny`.
public enum SynchronizableMatch: Sendable, Hashable {
    /// `no`: only items that do not sync (`kSecAttrSynchronizable` absent or false); `yes`: only
    /// items that do; `any`: both (`kSecAttrSynchronizableAny`).
    case no, yes, any

    func matches(_ synchronizable: Bool) -> Bool {
        switch self {
        case .no: !synchronizable
        case .yes: synchronizable
        case .any: true
        }
    }
}

/// The password classes the Keychain holds, with Apple's `kSecClass` values.
public enum ItemClass: String, Sendable, Hashable, CaseIterable {
    /// `kSecClassGenericPassword`: keyed by service and account.
    case genericPassword = "genp"
    /// `kSecClassInternetPassword`: keyed by account and ``InternetLocation``.
    case internetPassword = "inet"
}

/// What an internet password (`kSecClassInternetPassword`) has besides a generic password's
/// attributes: with the account, access group and synchronizable flag, its primary key (Apple's:
/// account, security domain, server, protocol, authentication type, port, path). Absent values
/// are Apple's: empty strings and port 0.
public struct InternetLocation: Sendable, Hashable, Codable {
    /// `kSecAttrServer`: a domain name or IP address.
    public var server: String
    /// `kSecAttrPort`: 0…65535.
    public var port: Int
    /// `kSecAttrPath`: the path part of a URL.
    public var path: String
    /// `kSecAttrProtocol`'s value (Apple's four-character codes: `htps`, `ftp `, …).
    public var internetProtocol: String
    /// `kSecAttrAuthenticationType`'s value (`dflt`, `http`, `form`, …).
    public var authenticationType: String
    /// `kSecAttrSecurityDomain`: the authentication realm.
    public var securityDomain: String

    /// A location; each part left out is Apple's absent value (an empty string, port 0).
    public init(
        server: String = "", port: Int = 0, path: String = "", internetProtocol: String = "",
        authenticationType: String = "", securityDomain: String = ""
    ) {
        self.server = server
        self.port = port
        self.path = path
        self.internetProtocol = internetProtocol
        self.authenticationType = authenticationType
        self.securityDomain = securityDomain
    }
}

/// String attributes that arrived as UTF-8 `Data` in an Apple dictionary.
package struct DataValuedAttributes: OptionSet, Sendable, Hashable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }
    package static let account = DataValuedAttributes(rawValue: 1 << 0)
    package static let service = DataValuedAttributes(rawValue: 1 << 1)
    package static let label = DataValuedAttributes(rawValue: 1 << 2)
}

/// The attributes of one keychain password item: a generic password (`kSecClassGenericPassword`)
/// or, when `internet` is set, an internet password (`kSecClassInternetPassword`).
///
/// Primary key: access group + service + account + synchronizable for a generic password; access
/// group + account + `internet` + synchronizable for an internet password (which has no service
/// and no `generic`).
@dynamicMemberLookup
public struct GenericPasswordAttributes: Sendable, Hashable {
    /// The service (`kSecAttrService`), part of a generic password's primary key; empty for an
    /// internet password.
    public var service: String
    /// The account (`kSecAttrAccount`), part of the primary key.
    public var account: String
    /// nil when adding = the app's first access group.
    public var accessGroup: String?
    /// `kSecAttrSynchronizable`: whether the item syncs with the cloud account (`KeychainSync`).
    public var synchronizable: Bool
    /// `kSecAttrAccessible`: the data-protection class whose key seals the item.
    public var accessible: Accessibility
    /// The descriptive fields the item has (`label`, `comment`, `itemDescription`, `generic`, …:
    /// those `ItemAttribute` stores in the record), read and written by name (`attributes.label`);
    /// every other field here is nil.
    package var described = ItemFields()
    /// Set for an internet password.
    public var internet: InternetLocation?
    /// Constraints on each use of the secret (`kSecAttrAccessControl`); empty for none.
    public var accessControl: AccessConstraints
    /// The string attributes an Apple dictionary gave as `Data`, so that they are returned as
    /// `Data` again, as Apple returns them.
    package var givenAsData: DataValuedAttributes = []
    /// Set by the Keychain; ignored on add.
    public internal(set) var creationDate: Date?
    /// Set by the Keychain; ignored on add.
    public internal(set) var modificationDate: Date?

    /// An item's attributes; those left out take Apple's defaults (`whenUnlocked`, not
    /// synchronizable; on add, the app's first access group).
    public init(
        service: String = "", account: String = "", accessGroup: String? = nil,
        synchronizable: Bool = false, accessible: Accessibility = .whenUnlocked,
        label: String? = nil, comment: String? = nil, itemDescription: String? = nil,
        generic: Data? = nil, internet: InternetLocation? = nil,
        accessControl: AccessConstraints = []
    ) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
        self.accessible = accessible
        described.label = label
        described.comment = comment
        described.itemDescription = itemDescription
        described.generic = generic
        self.internet = internet
        self.accessControl = accessControl
    }

    /// `internetPassword` when `internet` is set, else `genericPassword`.
    public var itemClass: ItemClass { internet == nil ? .genericPassword : .internetPassword }
}

/// One item as a query returns it: attributes, and the secret when it was asked for.
public struct GenericPasswordItem: Sendable, Hashable {
    /// The item's attributes, its creation and modification dates included.
    public var attributes: GenericPasswordAttributes
    /// Present when the query asked for data. A copy in ordinary memory, owned by the caller.
    public var data: Data?
    /// The item's own random id: names exactly this item across restarts, and never another
    /// item after it is deleted (a re-added item gets a new id). Apple's persistent reference.
    public var persistentID: String = ""
}

/// A query over passwords: every given field must match exactly. The fields (`service`,
/// `account`, …, nil = any) are its ``ItemFields``, read and written by name.
public struct GenericPasswordQuery: FieldsByName, Sendable, Hashable {
    /// The fields to match: nil = any.
    public var fields: ItemFields
    /// Which items by `kSecAttrSynchronizable`: by default only those that do not sync, as Apple's.
    public var synchronizable: SynchronizableMatch
    /// Only items of this class; nil: any.
    public var accessible: Accessibility?
    /// Only the item with this persistent id (`GenericPasswordItem.persistentID`).
    public var persistentID: String?
    /// Generic passwords unless asked otherwise; `server` … `securityDomain` apply to internet
    /// passwords.
    public var itemClass: ItemClass

    /// A query matching every given field; with nothing given, every generic password that does
    /// not sync.
    public init(
        service: String? = nil, account: String? = nil, accessGroup: String? = nil,
        synchronizable: SynchronizableMatch = .no, accessible: Accessibility? = nil,
        label: String? = nil, comment: String? = nil, itemDescription: String? = nil,
        generic: Data? = nil, persistentID: String? = nil,
        itemClass: ItemClass = .genericPassword, server: String? = nil, port: Int? = nil,
        path: String? = nil, internetProtocol: String? = nil, authenticationType: String? = nil,
        securityDomain: String? = nil
    ) {
        fields = ItemFields(
            service: service, account: account, accessGroup: accessGroup, label: label,
            comment: comment, itemDescription: itemDescription, generic: generic, server: server,
            port: port, path: path, internetProtocol: internetProtocol,
            authenticationType: authenticationType, securityDomain: securityDomain)
        self.synchronizable = synchronizable
        self.accessible = accessible
        self.persistentID = persistentID
        self.itemClass = itemClass
    }

    /// Whether the query names one item by its primary key (service and account, the access
    /// group or any) and constrains nothing else.
    var isByPrimaryKey: Bool {
        var rest = fields
        rest.service = nil
        rest.account = nil
        rest.accessGroup = nil
        return itemClass == .genericPassword && fields.service != nil && fields.account != nil
            && rest == ItemFields() && accessible == nil && persistentID == nil
    }

    func matches(_ item: GenericPasswordAttributes) -> Bool {
        item.itemClass == itemClass && fields.matches(item.fields)
            && synchronizable.matches(item.synchronizable)
            && (accessible == nil || accessible == item.accessible)
    }
}

/// What `update` changes: every non-nil field replaces the item's. The fields (`service`, …) are
/// its ``ItemFields``, read and written by name.
public struct GenericPasswordChanges: FieldsByName, Sendable, Hashable {
    /// The fields to set: nil = unchanged.
    public var fields: ItemFields
    /// The new `kSecAttrSynchronizable`; nil: unchanged.
    public var synchronizable: Bool?
    /// The new data-protection class; nil: unchanged.
    public var accessible: Accessibility?
    /// The new secret (at most 64 KiB); nil: unchanged.
    public var data: Data?

    /// Changes to the given fields; nil leaves a field as it is (nothing given: `errSecParam`).
    public init(
        service: String? = nil, account: String? = nil, accessGroup: String? = nil,
        synchronizable: Bool? = nil, accessible: Accessibility? = nil, label: String? = nil,
        comment: String? = nil, itemDescription: String? = nil, generic: Data? = nil,
        server: String? = nil, port: Int? = nil, path: String? = nil,
        internetProtocol: String? = nil, authenticationType: String? = nil,
        securityDomain: String? = nil, data: Data? = nil
    ) {
        self.data = data
        fields = ItemFields(
            service: service, account: account, accessGroup: accessGroup, label: label,
            comment: comment, itemDescription: itemDescription, generic: generic, server: server,
            port: port, path: path, internetProtocol: internetProtocol,
            authenticationType: authenticationType, securityDomain: securityDomain)
        self.synchronizable = synchronizable
        self.accessible = accessible
    }

    var isEmpty: Bool { self == GenericPasswordChanges() }

    func applied(to item: GenericPasswordAttributes) -> GenericPasswordAttributes {
        var changed = item
        changed.fields = fields
        if let synchronizable { changed.synchronizable = synchronizable }
        if let accessible { changed.accessible = accessible }
        return changed
    }
}

/// How many items a query returns (`kSecMatchLimit`).
public enum MatchLimit: Sendable, Hashable {
    /// `one`: the first match (`kSecMatchLimitOne`); `all`: every match (`kSecMatchLimitAll`).
    case one, all
}
