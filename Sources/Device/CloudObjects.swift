import Foundation
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
    private let sealKey: SecureBytes

    package init(cloudKey: SecureBytes, kind: Kind) {
        self.kind = kind
        nameKey = KeyDerivation.keyedHash(key: cloudKey, context: "keepsake.cloud.name.v1")
        sealKey = KeyDerivation.keyedHash(key: cloudKey, context: kind.sealContext)
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

    private func associatedData(_ name: String) -> Data {
        Data("\(kind.associatedContext)\0\(name)".utf8)
    }

    /// The value that tells whether a cloud key is a given account's (stored in clear beside the
    /// wrapped account key).
    package static func accountCheck(_ cloudKey: SecureBytes) -> Data {
        KeyDerivation.keyedHash(key: cloudKey, context: "keepsake.cloud.check.v1").unsafeData()
    }
}

/// The names a store last synced, one per line, in the device directory: what tells a deletion
/// made here since the last sync from an object this device never saw.
package struct SyncManifest {
    package let file: URL
    package init(_ file: URL) { self.file = file }

    package func read() -> Set<String> {
        guard let bytes = (try? Files.read(file)) ?? nil else { return [] }
        return Set(String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    package func write(_ names: Set<String>) throws {
        try Files.writeAtomically(Data(names.sorted().joined(separator: "\n").utf8), to: file)
    }
}
