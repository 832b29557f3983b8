import Foundation
import Sealing

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
    /// The item's creator (`kSecAttrCreator`): a four-character code as a number, 0…2³²−1
    /// (`'aCrt'` is 0x61437274).
    public var creator: Int?
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
/// `kSecAttr…` key for it, whether the Secret Service's clear index holds it (a query with a
/// condition on a field the index does not hold reads secrets to decide), which class of item has
/// it, and — for a descriptive field (neither the primary key nor the index) — its tag in the
/// stored record (`StoredRecord`). Matching, changing, the limits, the item's own descriptive
/// fields and their storage, the dictionary API's keys, queries, changes and returned
/// attributes, the command line's JSON and the index read this table: a new descriptive field is
/// its property in ``ItemFields`` and a line here.
package struct ItemAttribute: Sendable {
    /// Where the field is, and what kind of value it holds.
    package enum Value: Sendable {
        case string(WritableKeyPath<ItemFields, String?> & Sendable)
        case data(WritableKeyPath<ItemFields, Data?> & Sendable)
        /// A whole number in `range` (Apple's `CFNumber` attributes: the port, …).
        case number(WritableKeyPath<ItemFields, Int?> & Sendable, ClosedRange<Int>)
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
    /// Part of an internet password's location (``InternetLocation``): an internet password's
    /// only.
    package let location: Bool
    /// A descriptive field's tag in the stored record (`StoredRecord`, whose own fields use the
    /// other tags); nil for the primary key and the location, which the record stores itself.
    package let recordTag: UInt8?

    package static let all: [ItemAttribute] = [
        ItemAttribute("service", "service", "svce", .string(\.service), indexed: true),
        ItemAttribute("account", "account", "acct", .string(\.account), indexed: true),
        ItemAttribute("access group", "accessGroup", "agrp", .string(\.accessGroup), indexed: true),
        ItemAttribute("label", "label", "labl", .string(\.label), recordTag: 7),
        ItemAttribute("comment", "comment", "icmt", .string(\.comment), recordTag: 8),
        ItemAttribute(
            "description", "description", "desc", .string(\.itemDescription), recordTag: 9),
        ItemAttribute("generic", "generic", "gena", .data(\.generic), recordTag: 10),
        ItemAttribute(
            "creator", "creator", "crtr", .number(\.creator, 0...0xFFFF_FFFF), recordTag: 23),
        ItemAttribute("server", "server", "srvr", .string(\.server), location: true),
        ItemAttribute("port", "port", "port", .number(\.port, 0...65535), location: true),
        ItemAttribute("path", "path", "path", .string(\.path), location: true),
        ItemAttribute("protocol", "protocol", "ptcl", .string(\.internetProtocol), location: true),
        ItemAttribute(
            "authentication type", "authenticationType", "atyp", .string(\.authenticationType),
            location: true),
        ItemAttribute(
            "security domain", "securityDomain", "sdmn", .string(\.securityDomain), location: true),
    ]

    /// The descriptive fields: an item keeps them in ``GenericPasswordAttributes``'s
    /// `described`, and the stored record under their `recordTag`s.
    package static let descriptive = all.filter { $0.recordTag != nil }

    /// A primary-key field (indexed, every item has it).
    private init(_ name: String, _ json: String, _ secKey: String, _ value: Value, indexed: Bool) {
        self.init(name, json, secKey, value, indexed: indexed, location: false, recordTag: nil)
    }

    /// A field of an internet password's location (indexed).
    private init(_ name: String, _ json: String, _ secKey: String, _ value: Value, location: Bool) {
        self.init(name, json, secKey, value, indexed: true, location: location, recordTag: nil)
    }

    /// A descriptive field, stored in the record under `recordTag` (not indexed).
    private init(_ name: String, _ json: String, _ secKey: String, _ value: Value, recordTag: UInt8)
    {
        self.init(name, json, secKey, value, indexed: false, location: false, recordTag: recordTag)
    }

    private init(
        _ name: String, _ json: String, _ secKey: String, _ value: Value, indexed: Bool,
        location: Bool, recordTag: UInt8?
    ) {
        self.name = name
        self.json = json
        self.secKey = secKey
        self.value = value
        self.indexed = indexed
        self.location = location
        self.recordTag = recordTag
    }

    /// Whether `keyPath` is this field's.
    func isField(_ keyPath: AnyKeyPath) -> Bool {
        switch value {
        case .string(let field): field == keyPath
        case .data(let field): field == keyPath
        case .number(let field, _): field == keyPath
        }
    }

    /// Writes this descriptive field of `fields`, when it has one, into a stored record.
    func encode(_ fields: ItemFields, into record: inout TLV) {
        guard let tag = recordTag else { return }
        switch value {
        case .string(let field): if let text = fields[keyPath: field] { record.append(tag, text) }
        case .data(let field): if let bytes = fields[keyPath: field] { record.append(tag, bytes) }
        case .number(let field, _):
            if let number = fields[keyPath: field] { record.append(tag, Int64(number)) }
        }
    }

    /// Reads this descriptive field from a stored record's fields into `fields` (absent: nil).
    /// - Throws: why the value is not one of this field (the record is malformed then).
    func decode(_ record: TLV.Fields, into fields: inout ItemFields) throws(SealingError) {
        guard let tag = recordTag else { return }
        switch value {
        case .string(let field): fields[keyPath: field] = try record.string(tag)
        case .data(let field): fields[keyPath: field] = record[tag].map { Data($0) }
        case .number(let field, _):
            fields[keyPath: field] = try record.int64(tag).flatMap { Int(exactly: $0) }
        }
    }

    /// Whether `fields` gives this field (a condition in a query, a change in a change).
    package func isGiven(in fields: ItemFields) -> Bool {
        switch value {
        case .string(let field): fields[keyPath: field] != nil
        case .data(let field): fields[keyPath: field] != nil
        case .number(let field, _): fields[keyPath: field] != nil
        }
    }

    /// The field's value in `fields` as Foundation holds it (a string, data, an integer), or nil.
    package func foundationValue(in fields: ItemFields) -> Any? {
        switch value {
        case .string(let field): fields[keyPath: field]
        case .data(let field): fields[keyPath: field]
        case .number(let field, _): fields[keyPath: field]
        }
    }

    /// Whether `item` has the value `given` asks for (true when `given` asks nothing).
    func matches(given: ItemFields, item: ItemFields) -> Bool {
        switch value {
        case .string(let field):
            given[keyPath: field].map { ExactNames.equal($0, item[keyPath: field]) } ?? true
        case .data(let field): given[keyPath: field].map { $0 == item[keyPath: field] } ?? true
        case .number(let field, _): given[keyPath: field].map { $0 == item[keyPath: field] } ?? true
        }
    }

    /// Whether `a` and `b` hold the same value of this field (strings byte for byte).
    func equal(_ a: ItemFields, _ b: ItemFields) -> Bool {
        switch value {
        case .string(let field): ExactNames.equal(a[keyPath: field], b[keyPath: field])
        case .data(let field): a[keyPath: field] == b[keyPath: field]
        case .number(let field, _): a[keyPath: field] == b[keyPath: field]
        }
    }

    /// This field of `fields` into `hasher` (strings as their bytes).
    func hash(_ fields: ItemFields, into hasher: inout Hasher) {
        switch value {
        case .string(let field): ExactNames.hash(fields[keyPath: field], into: &hasher)
        case .data(let field): hasher.combine(fields[keyPath: field])
        case .number(let field, _): hasher.combine(fields[keyPath: field])
        }
    }

    /// `fields`' value (nil included) written over `item`'s.
    func set(from fields: ItemFields, into item: inout ItemFields) {
        switch value {
        case .string(let field): item[keyPath: field] = fields[keyPath: field]
        case .data(let field): item[keyPath: field] = fields[keyPath: field]
        case .number(let field, _): item[keyPath: field] = fields[keyPath: field]
        }
    }

    /// `changes`' value, when it gives one, written over `item`'s.
    func copy(from changes: ItemFields, into item: inout ItemFields) {
        switch value {
        case .string(let field):
            if let new = changes[keyPath: field] { item[keyPath: field] = new }
        case .data(let field):
            if let new = changes[keyPath: field] { item[keyPath: field] = new }
        case .number(let field, _):
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
            var fields = internet?.fields ?? ItemFields()
            fields.service = internet != nil && service.isEmpty ? nil : service
            fields.account = account
            fields.accessGroup = accessGroup
            for attribute in ItemAttribute.descriptive {
                attribute.set(from: described, into: &fields)
            }
            return fields
        }
        set {
            service = newValue.service ?? service
            account = newValue.account ?? account
            accessGroup = newValue.accessGroup ?? accessGroup
            for attribute in ItemAttribute.descriptive {
                attribute.copy(from: newValue, into: &described)
            }
            internet = internet.map { InternetLocation(newValue, over: $0) }
        }
    }

    /// A descriptive field by name (`attributes.label`, `attributes.comment`, …): the item's own,
    /// nil when it has none; set to nil, it is removed. Any other field reads as the item has it
    /// (the item's `fields`) and, set, replaces it when given.
    public subscript<Value>(dynamicMember field: WritableKeyPath<ItemFields, Value?>) -> Value? {
        get { fields[keyPath: field] }
        set {
            if ItemAttribute.descriptive.contains(where: { $0.isField(field) }) {
                described[keyPath: field] = newValue
            } else {
                var changed = fields
                changed[keyPath: field] = newValue
                fields = changed
            }
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
