import Foundation

/// The attributes of a password item that a query matches and a change sets, each held once:
/// nil is "any" in a query (``GenericPasswordQuery``) and "unchanged" in a change
/// (``GenericPasswordChanges``); an item's own (``GenericPasswordAttributes``) are read as one of
/// these too. Every rule about them (their limits, which class has which, matching, changing) is
/// written once, here and (their limits) in `Validation.swift`; a query or a change reads and
/// writes them by name (`query.service`).
///
/// `service` and `generic` are a generic password's; `server` … `securityDomain` (Apple's primary
/// key of an internet password, with the account) are an internet password's.
public struct ItemFields: Sendable, Hashable {
    public var service: String?
    public var account: String?
    /// In a query: nil = every access group the app is entitled to.
    public var accessGroup: String?
    public var label: String?
    public var comment: String?
    public var itemDescription: String?
    public var generic: Data?
    public var server: String?
    public var port: Int?
    public var path: String?
    /// `kSecAttrProtocol`'s value (Apple's four-character codes: `htps`, `ftp `, …).
    public var internetProtocol: String?
    /// `kSecAttrAuthenticationType`'s value (`dflt`, `http`, `form`, …).
    public var authenticationType: String?
    public var securityDomain: String?

    /// The string fields and how an error names each.
    static let strings: [(field: WritableKeyPath<ItemFields, String?> & Sendable, name: String)] =
        [
            (\.service, "service"), (\.account, "account"), (\.accessGroup, "access group"),
            (\.label, "label"), (\.comment, "comment"), (\.itemDescription, "description"),
            (\.server, "server"), (\.path, "path"), (\.internetProtocol, "protocol"),
            (\.authenticationType, "authentication type"), (\.securityDomain, "security domain"),
        ]

    /// The fields of an internet password's location (`InternetLocation`).
    var location: ItemFields {
        ItemFields(
            server: server, port: port, path: path, internetProtocol: internetProtocol,
            authenticationType: authenticationType, securityDomain: securityDomain)
    }

    /// Whether any field only a generic password has is given (`service`, `generic`).
    var hasGenericOnlyFields: Bool { service != nil || generic != nil }

    /// Whether any field only an internet password has is given.
    var hasInternetFields: Bool { location != ItemFields() }

    /// Whether `item` has every field given here.
    func matches(_ item: ItemFields) -> Bool {
        Self.strings.allSatisfy { string in
            self[keyPath: string.field].map { $0 == item[keyPath: string.field] } ?? true
        }
            && (generic == nil || generic == item.generic) && (port == nil || port == item.port)
    }

    /// `item` with every field given here replacing its own.
    func applied(to item: ItemFields) -> ItemFields {
        var changed = item
        for (field, _) in Self.strings {
            if let value = self[keyPath: field] { changed[keyPath: field] = value }
        }
        if let generic { changed.generic = generic }
        if let port { changed.port = port }
        return changed
    }
}

extension GenericPasswordAttributes {
    /// The item's fields as a query matches them and a change sets them: every one its class
    /// has (an internet password's empty service is none). Setting them writes back every field
    /// given; an internet password's location only when the item is one.
    var fields: ItemFields {
        get {
            ItemFields(
                service: internet != nil && service.isEmpty ? nil : service, account: account,
                accessGroup: accessGroup, label: label,
                comment: comment, itemDescription: itemDescription, generic: generic,
                server: internet?.server, port: internet?.port, path: internet?.path,
                internetProtocol: internet?.internetProtocol,
                authenticationType: internet?.authenticationType,
                securityDomain: internet?.securityDomain)
        }
        set {
            service = newValue.service ?? service
            account = newValue.account ?? account
            accessGroup = newValue.accessGroup ?? accessGroup
            label = newValue.label ?? label
            comment = newValue.comment ?? comment
            itemDescription = newValue.itemDescription ?? itemDescription
            generic = newValue.generic ?? generic
            internet = internet.map { InternetLocation(newValue, over: $0) }
        }
    }
}

extension InternetLocation {
    /// `location` with every field `fields` gives replacing its own.
    init(_ fields: ItemFields, over location: InternetLocation = InternetLocation()) {
        self.init(
            server: fields.server ?? location.server, port: fields.port ?? location.port,
            path: fields.path ?? location.path,
            internetProtocol: fields.internetProtocol ?? location.internetProtocol,
            authenticationType: fields.authenticationType ?? location.authenticationType,
            securityDomain: fields.securityDomain ?? location.securityDomain)
    }

    /// The location's fields, every one given.
    var fields: ItemFields {
        ItemFields(
            server: server, port: port, path: path, internetProtocol: internetProtocol,
            authenticationType: authenticationType, securityDomain: securityDomain)
    }
}

/// A value made of ``ItemFields`` and more — a query (``GenericPasswordQuery``) or a change
/// (``GenericPasswordChanges``) — whose fields are read and written by name: `query.service`,
/// `changes.port`.
@dynamicMemberLookup
public protocol FieldsByName {
    /// The fields, nil where the value leaves one open.
    var fields: ItemFields { get set }
}

extension FieldsByName {
    /// A field by name: `query.service`, `changes.port`, ….
    public subscript<Value>(dynamicMember field: WritableKeyPath<ItemFields, Value>) -> Value {
        get { fields[keyPath: field] }
        set { fields[keyPath: field] = newValue }
    }
}
