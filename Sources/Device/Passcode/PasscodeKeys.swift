import Foundation
import Sealing

/// The pure key derivations of the lock screen: no storage, no D-Bus, no TPM — testable without
/// storage (Argon2id's vectors: `Fixtures/sealing/argon2id.json`).
///
/// - passcode key = Argon2id(passcode, salt, cost)
/// - software verifier = BLAKE2b(key: device secret, "keepsake.passcode.verifier.v2" ‖ passcode key)
/// - software KEK = BLAKE2b(key: device secret, "keepsake.kek.passcode.v1" ‖ passcode key)
/// - TPM authorization = BLAKE2b(key: passcode key, "keepsake.tpm.auth.v1")
/// - counted or TPM KEK = BLAKE2b(key: device secret, "keepsake.kek.passcode-tpm.v1" ‖ passcode
///   key ‖ the secret the guess counter service or the TPM released)
/// - device KEK (no knowledge factor) = BLAKE2b(key: device secret, "keepsake.kek.device.v1")
///
/// So a guess can be checked only with the device secret (software path: the login keyring's
/// contents) or only by the guess counter service or the TPM (their secret is released to a
/// proof of the right passcode alone, under their count).
package enum PasscodeKeys {
    package static func passcodeKey(_ passcode: SecureBytes, salt: Data, cost: Argon2Cost)
        throws(DeviceError) -> SecureBytes
    {
        do {
            return try KeyDerivation.argon2id(passcode: passcode, salt: salt, cost: cost)
        } catch {
            throw DeviceError(.corrupt, "\(error)", underlying: error)
        }
    }

    package static func verifier(passcodeKey: SecureBytes, deviceSecret: SecureBytes) -> Data {
        passcodeKey.withUnsafeBytes {
            KeyDerivation.keyedHash(
                key: deviceSecret, context: "keepsake.passcode.verifier.v2", $0
            ).unsafeData()
        }
    }

    /// Version 1 records' verifier (Argon2id alone): read once, then replaced.
    package static func version1Verifier(passcodeKey: SecureBytes) -> Data {
        KeyDerivation.keyedHash(key: passcodeKey, context: "keepsake.passcode.verifier.v1")
            .unsafeData()
    }

    package static func softwareKEK(passcodeKey: SecureBytes, deviceSecret: SecureBytes)
        -> SecureBytes
    {
        passcodeKey.withUnsafeBytes {
            KeyDerivation.keyedHash(key: deviceSecret, context: "keepsake.kek.passcode.v1", $0)
        }
    }

    package static func tpmAuthorization(passcodeKey: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(key: passcodeKey, context: "keepsake.tpm.auth.v1")
    }

    /// The KEK on the counted path: the passcode key, the secret the guess counter released, the
    /// device secret (`releasedSecretKEK`, as a direct TPM slot's).
    package static func counterKEK(
        passcodeKey: SecureBytes, counterSecret: SecureBytes, deviceSecret: SecureBytes
    ) -> SecureBytes {
        releasedSecretKEK(
            passcodeKey: passcodeKey, releasedSecret: counterSecret, deviceSecret: deviceSecret)
    }

    /// The KEK from the passcode key and a secret released only to the right passcode (by the
    /// guess counter, or a direct TPM slot), keyed by the device secret.
    package static func releasedSecretKEK(
        passcodeKey: SecureBytes, releasedSecret secret: SecureBytes, deviceSecret: SecureBytes
    ) -> SecureBytes {
        let joined = SecureBytes(count: passcodeKey.count + secret.count) { out in
            passcodeKey.withUnsafeBytes { out.copyMemory(from: $0) }
            secret.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[passcodeKey.count...]).copyMemory(
                    from: $0)
            }
        }
        return joined.withUnsafeBytes {
            KeyDerivation.keyedHash(key: deviceSecret, context: "keepsake.kek.passcode-tpm.v1", $0)
        }
    }

    package static func deviceKEK(_ deviceSecret: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(key: deviceSecret, context: "keepsake.kek.device.v1")
    }

    /// A class key's check value: BLAKE2b keyed by the device secret over the class and the key.
    /// Kept in the device record beside the wrapped keys, so that a key found in the kernel
    /// keyring is used only when it is this device's own (the Device module's `RuntimeKeys`).
    package static func check(
        _ key: UnsafeRawBufferPointer, _ protection: ProtectionClass, deviceSecret: SecureBytes
    ) -> Data {
        KeyDerivation.keyedHash(
            key: deviceSecret, context: "keepsake.runtime-key.check.v1\0\(protection.rawValue)", key
        ).unsafeData()
    }

    /// The check values of `keys`, as the device record keeps them.
    package static func checks(_ keys: [ProtectionClass: SecureBytes], deviceSecret: SecureBytes)
        -> [String: Data]
    {
        keys.reduce(into: [:]) { checks, entry in
            checks[entry.key.rawValue] = entry.value.withUnsafeBytes {
                check($0, entry.key, deviceSecret: deviceSecret)
            }
        }
    }

    private static func associatedData(_ protection: ProtectionClass) -> Data {
        Data("keepsake.classkey.v1\0\(protection.rawValue)".utf8)
    }

    package static func wrap(_ keys: [ProtectionClass: SecureBytes], kek: SecureBytes)
        -> [String: Data]
    {
        var wrapped: [String: Data] = [:]
        for (protection, key) in keys {
            wrapped[protection.rawValue] = key.withUnsafeBytes {
                Envelope.seal($0, key: kek, associatedData: associatedData(protection))
            }
        }
        return wrapped
    }

    /// - Throws: `.corrupt` when a key does not open (a wrong KEK, a tampered record).
    package static func unwrap(_ wrapped: [String: Data], kek: SecureBytes) throws(DeviceError)
        -> [ProtectionClass: SecureBytes]
    {
        var keys: [ProtectionClass: SecureBytes] = [:]
        for (raw, envelope) in wrapped where raw != presenceEntry {
            guard let protection = ProtectionClass(rawValue: raw) else {
                throw DeviceError(.corrupt, "unknown class in device state")
            }
            do {
                keys[protection] = try Envelope.open(
                    envelope, key: kek, associatedData: associatedData(protection))
            } catch {
                throw DeviceError(.corrupt, "a class key does not open", underlying: error)
            }
        }
        return keys
    }

    // MARK: - The presence key

    /// Where the presence seed sits beside the class keys in the device record's `wrappedKeys`: wrapped under the same
    /// KEK, so only a proved passcode opens it, but never put in runtime state. Its X25519 key
    /// pair (`SealedBox.keyPair(seed:)`) seals the item keys of items that need the passcode at
    /// each use; the public half is in the record, so such items are added without the passcode.
    package static let presenceEntry = "presence"
    private static let presenceAssociatedData = Data("keepsake.presencekey.v1".utf8)

    package static func wrapPresence(_ seed: SecureBytes, kek: SecureBytes) -> Data {
        seed.withUnsafeBytes {
            Envelope.seal($0, key: kek, associatedData: presenceAssociatedData)
        }
    }

    /// The presence seed in `wrapped`, nil when the device has none yet.
    package static func unwrapPresence(_ wrapped: [String: Data], kek: SecureBytes)
        throws(DeviceError)
        -> SecureBytes?
    {
        guard let envelope = wrapped[presenceEntry] else { return nil }
        do {
            return try Envelope.open(envelope, key: kek, associatedData: presenceAssociatedData)
        } catch {
            throw DeviceError(.corrupt, "the presence key does not open", underlying: error)
        }
    }
}
