import Foundation
import Keychain

/// A listing of an app's generic passwords as the command line prints it and the C interface
/// returns it: the attributes as one JSON object each, never a secret.
extension Keychain {
    /// Every generic password matching `query`, without its secret; an empty listing is not an
    /// error.
    package func listing(_ query: GenericPasswordQuery) throws -> [GenericPasswordItem] {
        do {
            return try items(matching: query, limit: .all, returnData: false)
        } catch  where error.status == KeychainStatus.itemNotFound {
            return []
        }
    }
}

extension GenericPasswordAttributes {
    /// The attributes as JSON; never the secret.
    package var jsonObject: [String: Any] {
        var object: [String: Any] = [
            "synchronizable": synchronizable, "accessible": accessible.commandLineName,
        ]
        // Every field the item has, as `ItemAttribute` names it (`generic` is bytes: not shown).
        for attribute in ItemAttribute.all {
            if case .data = attribute.value { continue }
            object[attribute.json] = attribute.foundationValue(in: fields)
        }
        object["accessGroup"] = accessGroup ?? ""
        if !accessControl.isEmpty {
            object["accessControl"] = accessControl.rawValue
        }
        object["creationDate"] = creationDate.map { Int64($0.timeIntervalSince1970 * 1000) }
        object["modificationDate"] = modificationDate.map {
            Int64($0.timeIntervalSince1970 * 1000)
        }
        return object
    }
}
