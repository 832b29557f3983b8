import Foundation
import Sealing

/// The secret of an item with access constraints, as its record holds it: sealed under a random
/// item key, which is wrapped so that only the credentials the constraints name unwrap it.
///
/// - passcode (`devicePasscode`, `userPresence`): the item key is sealed (X25519 sealed box) to
///   the device's presence public key; its secret key is released only to a proved passcode,
///   counted by the lock screen's guess limit (`Device.presenceSecretKey`). Adding needs no
///   passcode, as on Apple platforms.
/// - `applicationPassword`: the item key is sealed under Argon2id(app password, a salt of the
///   item's own, the device's passcode cost).
/// - Several constraints must all be met (the app-password envelope inside the sealed box), or
///   with `or` any one (one wrap each). Biometry and companion constraints can never be met here
///   (no such hardware): a wrap for them is never made, so an item needing them alone never
///   opens — as on a Mac without Touch ID.
///
/// Format: magic `KSA1`, then `TLV` fields: salt (1), Argon2id operations (2) and memory (3),
/// the wrap needing every constraint (4), the passcode wrap (5), the app-password wrap (6), the
/// data envelope (7). The data envelope's associated data names the constraint flags, so a record
/// whose flags were edited does not open.
struct ProtectedData {
    static let magic = Data("KSA1".utf8)

    /// The credentials of one use, in the form sealing needs.
    struct Credentials {
        /// Sealing: the device's presence public key (needed when a passcode constraint is).
        var presencePublicKey: Data?
        /// Opening: the presence secret key, from a proved passcode.
        var presenceSecretKey: SecureBytes?
        var applicationPassword: SecureBytes?
    }

    /// What a constraint set asks for.
    private struct Needs {
        var passcode: Bool
        var applicationPassword: Bool
        /// Biometry or a companion device: nothing on Linux provides it.
        var unavailable: Bool
        var any: Bool

        init(_ constraints: AccessConstraints) {
            passcode = constraints.needsPasscode
            applicationPassword = constraints.needsApplicationPassword
            unavailable = constraints.needsUnavailable
            any = constraints.contains(.or)
        }
    }

    private static func associatedData(_ constraints: AccessConstraints) -> Data {
        var out = TLV(magic: Data("keepsake.acl.v1\0".utf8))
        out.append(1, Int64(bitPattern: constraints.rawValue))
        return out.bytes
    }

    /// Seals `data` for `constraints`.
    ///
    /// - Throws: `errSecAuthFailed` when a credential that sealing needs is missing (the app
    ///   password; the presence public key of a device without a passcode).
    static func seal(
        _ data: Data, constraints: AccessConstraints, credentials: Credentials, cost: Argon2Cost
    ) throws(KeychainError) -> Data {
        let needs = Needs(constraints)
        let itemKey = SecureBytes(randomCount: Envelope.keyLength)
        var out = TLV(magic: magic)
        var passwordKey: SecureBytes?
        if needs.applicationPassword, needs.any || !needs.unavailable {
            guard let password = credentials.applicationPassword else {
                throw KeychainError(
                    KeychainStatus.authFailed, "this item needs the app's password to be added")
            }
            let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
            out.append(1, salt)
            out.append(2, Int64(cost.operations))
            out.append(3, Int64(cost.memoryBytes))
            passwordKey = try derive(password, salt: salt, cost: cost)
        }
        func toPresence(_ key: SecureBytes) throws(KeychainError) -> Data {
            guard let publicKey = credentials.presencePublicKey else {
                throw KeychainError(KeychainStatus.authFailed, "no presence key")
            }
            do { return try SealedBox.seal(key, to: publicKey) } catch {
                throw KeychainError(KeychainStatus.authFailed, "the presence key is unusable")
            }
        }
        if needs.any {
            if needs.passcode { out.append(5, try toPresence(itemKey)) }
            if let passwordKey { out.append(6, wrap(itemKey, under: passwordKey)) }
        } else if !needs.unavailable {
            // Every constraint: the app-password wrap inside the passcode's sealed box.
            var inner = itemKey
            if let passwordKey {
                inner = SecureBytes(copying: wrap(itemKey, under: passwordKey))
            }
            out.append(4, needs.passcode ? try toPresence(inner) : inner.unsafeData())
        }
        let envelope = Envelope.seal(
            data, key: itemKey, associatedData: associatedData(constraints))
        out.append(7, envelope)
        return out.bytes
    }

