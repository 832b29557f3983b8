import Foundation

/// How a generic password sits in the Secret Service.
///
/// The Secret Service *attributes* (stored in clear by every implementation) are only an index:
/// the schema name, the primary key, the class and a random item id, so that
/// `secret-tool search service S` finds items. The *secret* is a `StoredRecord`: the whole item,
/// attributes and data together, so that one batched `GetSecrets` answers a query without a
/// property round trip per item, and so that a cached object path can be validated (the record
/// names its own primary key and id).
enum SecretServiceSchema {
    /// The documented, stable schema name (`xdg:schema` attribute).
    static let name = "org.keepsake.GenericPassword"
    // Documented, stable attribute names.
    static let schema = "xdg:schema"
    static let service = "service"
    static let account = "account"
    static let accessGroup = "access-group"
    static let synchronizable = "synchronizable"
    static let accessible = "accessible"
    static let itemID = "keepsake-id"

    static func attributes(
        accessGroup: String?, service: String?, account: String?, synchronizable: Bool?,
        accessible: Accessibility?
    ) -> [String: String] {
        var attributes = [schema: name]
        attributes[SecretServiceSchema.accessGroup] = accessGroup
        attributes[SecretServiceSchema.service] = service
        attributes[SecretServiceSchema.account] = account
        attributes[SecretServiceSchema.synchronizable] = synchronizable.map { $0 ? "true" : "false" }
        attributes[SecretServiceSchema.accessible] = accessible?.rawValue
        return attributes
    }
}

/// The primary key of a generic password.
struct PrimaryKey: Hashable, Sendable {
    var accessGroup: String
    var service: String
    var account: String
    var synchronizable: Bool
}

/// The item as stored in the Secret Service's secret: a versioned, self-describing record.
///
/// Format (version 1): the magic `KSK1`, then fields as tag (1 byte), length (4 bytes, big
/// endian), value. Strings are UTF-8, dates are milliseconds since 1970 as 8 bytes big endian,
/// booleans one byte 0/1. Every tag at most once, in any order; unknown tags, missing required
/// fields and trailing bytes are refused. Binary rather than JSON because a read-all decodes one
/// record per item and must cost far less than the D-Bus round trip it saves.
struct StoredRecord: Sendable, Equatable {
    static let magic = Data("KSK1".utf8)

    var id: String
    var attributes: GenericPasswordAttributes
    var data: Data

    var key: PrimaryKey {
        PrimaryKey(
            accessGroup: attributes.accessGroup ?? "", service: attributes.service,
            account: attributes.account, synchronizable: attributes.synchronizable)
    }

    /// The Secret Service attributes that index this record.
    var secretServiceAttributes: [String: String] {
        var attributes = SecretServiceSchema.attributes(
            accessGroup: key.accessGroup, service: key.service, account: key.account,
            synchronizable: key.synchronizable, accessible: self.attributes.accessible)
        attributes[SecretServiceSchema.itemID] = id
        return attributes
    }

    var secretServiceLabel: String {
        attributes.label ?? "\(attributes.service) (\(attributes.account))"
    }

    private enum Tag: UInt8 {
        case id = 1, service, account, accessGroup, synchronizable, accessible, label, comment
        case itemDescription, generic, creationDate, modificationDate, data
    }

    func encoded() -> Data {
        var out = Self.magic
        func put(_ tag: Tag, _ bytes: some Collection<UInt8>) {
            out.append(tag.rawValue)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: bytes)
        }
        func put(_ tag: Tag, _ date: Date?) {
            guard let date else { return }
            let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
            withUnsafeBytes(of: milliseconds.bigEndian) { put(tag, Array($0)) }
        }
        let a = attributes
        put(.id, id.utf8)
        put(.service, a.service.utf8)
        put(.account, a.account.utf8)
        put(.accessGroup, (a.accessGroup ?? "").utf8)
        put(.synchronizable, [a.synchronizable ? 1 : 0])
        put(.accessible, a.accessible.rawValue.utf8)
        if let label = a.label { put(.label, label.utf8) }
        if let comment = a.comment { put(.comment, comment.utf8) }
        if let description = a.itemDescription { put(.itemDescription, description.utf8) }
        if let generic = a.generic { put(.generic, generic) }
        put(.creationDate, a.creationDate)
        put(.modificationDate, a.modificationDate)
        put(.data, data)
        return out
    }

    /// - Throws: `errSecDecode` for anything that is not a well-formed record of this version.
    static func decode(_ bytes: Data) throws(KeychainError) -> StoredRecord {
        guard bytes.starts(with: magic) else { throw malformed("unknown header") }
        var fields: [Tag: Data] = [:]
        var index = bytes.startIndex + magic.count
        while index < bytes.endIndex {
            guard bytes.endIndex - index >= 5, let tag = Tag(rawValue: bytes[index]) else {
                throw malformed("bad field header")
            }
            let length = bytes[(index + 1)..<(index + 5)].reduce(0) { $0 << 8 | Int($1) }
            let start = index + 5
            guard length <= bytes.endIndex - start else { throw malformed("truncated field") }
            guard fields[tag] == nil else { throw malformed("repeated field") }
            fields[tag] = bytes[start..<(start + length)]
            index = start + length
        }
        func string(_ tag: Tag) throws(KeychainError) -> String? {
            guard let field = fields[tag] else { return nil }
            guard let value = String(data: field, encoding: .utf8) else {
                throw malformed("invalid UTF-8")
            }
            return value
        }
        func required(_ tag: Tag) throws(KeychainError) -> String {
            guard let value = try string(tag) else { throw malformed("missing field") }
            return value
        }
        func date(_ tag: Tag) throws(KeychainError) -> Date? {
            guard let field = fields[tag] else { return nil }
            guard field.count == 8 else { throw malformed("bad date") }
            let milliseconds = Int64(bitPattern: field.reduce(0) { $0 << 8 | UInt64($1) })
            return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        guard let sync = fields[.synchronizable], sync.count == 1, sync.first! <= 1 else {
            throw malformed("bad synchronizable")
        }
        guard let accessible = Accessibility(rawValue: try required(.accessible)) else {
            throw malformed("unknown class")
        }
        guard let data = fields[.data] else { throw malformed("missing data") }
        var attributes = GenericPasswordAttributes(
            service: try required(.service), account: try required(.account),
            accessGroup: try required(.accessGroup), synchronizable: sync.first! == 1,
            accessible: accessible, label: try string(.label), comment: try string(.comment),
            itemDescription: try string(.itemDescription), generic: fields[.generic].map { Data($0) })
        attributes.creationDate = try date(.creationDate)
        attributes.modificationDate = try date(.modificationDate)
        return StoredRecord(id: try required(.id), attributes: attributes, data: Data(data))
    }

    private static func malformed(_ why: String) -> KeychainError {
        KeychainError(KeychainError.decode, "malformed Keepsake record: \(why)")
    }
}
