import Foundation

/// Input rules shared by every Keychain operation; a violation is `errSecParam` and nothing is
/// written.
enum Validation {
    static func check(data: Data) throws(KeychainError) {
        if data.count > Keychain.maximumDataSize {
            throw KeychainError(
                KeychainStatus.param,
                "the secret is larger than \(Keychain.maximumDataSize) bytes")
        }
    }

    static func check(_ attributes: GenericPasswordAttributes) throws(KeychainError) {
        try attributes.fields.check()
        if attributes.internet != nil, attributes.fields.hasGenericOnlyFields {
            throw noSuchAttribute("an internet password has no service or generic attribute")
        }
        try check(attributes.accessControl, synchronizable: attributes.synchronizable)
    }

    /// Apple's rules for `SecAccessControlCreateFlags` on a password item.
    static func check(_ constraints: AccessConstraints, synchronizable: Bool) throws(KeychainError)
    {
        guard AccessConstraints.known.isSuperset(of: constraints) else {
            throw KeychainError(KeychainStatus.param, "unknown access-control flags")
        }
        if constraints.contains(.or) && constraints.contains(.and) {
            throw KeychainError(KeychainStatus.param, "access control: both or and and")
        }
        if constraints.contains(.privateKeyUsage) {
            throw KeychainError(KeychainStatus.param, "privateKeyUsage is for keys, not passwords")
        }
        if synchronizable && !constraints.uses.isEmpty {
            throw KeychainError(
                KeychainStatus.param, "an item with access constraints cannot be synchronizable")
        }
    }

    private static func noSuchAttribute(_ why: String) -> KeychainError {
        KeychainError(KeychainStatus.noSuchAttribute, why)
    }

    static func check(_ query: GenericPasswordQuery) throws(KeychainError) {
        try query.fields.location.check()
        try check(fields: query.fields, of: query.itemClass)
        try query.fields.check()
    }

    static func check(_ changes: GenericPasswordChanges) throws(KeychainError) {
        try changes.fields.check()
        if let data = changes.data { try check(data: data) }
    }

    /// Changes must name attributes the item's class has.
    static func check(_ changes: GenericPasswordChanges, for item: GenericPasswordAttributes)
        throws(KeychainError)
    {
        try check(fields: changes.fields, of: item.itemClass)
    }

    /// `fields` names only attributes `itemClass` has.
    private static func check(fields: ItemFields, of itemClass: ItemClass) throws(KeychainError) {
        if itemClass == .genericPassword && fields.hasInternetFields {
            throw noSuchAttribute("a generic password has no internet attributes")
        }
        if itemClass == .internetPassword && fields.hasGenericOnlyFields {
            throw noSuchAttribute("an internet password has no service or generic attribute")
        }
    }

    /// Synchronizable items must be able to leave the device.
    static func checkClass(_ attributes: GenericPasswordAttributes) throws(KeychainError) {
        try check(attributes.accessControl, synchronizable: attributes.synchronizable)
        if attributes.synchronizable && attributes.accessible.isThisDeviceOnly {
            throw KeychainError(
                KeychainStatus.param,
                "a synchronizable item cannot use a …ThisDeviceOnly accessibility class")
        }
    }
}

extension ItemFields {
    /// Apple's limits (`errSecParam`), for every field of `ItemAttribute`: strings and bytes up
    /// to `Keychain.maximumAttributeSize` bytes, no NUL in a string, a number in its range (a
    /// port 0…65535).
    func check() throws(KeychainError) {
        let limit = Keychain.maximumAttributeSize
        for attribute in ItemAttribute.all {
            let name = attribute.name
            switch attribute.value {
            case .string(let field):
                guard let string = self[keyPath: field] else { continue }
                if string.utf8.count > limit {
                    throw KeychainError(.param, "\(name) is longer than \(limit) UTF-8 bytes")
                }
                if string.utf8.contains(0) {
                    throw KeychainError(.param, "\(name) contains a NUL character")
                }
            case .data(let field):
                if let bytes = self[keyPath: field], bytes.count > limit {
                    throw KeychainError(.param, "\(name) is larger than \(limit) bytes")
                }
            case .number(let field, let range):
                if let number = self[keyPath: field], !range.contains(number) {
                    throw KeychainError(
                        .param, "a \(name) is \(range.lowerBound)…\(range.upperBound)")
                }
            }
        }
    }
}
