import Foundation

/// The data-protection classes of `kSecAttrAccessible`, with Apple's raw values.
public enum Accessibility: String, Sendable, Hashable, CaseIterable, Codable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case whenPasscodeSetThisDeviceOnly = "akpu"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"

    /// `…ThisDeviceOnly` items never leave the device and cannot be synchronizable.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock: false
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
        }
    }

    public init?(commandLineName: String) {
        guard let match = Self.allCases.first(where: { $0.commandLineName == commandLineName })
        else { return nil }
        self = match
    }
}

/// `kSecAttrSynchronizable` in a query: absent/false, true, or `kSecAttrSynchronizableAny`.
public enum SynchronizableMatch: Sendable, Hashable {
    case no, yes, any

    func matches(_ synchronizable: Bool) -> Bool {
        switch self {
        case .no: !synchronizable
        case .yes: synchronizable
        case .any: true
        }
    }
}

/// The attributes of one generic-password item (`kSecClassGenericPassword`).
///
/// Primary key: access group + service + account + synchronizable.
public struct GenericPasswordAttributes: Sendable, Hashable {
    public var service: String
    public var account: String
    /// nil when adding = the app's first access group.
    public var accessGroup: String?
    public var synchronizable: Bool
    public var accessible: Accessibility
    public var label: String?
    public var comment: String?
    public var itemDescription: String?
    public var generic: Data?
    /// Set by the Keychain; ignored on add.
    public internal(set) var creationDate: Date?
    /// Set by the Keychain; ignored on add.
    public internal(set) var modificationDate: Date?

    public init(
        service: String = "", account: String = "", accessGroup: String? = nil,
        synchronizable: Bool = false, accessible: Accessibility = .whenUnlocked,
        label: String? = nil, comment: String? = nil, itemDescription: String? = nil,
        generic: Data? = nil
    ) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
        self.accessible = accessible
        self.label = label
        self.comment = comment
        self.itemDescription = itemDescription
        self.generic = generic
    }
}

/// One item as a query returns it: attributes, and the secret when it was asked for.
public struct GenericPasswordItem: Sendable, Hashable {
    public var attributes: GenericPasswordAttributes
    /// Present when the query asked for data. A copy in ordinary memory, owned by the caller.
    public var data: Data?
    /// The item's own random id: names exactly this item across restarts, and never another
    /// item after it is deleted (a re-added item gets a new id). Apple's persistent reference.
    public var persistentID: String = ""
}

/// A query over generic passwords: every given field must match exactly.
public struct GenericPasswordQuery: Sendable, Hashable {
    public var service: String?
    public var account: String?
    /// nil = every access group the app is entitled to.
    public var accessGroup: String?
    public var synchronizable: SynchronizableMatch
    public var accessible: Accessibility?
    public var label: String?
    public var comment: String?
    public var itemDescription: String?
    public var generic: Data?
    /// Only the item with this persistent id (`GenericPasswordItem.persistentID`).
    public var persistentID: String?

    public init(
        service: String? = nil, account: String? = nil, accessGroup: String? = nil,
        synchronizable: SynchronizableMatch = .no, accessible: Accessibility? = nil,
        label: String? = nil, comment: String? = nil, itemDescription: String? = nil,
        generic: Data? = nil, persistentID: String? = nil
    ) {
        self.persistentID = persistentID
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
        self.accessible = accessible
        self.label = label
        self.comment = comment
        self.itemDescription = itemDescription
        self.generic = generic
    }

    func matches(_ item: GenericPasswordAttributes) -> Bool {
        (service == nil || service == item.service)
            && (account == nil || account == item.account)
            && (accessGroup == nil || accessGroup == item.accessGroup)
            && synchronizable.matches(item.synchronizable)
            && (accessible == nil || accessible == item.accessible)
            && (label == nil || label == item.label)
            && (comment == nil || comment == item.comment)
            && (itemDescription == nil || itemDescription == item.itemDescription)
            && (generic == nil || generic == item.generic)
    }
}

/// What `update` changes: every non-nil field replaces the item's value.
public struct GenericPasswordChanges: Sendable, Hashable {
    public var service: String?
    public var account: String?
    public var accessGroup: String?
    public var synchronizable: Bool?
    public var accessible: Accessibility?
    public var label: String?
    public var comment: String?
    public var itemDescription: String?
    public var generic: Data?
    public var data: Data?

    public init(
        service: String? = nil, account: String? = nil, accessGroup: String? = nil,
        synchronizable: Bool? = nil, accessible: Accessibility? = nil, label: String? = nil,
        comment: String? = nil, itemDescription: String? = nil, generic: Data? = nil,
        data: Data? = nil
    ) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
        self.accessible = accessible
        self.label = label
        self.comment = comment
        self.itemDescription = itemDescription
        self.generic = generic
        self.data = data
    }

    var isEmpty: Bool { self == GenericPasswordChanges() }

    func applied(to item: GenericPasswordAttributes) -> GenericPasswordAttributes {
        var changed = item
        if let service { changed.service = service }
        if let account { changed.account = account }
        if let accessGroup { changed.accessGroup = accessGroup }
        if let synchronizable { changed.synchronizable = synchronizable }
        if let accessible { changed.accessible = accessible }
        if let label { changed.label = label }
        if let comment { changed.comment = comment }
        if let itemDescription { changed.itemDescription = itemDescription }
        if let generic { changed.generic = generic }
        return changed
    }
}

/// How many items a query returns (`kSecMatchLimit`).
public enum MatchLimit: Sendable, Hashable {
    case one, all
}
