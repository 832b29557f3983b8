import Foundation

/// Input rules shared by every Keychain operation; a violation is `errSecParam` and nothing is
/// written.
enum Validation {
    static func check(string: String?, _ name: String) throws(KeychainError) {
        guard let string else { return }
        if string.utf8.count > Keychain.maximumAttributeSize {
            throw KeychainError(
                KeychainStatus.param,
                "\(name) is longer than \(Keychain.maximumAttributeSize) UTF-8 bytes")
        }
        if string.utf8.contains(0) {
            throw KeychainError(KeychainStatus.param, "\(name) contains a NUL character")
        }
    }

    static func check(generic: Data?) throws(KeychainError) {
        if let generic, generic.count > Keychain.maximumAttributeSize {
            throw KeychainError(
                KeychainStatus.param,
                "generic is larger than \(Keychain.maximumAttributeSize) bytes"
            )
        }
    }

    static func check(data: Data) throws(KeychainError) {
        if data.count > Keychain.maximumDataSize {
            throw KeychainError(
                KeychainStatus.param,
                "the secret is larger than \(Keychain.maximumDataSize) bytes")
        }
    }

    static func check(_ attributes: GenericPasswordAttributes) throws(KeychainError) {
        try check(string: attributes.service, "service")
        try check(string: attributes.account, "account")
        try check(string: attributes.accessGroup, "access group")
        try check(string: attributes.label, "label")
        try check(string: attributes.comment, "comment")
        try check(string: attributes.itemDescription, "description")
        try check(generic: attributes.generic)
        if let internet = attributes.internet {
            try check(InternetIndex(internet))
            if !attributes.service.isEmpty || attributes.generic != nil {
                throw noSuchAttribute("an internet password has no service or generic attribute")
            }
        }
        try check(attributes.accessControl, synchronizable: attributes.synchronizable)
    }

    static func check(_ internet: InternetIndex) throws(KeychainError) {
        try check(string: internet.server, "server")
        try check(string: internet.path, "path")
        try check(string: internet.internetProtocol, "protocol")
        try check(string: internet.authenticationType, "authentication type")
        try check(string: internet.securityDomain, "security domain")
        if let port = internet.port, !(0...65535).contains(port) {
            throw KeychainError(KeychainStatus.param, "a port is 0…65535")
        }
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
        try check(query.internetIndex)
        if query.itemClass == .genericPassword && !query.internetIndex.isEmpty {
            throw noSuchAttribute("a generic password has no internet attributes")
        }
        if query.itemClass == .internetPassword && (query.service != nil || query.generic != nil) {
            throw noSuchAttribute("an internet password has no service or generic attribute")
        }
        try check(string: query.service, "service")
        try check(string: query.account, "account")
        try check(string: query.accessGroup, "access group")
        try check(string: query.label, "label")
        try check(string: query.comment, "comment")
        try check(string: query.itemDescription, "description")
        try check(generic: query.generic)
    }

    static func check(_ changes: GenericPasswordChanges) throws(KeychainError) {
        try check(string: changes.service, "service")
        try check(string: changes.account, "account")
        try check(string: changes.accessGroup, "access group")
        try check(string: changes.label, "label")
        try check(string: changes.comment, "comment")
        try check(string: changes.itemDescription, "description")
        try check(generic: changes.generic)
        if let data = changes.data { try check(data: data) }
        try check(changes.internetIndex)
    }

    /// Changes must name attributes the item's class has.
    static func check(_ changes: GenericPasswordChanges, for item: GenericPasswordAttributes)
        throws(KeychainError)
    {
        if item.internet == nil && !changes.internetIndex.isEmpty {
            throw noSuchAttribute("a generic password has no internet attributes")
        }
        if item.internet != nil && (changes.service != nil || changes.generic != nil) {
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
