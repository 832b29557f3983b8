import Foundation
import Sealing

/// How a generic password sits in the Secret Service.
///
/// The Secret Service *attributes* (stored in clear by every implementation) are only an index:
/// the schema name, the primary key, the class and a random item id, so that
/// `secret-tool search service S` finds items. The *secret* is a `StoredRecord`: the whole item,
/// attributes and data together, so that one batched `GetSecrets` answers a query without a
/// property round trip per item, and so that a cached object path can be validated (the record
/// names its own primary key and id).
enum SecretServiceSchema {
    /// The documented, stable schema names (`xdg:schema` attribute), one per item class.
    static let name = "org.keepsake.GenericPassword"
    static let internetName = "org.keepsake.InternetPassword"
    // Documented, stable attribute names.
    static let schema = "xdg:schema"
    static let service = "service"
    static let account = "account"
    static let accessGroup = "access-group"
    static let synchronizable = "synchronizable"
    static let accessible = "accessible"
    static let itemID = "keepsake-id"
    // Internet passwords only.
    static let server = "server"
    static let port = "port"
    static let path = "path"
    static let internetProtocol = "protocol"
    static let authenticationType = "authentication-type"
    static let securityDomain = "security-domain"

    static func schemaName(_ itemClass: ItemClass) -> String {
        itemClass == .internetPassword ? internetName : name
    }

    static func attributes(
        itemClass: ItemClass = .genericPassword, accessGroup: String?, service: String?,
        account: String?, synchronizable: Bool?, accessible: Accessibility?,
        internet: ItemFields = ItemFields()
    ) -> [String: String] {
        var attributes = [schema: schemaName(itemClass)]
        attributes[SecretServiceSchema.accessGroup] = accessGroup
        if itemClass == .internetPassword {
            attributes[server] = internet.server
            attributes[port] = internet.port.map(String.init)
            attributes[path] = internet.path
            attributes[internetProtocol] = internet.internetProtocol
            attributes[authenticationType] = internet.authenticationType
            attributes[securityDomain] = internet.securityDomain
        } else {
            attributes[SecretServiceSchema.service] = service
        }
        attributes[SecretServiceSchema.account] = account
        attributes[SecretServiceSchema.synchronizable] = synchronizable.map {
            $0 ? "true" : "false"
        }
        attributes[SecretServiceSchema.accessible] = accessible?.rawValue
        return attributes
    }
}

/// The primary key of a password: a generic password's (service), or an internet password's
/// (`internet`, service empty).
struct PrimaryKey: Hashable, Sendable {
    var accessGroup: String
    var service: String
    var account: String
    var synchronizable: Bool
    var internet: InternetLocation? = nil

    var itemClass: ItemClass { internet == nil ? .genericPassword : .internetPassword }

    /// The Secret Service attributes that find every item with this key.
    var searchAttributes: [String: String] {
        SecretServiceSchema.attributes(
            itemClass: itemClass, accessGroup: accessGroup, service: service, account: account,
            synchronizable: synchronizable, accessible: nil,
            internet: internet?.fields ?? ItemFields())
    }
}

/// A primary key is its bytes (`ExactNames`): canonically equivalent names are two keys.
extension PrimaryKey {
    static func == (a: PrimaryKey, b: PrimaryKey) -> Bool {
        a.synchronizable == b.synchronizable && a.internet == b.internet
            && ExactNames.equal(a.accessGroup, b.accessGroup)
            && ExactNames.equal(a.service, b.service) && ExactNames.equal(a.account, b.account)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(synchronizable)
        hasher.combine(internet)
        for part in [accessGroup, service, account] { ExactNames.hash(part, into: &hasher) }
    }
}

/// The item as stored in the Secret Service's secret: a versioned, self-describing record.
///
/// Format (version 1): the magic `KSK1`, then `TLV` fields. Strings are UTF-8, dates are milliseconds since 1970 as 8 bytes big endian,
/// booleans one byte 0/1; missing required fields are refused. Binary rather than JSON because a read-all decodes one
/// record per item and must cost far less than the D-Bus round trip it saves.
struct StoredRecord: Sendable, Equatable {
    static let magic = Data("KSK1".utf8)

