import Foundation

/// A name is its bytes. Swift's `String` equality is canonical equivalence — `"caf\u{E9}"` equals
/// `"cafe\u{301}"` — while Apple's Keychain, the Secret Service and every cloud name compare
/// attribute strings byte for byte: two such names are two items. Every comparison, hash, cache
/// key and duplicate check of an item's fields goes through these, so an item is never found,
/// cached, replaced or hidden under a name that is only canonically equivalent to its own.
enum ExactNames {
    static func equal(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (let a?, let b?): a.utf8.elementsEqual(b.utf8)
        default: false
        }
    }

    /// Whether `names` holds `name`, byte for byte.
    static func contains(_ names: some Sequence<String>, _ name: String) -> Bool {
        names.contains { equal($0, name) }
    }

    static func hash(_ text: String?, into hasher: inout Hasher) {
        guard let text else { return hasher.combine(0 as UInt8) }
        hasher.combine(1 as UInt8)
        hasher.combine(text.utf8.count)
        for byte in text.utf8 { hasher.combine(byte) }
    }
}

extension ItemFields {
    public static func == (a: ItemFields, b: ItemFields) -> Bool {
        ItemAttribute.all.allSatisfy { $0.equal(a, b) }
    }

    public func hash(into hasher: inout Hasher) {
        for attribute in ItemAttribute.all { attribute.hash(self, into: &hasher) }
    }
}

extension InternetLocation {
    public static func == (a: InternetLocation, b: InternetLocation) -> Bool {
        a.port == b.port && ExactNames.equal(a.server, b.server) && ExactNames.equal(a.path, b.path)
            && ExactNames.equal(a.internetProtocol, b.internetProtocol)
            && ExactNames.equal(a.authenticationType, b.authenticationType)
            && ExactNames.equal(a.securityDomain, b.securityDomain)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(port)
        for part in [server, path, internetProtocol, authenticationType, securityDomain] {
            ExactNames.hash(part, into: &hasher)
        }
    }
}

extension GenericPasswordAttributes {
    public static func == (a: GenericPasswordAttributes, b: GenericPasswordAttributes) -> Bool {
        ExactNames.equal(a.service, b.service) && ExactNames.equal(a.account, b.account)
            && ExactNames.equal(a.accessGroup, b.accessGroup)
            && a.synchronizable == b.synchronizable && a.accessible == b.accessible
            && a.described == b.described && a.internet == b.internet
            && a.accessControl == b.accessControl && a.givenAsData == b.givenAsData
            && a.creationDate == b.creationDate && a.modificationDate == b.modificationDate
    }

    public func hash(into hasher: inout Hasher) {
        for part in [service, account, accessGroup] { ExactNames.hash(part, into: &hasher) }
        hasher.combine(synchronizable)
        hasher.combine(accessible)
        hasher.combine(described)
        hasher.combine(internet)
        hasher.combine(accessControl)
    }
}