    /// Opens `blob` with the credentials of this use.
    ///
    /// - Throws: `errSecAuthFailed` for wrong credentials or constraints nothing here can meet;
    ///   `errSecDecode` for a malformed blob.
    static func open(
        _ blob: Data, constraints: AccessConstraints, credentials: Credentials
    ) throws(KeychainError) -> Data {
        let needs = Needs(constraints)
        let fields = try KeychainTLV.fields(blob, magic: magic, knownTags: 1...7)
        guard let envelope = fields[7] else { throw KeychainTLV.malformed("no data envelope") }
        var passwordKey: SecureBytes?
        if let salt = fields[1], let password = credentials.applicationPassword {
            guard let operations = try? fields.int64(2), let memory = try? fields.int64(3),
                operations > 0, memory > 0
            else { throw KeychainTLV.malformed("bad password cost") }
            let cost = Argon2Cost(operations: UInt64(operations), memoryBytes: Int(memory))
            guard cost.isWithinBounds else { throw KeychainTLV.malformed("bad password cost") }
            passwordKey = try derive(password, salt: salt, cost: cost)
        }
        func fromPresence(_ sealed: Data) throws(KeychainError) -> SecureBytes {
            guard let secretKey = credentials.presenceSecretKey,
                let publicKey = credentials.presencePublicKey
            else { throw failed }
            do {
                return try SealedBox.open(sealed, publicKey: publicKey, secretKey: secretKey)
            } catch {
                throw failed
            }
        }
        var itemKey: SecureBytes?
        if needs.any {
            if let wrap = fields[5], credentials.presenceSecretKey != nil {
                itemKey = try fromPresence(wrap)
            } else if let wrap = fields[6], let passwordKey {
                itemKey = try unwrap(wrap, under: passwordKey)
            }
        } else if let wrap = fields[4] {
            var inner = needs.passcode ? try fromPresence(wrap) : SecureBytes(copying: wrap)
            if needs.applicationPassword {
                guard let passwordKey else { throw failed }
                inner = try unwrap(inner.unsafeData(), under: passwordKey)
            }
            itemKey = inner
        }
        guard let itemKey else { throw failed }
        do {
            return try Envelope.open(
                envelope, key: itemKey, associatedData: associatedData(constraints)
            ) { Data($0) }
        } catch {
            throw failed
        }
    }

    private static let failed = KeychainError(
        KeychainStatus.authFailed, "the credentials given do not open this item")

    private static func derive(_ password: SecureBytes, salt: Data, cost: Argon2Cost)
        throws(KeychainError) -> SecureBytes
    {
        do { return try KeyDerivation.argon2id(passcode: password, salt: salt, cost: cost) } catch {
            throw KeychainError(KeychainStatus.authFailed, "the app password: \(error)")
        }
    }

    private static let wrapAssociatedData = Data("keepsake.acl.itemkey.v1".utf8)

    private static func wrap(_ key: SecureBytes, under wrapping: SecureBytes) -> Data {
        key.withUnsafeBytes { Envelope.seal($0, key: wrapping, associatedData: wrapAssociatedData) }
    }

    private static func unwrap(_ wrapped: Data, under wrapping: SecureBytes) throws(KeychainError)
        -> SecureBytes
    {
        do {
            return try Envelope.open(wrapped, key: wrapping, associatedData: wrapAssociatedData)
        } catch { throw failed }
    }
}