    var id: String
    var attributes: GenericPasswordAttributes
    var data: Data
    /// Added without any data (Apple's `SecItemAdd` without `kSecValueData`): read back with no
    /// data, not empty data, as on iOS. `data` is empty then.
    var dataAbsent = false

    var key: PrimaryKey {
        PrimaryKey(
            accessGroup: attributes.accessGroup ?? "", service: attributes.service,
            account: attributes.account, synchronizable: attributes.synchronizable,
            internet: attributes.internet)
    }

    /// The Secret Service attributes that index this record.
    var secretServiceAttributes: [String: String] {
        var attributes = key.searchAttributes
        attributes[SecretServiceSchema.accessible] = self.attributes.accessible.rawValue
        attributes[SecretServiceSchema.itemID] = id
        return attributes
    }

    /// Whether this record is what an index search with `attributes` should have found (without
    /// building the record's own attribute dictionary: this runs once per item of a read-all).
    func matchesIndex(_ attributes: [String: String]) -> Bool {
        attributes.allSatisfy { name, value in
            let internet = self.attributes.internet
            return switch name {
            case SecretServiceSchema.schema:
                value == SecretServiceSchema.schemaName(self.attributes.itemClass)
            case SecretServiceSchema.service: value == self.attributes.service
            case SecretServiceSchema.account: value == self.attributes.account
            case SecretServiceSchema.accessGroup: value == key.accessGroup
            case SecretServiceSchema.synchronizable:
                value == (key.synchronizable ? "true" : "false")
            case SecretServiceSchema.accessible: value == self.attributes.accessible.rawValue
            case SecretServiceSchema.itemID: value == id
            case SecretServiceSchema.server: value == internet?.server
            case SecretServiceSchema.port: value == internet.map { String($0.port) }
            case SecretServiceSchema.path: value == internet?.path
            case SecretServiceSchema.internetProtocol: value == internet?.internetProtocol
            case SecretServiceSchema.authenticationType: value == internet?.authenticationType
            case SecretServiceSchema.securityDomain: value == internet?.securityDomain
            default: false
            }
        }
    }

    var secretServiceLabel: String {
        attributes.label
            ?? "\(attributes.internet?.server ?? attributes.service) (\(attributes.account))"
    }

    /// Fields 14 and later are written only when set: a generic password without access control
    /// (or the other optional flags) encodes as fields 1–13 alone, and such a record decodes.
    /// The record's own fields; 7–10 (and any tag after `dataAbsent`) are the descriptive
    /// fields', by `ItemAttribute.recordTag`.
    private enum Tag: UInt8 {
        case id = 1
        case service, account, accessGroup, synchronizable, accessible
        case creationDate = 11
        case modificationDate, data
        case server, port, path, internetProtocol, authenticationType, securityDomain
        case accessControl, givenAsData, dataAbsent
    }

    /// Every tag a record of this version may hold.
    private static let knownTags =
        Tag.id
        .rawValue...max(
            Tag.dataAbsent.rawValue, ItemAttribute.descriptive.compactMap(\.recordTag).max() ?? 0)

    func encoded() -> Data {
        var out = TLV(magic: Self.magic)
        func put(_ tag: Tag, _ date: Date?) {
            guard let date else { return }
            let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
            withUnsafeBytes(of: milliseconds.bigEndian) { out.append(tag.rawValue, Array($0)) }
        }
        let a = attributes
        out.append(Tag.id.rawValue, id.utf8)
        out.append(Tag.service.rawValue, a.service.utf8)
        out.append(Tag.account.rawValue, a.account.utf8)
        out.append(Tag.accessGroup.rawValue, (a.accessGroup ?? "").utf8)
        out.append(Tag.synchronizable.rawValue, [a.synchronizable ? 1 : 0])
        out.append(Tag.accessible.rawValue, a.accessible.rawValue.utf8)
        for attribute in ItemAttribute.descriptive { attribute.encode(a.described, into: &out) }
        put(.creationDate, a.creationDate)
        put(.modificationDate, a.modificationDate)
        out.append(Tag.data.rawValue, data)
        if let internet = a.internet {
            out.append(Tag.server.rawValue, internet.server)
            out.append(Tag.port.rawValue, Int64(internet.port))
            out.append(Tag.path.rawValue, internet.path)
            out.append(Tag.internetProtocol.rawValue, internet.internetProtocol)
            out.append(Tag.authenticationType.rawValue, internet.authenticationType)
            out.append(Tag.securityDomain.rawValue, internet.securityDomain)
        }
        if !a.accessControl.isEmpty {
            out.append(Tag.accessControl.rawValue, Int64(bitPattern: a.accessControl.rawValue))
        }
        if !a.givenAsData.isEmpty { out.append(Tag.givenAsData.rawValue, [a.givenAsData.rawValue]) }
        if dataAbsent { out.append(Tag.dataAbsent.rawValue, [1]) }
        return out.bytes
    }

