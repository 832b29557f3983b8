/// The D-Bus object path of a Secret Service item.
///
/// Ordered by number where the daemon numbers items (gnome-keyring names them
/// `…/collection/login/N` with N increasing), else lexically: a stable order for listings. It is
/// not creation order on every provider (KeePassXC's paths are random UUIDs), so nothing that must
/// agree across processes relies on it; the Keychain orders duplicates by the creation time sealed
/// in each record.
package struct ItemPath: Hashable, Sendable, Comparable, CustomStringConvertible {
    package let rawValue: String
    package init(_ rawValue: String) { self.rawValue = rawValue }
    package var description: String { rawValue }

    private var parts: (parent: Substring, number: Int?) {
        guard let slash = rawValue.lastIndex(of: "/") else { return (rawValue[...], nil) }
        return (rawValue[..<slash], Int(rawValue[rawValue.index(after: slash)...]))
    }

    package static func < (lhs: ItemPath, rhs: ItemPath) -> Bool {
        let (l, r) = (lhs.parts, rhs.parts)
        if l.parent == r.parent, let ln = l.number, let rn = r.number { return ln < rn }
        return lhs.rawValue < rhs.rawValue
    }
}

/// A collection's D-Bus object path; `.default` is the `default` alias (gnome-keyring's `login`).
package struct CollectionPath: Hashable, Sendable, CustomStringConvertible {
    package let rawValue: String
    package init(_ rawValue: String) { self.rawValue = rawValue }
    package static let `default` = CollectionPath("/org/freedesktop/secrets/aliases/default")
    package static let login = CollectionPath("/org/freedesktop/secrets/collection/login")
    package var description: String { rawValue }
}
