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
    /// The service (`kSecAttrService`), part of a generic password's primary key.
    public var service: String?
    /// The account (`kSecAttrAccount`), part of every password's primary key.
    public var account: String?
    /// In a query: nil = every access group the app is entitled to.
    public var accessGroup: String?
    /// The user-visible label (`kSecAttrLabel`).
    public var label: String?
    /// The comment (`kSecAttrComment`).
    public var comment: String?
    /// The user-visible kind of item (`kSecAttrDescription`).
    public var itemDescription: String?
    /// The app's own bytes (`kSecAttrGeneric`), a generic password's only.
    public var generic: Data?
    /// The server (`kSecAttrServer`), part of an internet password's primary key.
    public var server: String?
    /// The port (`kSecAttrPort`, 0…65535), part of an internet password's primary key.
    public var port: Int?
    /// The path (`kSecAttrPath`), part of an internet password's primary key.
    public var path: String?
    /// `kSecAttrProtocol`'s value (Apple's four-character codes: `htps`, `ftp `, …).
    public var internetProtocol: String?
    /// `kSecAttrAuthenticationType`'s value (`dflt`, `http`, `form`, …).
    public var authenticationType: String?
    /// The security domain (`kSecAttrSecurityDomain`), part of an internet password's primary
    /// key.
    public var securityDomain: String?

    /// The string fields and how an error names each (`ItemAttribute.all`'s strings).
    static let strings: [(field: WritableKeyPath<ItemFields, String?> & Sendable, name: String)] =
        ItemAttribute.all.compactMap { attribute in
            guard case .string(let field) = attribute.value else { return nil }
            return (field, attribute.name)
        }

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
        ItemAttribute.all.allSatisfy { $0.matches(given: self, item: item) }
    }

    /// `item` with every field given here replacing its own.
    func applied(to item: ItemFields) -> ItemFields {
        var changed = item
        for attribute in ItemAttribute.all { attribute.copy(from: self, into: &changed) }
        return changed
    }
}

/// One field of ``ItemFields``, described once: how errors and the command line name it, Apple's
/// `kSecAttr…` key for it, and whether the Secret Service's clear index holds it (a query with a
/// condition on a field the index does not hold reads secrets to decide). Matching, changing,
/// the limits, the dictionary API's queries and changes, the command line's JSON and the index
/// read this table; a new field is a line here (and its storage in `StoredRecord`).
package struct ItemAttribute: Sendable {
    /// Where the field is, and what kind of value it holds.
    package enum Value: Sendable {
        case string(WritableKeyPath<ItemFields, String?> & Sendable)
        case data(WritableKeyPath<ItemFields, Data?> & Sendable)
        case port(WritableKeyPath<ItemFields, Int?> & Sendable)
    }

    /// As an error names it: "access group".
    package let name: String
    /// As the command line's JSON names it: "accessGroup".
    package let json: String
    /// Apple's key: `kSecAttrAccessGroup`'s value, "agrp".
    package let secKey: String
    package let value: Value
    /// Held in the clear index (`SecretServiceSchema`): a condition on it needs no secret read.
    package let indexed: Bool

    package static let all: [ItemAttribute] = [
        ItemAttribute("service", "service", "svce", .string(\.service), indexed: true),
        ItemAttribute("account", "account", "acct", .string(\.account), indexed: true),
        ItemAttribute("access group", "accessGroup", "agrp", .string(\.accessGroup), indexed: true),
        ItemAttribute("label", "label", "labl", .string(\.label), indexed: false),
        ItemAttribute("comment", "comment", "icmt", .string(\.comment), indexed: false),
        ItemAttribute(
            "description", "description", "desc", .string(\.itemDescription), indexed: false),
        ItemAttribute("generic", "generic", "gena", .data(\.generic), indexed: false),
        ItemAttribute("server", "server", "srvr", .string(\.server), indexed: true),
        ItemAttribute("port", "port", "port", .port(\.port), indexed: true),
        ItemAttribute("path", "path", "path", .string(\.path), indexed: true),
        ItemAttribute("protocol", "protocol", "ptcl", .string(\.internetProtocol), indexed: true),
        ItemAttribute(
            "authentication type", "authenticationType", "atyp", .string(\.authenticationType),
            indexed: true),
        ItemAttribute(
            "security domain", "securityDomain", "sdmn", .string(\.securityDomain), indexed: true),
    ]

    private init(_ name: String, _ json: String, _ secKey: String, _ value: Value, indexed: Bool) {
        self.name = name
        self.json = json
        self.secKey = secKey
        self.value = value
        self.indexed = indexed
    }

    /// Whether `fields` gives this field (a condition in a query, a change in a change).
    package func isGiven(in fields: ItemFields) -> Bool {
        switch value {
        case .string(let field): fields[keyPath: field] != nil
        case .data(let field): fields[keyPath: field] != nil
        case .port(let field): fields[keyPath: field] != nil
        }
    }

    /// The field's value in `fields` as Foundation holds it (a string, data, an integer), or nil.
    package func foundationValue(in fields: ItemFields) -> Any? {
        switch value {
        case .string(let field): fields[keyPath: field]
        case .data(let field): fields[keyPath: field]
        case .port(let field): fields[keyPath: field]
        }
    }

    /// Whether `item` has the value `given` asks for (true when `given` asks nothing).
    func matches(given: ItemFields, item: ItemFields) -> Bool {
        switch value {
        case .string(let field): given[keyPath: field].map { $0 == item[keyPath: field] } ?? true
        case .data(let field): given[keyPath: field].map { $0 == item[keyPath: field] } ?? true
        case .port(let field): given[keyPath: field].map { $0 == item[keyPath: field] } ?? true
        }
    }

    /// `changes`' value, when it gives one, written over `item`'s.
    func copy(from changes: ItemFields, into item: inout ItemFields) {
        switch value {
        case .string(let field):
            if let new = changes[keyPath: field] { item[keyPath: field] = new }
        case .data(let field):
            if let new = changes[keyPath: field] { item[keyPath: field] = new }
        case .port(let field):
            if let new = changes[keyPath: field] { item[keyPath: field] = new }
        }
    }
}

extension GenericPasswordAttributes {
    /// The item's fields as a query matches them and a change sets them: every one its class
    /// has (an internet password's empty service is none). Setting them writes back every field
    /// given; an internet password's location only when the item is one.
    package var fields: ItemFields {
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
