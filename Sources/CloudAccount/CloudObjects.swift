import Device
import Foundation
import Platform
import Sealing

/// The one rule every store follows for its objects in the cloud account.
///
/// An object's name is its kind's prefix (`bs-`, `kv-`, `ab-`, `kc-`) and a keyed hash, under the
/// account's name key, of what identifies it — so whoever holds the cloud directory learns neither
/// app ids nor keys. Its content is sealed under the kind's own key, derived from the account's
/// cloud key, with the kind and the object's name as associated data — so an object copied under
/// another name (another item, app or store) does not open.
package struct CloudObjects {
    /// One kind of cloud object: its name prefix and the derivation labels of its keys.
    package struct Kind: Sendable {
        package let prefix: String
        let nameContext: String
        let sealContext: String
        let associatedContext: String

        /// A kind whose labels all follow from `store` (`keepsake.cloud.<store>.v1`, …).
        package init(prefix: String, store: String) {
            self.init(
                prefix: prefix, nameContext: "keepsake.cloud.\(store)-name.v1",
                sealContext: "keepsake.cloud.\(store).v1",
                associatedContext: "keepsake.cloud.\(store).v1")
        }

        /// A kind with labels of its own (the Block Store's, pinned by its fixtures).
        package init(
            prefix: String, nameContext: String, sealContext: String, associatedContext: String
        ) {
            self.prefix = prefix
            self.nameContext = nameContext
            self.sealContext = sealContext
            self.associatedContext = associatedContext
        }
    }

    package let kind: Kind
    private let nameKey: SecureBytes
    fileprivate let sealKey: SecureBytes

    package init(cloudKey: SecureBytes, kind: Kind) {
        self.kind = kind
        nameKey = AccountKey.nameKey(cloudKey)
        sealKey = KeyDerivation.keyedHash(
            key: AccountKey.epochKey(cloudKey), context: kind.sealContext)
    }

    /// The kinds of object the stores keep in the cloud account, by prefix: the one table key
    /// rotation re-seals by.
    package static let kinds: [Kind] = [
        blockStore, Kind(prefix: "kc-", store: "keychain"), Kind(prefix: "kv-", store: "kvstore"),
        Kind(prefix: "ab-", store: "autobackup"),
    ]
    /// The Block Store's kind, with the labels its fixtures pin.
    package static let blockStore = Kind(
        prefix: "bs-", nameContext: "keepsake.cloud.blockstore-name.v1",
        sealContext: "keepsake.cloud.entry.v1", associatedContext: "keepsake.cloud.blockstore.v1")
    package static func kind(_ prefix: String) -> Kind { kinds.first { $0.prefix == prefix }! }
    /// The kind of a listed cloud name, or nil for the account's own objects.
    package static func kind(ofObjectNamed name: String) -> Kind? {
        kinds.first { name.hasPrefix($0.prefix) }
    }

    /// A value that names the account across key rotations (a store's cache remembers it to tell
    /// an account change): derived from the name key, which rotation keeps.
    package static func accountIdentity(_ cloudKey: SecureBytes, context: String) -> Data {
        KeyDerivation.keyedHash(key: AccountKey.nameKey(cloudKey), context: context).unsafeData()
    }

    /// `bytes`, an object of this kind sealed under `old`, sealed under `new` instead (same name).
    package static func reseal(
        _ bytes: Data, name: String, kind: Kind, from old: SecureBytes, to new: SecureBytes
    ) throws(SealingError) -> Data {
        let source = CloudObjects(cloudKey: old, kind: kind)
        let target = CloudObjects(cloudKey: new, kind: kind)
        return try Envelope.open(
            bytes, key: source.sealKey, associatedData: source.associatedData(name)
        ) { plaintext in target.seal(plaintext, name: name) }
    }

    /// The name of the object identified by `identity` (its parts joined by NUL).
    package func name(_ identity: String...) -> String {
        kind.prefix
            + KeyDerivation.keyedHash(
                key: nameKey, context: kind.nameContext, Data(identity.joined(separator: "\0").utf8)
            ).unsafeData().hexString
    }

    /// Whether a listed cloud name is of this kind.
    package func owns(_ name: String) -> Bool { name.hasPrefix(kind.prefix) }

    package func seal(_ plaintext: some DataProtocol, name: String) -> Data {
        Envelope.seal(plaintext, key: sealKey, associatedData: associatedData(name))
    }

    /// Opens an object read under `name` and decodes its plaintext; a tampered, swapped or
    /// undecodable object throws.
    package func open<R>(_ bytes: Data, name: String, _ decode: (Data) throws -> R)
        throws(SealingError) -> R
    {
        try Envelope.open(bytes, key: sealKey, associatedData: associatedData(name)) {
            try decode(Data($0))
        }
    }

    fileprivate func associatedData(_ name: String) -> Data {
        Data("\(kind.associatedContext)\0\(name)".utf8)
    }

    /// The value that tells whether a cloud key is a given account's current key (stored in
    /// clear in `account`).
    package static func accountCheck(_ cloudKey: SecureBytes) -> Data {
        KeyDerivation.keyedHash(
            key: AccountKey.epochKey(cloudKey), context: "keepsake.cloud.check.v1"
        )
        .unsafeData()
    }
}

