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
    }

    static func check(_ query: GenericPasswordQuery) throws(KeychainError) {
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
    }

    /// Synchronizable items must be able to leave the device.
    static func checkClass(_ attributes: GenericPasswordAttributes) throws(KeychainError) {
        if attributes.synchronizable && attributes.accessible.isThisDeviceOnly {
            throw KeychainError(
                KeychainStatus.param,
                "a synchronizable item cannot use a …ThisDeviceOnly accessibility class")
        }
    }
}