    /// - Throws: `errSecDecode` for anything that is not a well-formed record of this version.
    static func decode(_ bytes: Data) throws(KeychainError) -> StoredRecord {
        let raw = try KeychainTLV.fields(bytes, magic: magic, knownTags: knownTags)
        struct ByTag {
            let raw: TLV.Fields
            subscript(tag: Tag) -> Data? { raw[tag.rawValue] }
        }
        let fields = ByTag(raw: raw)
        func string(_ tag: Tag) throws(KeychainError) -> String? {
            do { return try raw.string(tag.rawValue) } catch { throw malformed("invalid UTF-8") }
        }
        func required(_ tag: Tag) throws(KeychainError) -> String {
            guard let value = try string(tag) else { throw malformed("missing field") }
            return value
        }
        func integer(_ tag: Tag) throws(KeychainError) -> Int64? {
            do { return try raw.int64(tag.rawValue) } catch { throw malformed("bad integer") }
        }
        func date(_ tag: Tag) throws(KeychainError) -> Date? {
            guard let milliseconds = try integer(tag) else { return nil }
            return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        // Missing or not one byte 0/1 alike.
        guard let synchronizable = try? raw.bool(Tag.synchronizable.rawValue) else {
            throw malformed("bad synchronizable")
        }
        guard let accessible = Accessibility(rawValue: try required(.accessible)) else {
            throw malformed("unknown class")
        }
        guard let data = fields[.data] else { throw malformed("missing data") }
        var attributes = GenericPasswordAttributes(
            service: try required(.service), account: try required(.account),
            accessGroup: try required(.accessGroup), synchronizable: synchronizable,
            accessible: accessible)
        for attribute in ItemAttribute.descriptive {
            do { try attribute.decode(raw, into: &attributes.described) } catch {
                throw malformed("\(attribute.name): \(error.message)")
            }
        }
        if fields[.server] != nil {
            guard let port = try integer(.port), (0...65535).contains(port) else {
                throw malformed("bad port")
            }
            attributes.internet = InternetLocation(
                server: try required(.server), port: Int(port), path: try required(.path),
                internetProtocol: try required(.internetProtocol),
                authenticationType: try required(.authenticationType),
                securityDomain: try required(.securityDomain))
            guard attributes.service.isEmpty, attributes.generic == nil else {
                throw malformed("an internet password with generic-password fields")
            }
        }
        if let flags = try integer(.accessControl) {
            attributes.accessControl = AccessConstraints(rawValue: UInt64(bitPattern: flags))
            guard AccessConstraints.known.isSuperset(of: attributes.accessControl) else {
                throw malformed("unknown access-control flags")
            }
        }
        if let flags = fields[.givenAsData] {
            guard flags.count == 1 else { throw malformed("bad data-valued flags") }
            attributes.givenAsData = DataValuedAttributes(rawValue: flags.first!)
        }
        attributes.creationDate = try date(.creationDate)
        attributes.modificationDate = try date(.modificationDate)
        var record = StoredRecord(id: try required(.id), attributes: attributes, data: Data(data))
        if let absent = fields[.dataAbsent] {
            guard absent == Data([1]), data.isEmpty else { throw malformed("bad no-data flag") }
            record.dataAbsent = true
        }
        return record
    }

    private static func malformed(_ why: String) -> KeychainError { KeychainTLV.malformed(why) }
}