/// The account key a device holds: 32 bytes (the account's first key, from which every other
/// key derives), or 64 after a rotation — the current epoch's key, then the name key.
///
/// Rotation changes what seals objects, never what names them: names stay (they are keyed
/// hashes of identities every device of the account knows anyway), so an object re-sealed under
/// a new key keeps its name, and a store finds it without knowing anything new.
package enum AccountKey {
    /// The key everything of the current epoch is sealed under (by derivation).
    package static func epochKey(_ key: SecureBytes) -> SecureBytes {
        key.count == 32
            ? key
            : SecureBytes(count: 32) { out in
                key.withUnsafeBytes {
                    out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<32]))
                }
            }
    }

    /// The key names are derived under: from the first key, kept through every rotation.
    package static func nameKey(_ key: SecureBytes) -> SecureBytes {
        key.count == 32
            ? KeyDerivation.keyedHash(key: key, context: "keepsake.cloud.name.v1")
            : SecureBytes(count: 32) { out in
                key.withUnsafeBytes {
                    out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[32..<64]))
                }
            }
    }

    /// The next epoch's key: a new random epoch key, the same name key.
    package static func rotated(_ key: SecureBytes) -> SecureBytes {
        let names = nameKey(key)
        return SecureBytes(count: 64) { out in
            KeyDerivation.randomFill(UnsafeMutableRawBufferPointer(rebasing: out[0..<32]))
            names.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[32..<64]).copyMemory(from: $0)
            }
        }
    }

    /// Whether `key` has the shape of an account key.
    package static func isValid(_ key: SecureBytes) -> Bool { key.count == 32 || key.count == 64 }
}

/// The names a store last synced, one per line, in the device directory: what tells a deletion
/// made here since the last sync from an object this device never saw.
package struct SyncManifest {
    package let file: URL
    package init(_ file: URL) { self.file = file }

    package func read() -> Set<String> { Set(readDigests().keys) }

    /// The names, each with the digest of what was uploaded under it ("" when not kept): one
    /// line per name, `name` or `name digest`.
    package func readDigests() -> [String: String] {
        guard let bytes = (try? Files.read(file)) ?? nil else { return [:] }
        var digests: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            digests[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return digests
    }

    package func write(_ names: Set<String>, digests: [String: String] = [:]) throws {
        let lines = names.sorted().map { name in
            digests[name].map { "\(name) \($0)" } ?? name
        }
        try Files.writeAtomically(Data(lines.joined(separator: "\n").utf8), to: file)
    }
}
