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
struct PrimaryKey: Hashable, Sendable, Codable {
    var accessGroup: String
    var service: String
    var account: String
    var synchronizable: Bool
}

/// The item as stored in the Secret Service's secret: a versioned, self-describing record.
struct StoredRecord: Codable, Sendable, Equatable {
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

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return Self.magic + (try encoder.encode(self))
    }

    /// - Throws: `KeychainError.decode` for anything that is not a record of this version.
    static func decode(_ bytes: Data) throws(KeychainError) -> StoredRecord {
        guard bytes.starts(with: magic) else {
            throw KeychainError(KeychainError.decode, "not a Keepsake record (unknown header)")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        do {
            return try decoder.decode(StoredRecord.self, from: bytes.dropFirst(magic.count))
        } catch {
            throw KeychainError(KeychainError.decode, "malformed Keepsake record")
        }
    }
}
