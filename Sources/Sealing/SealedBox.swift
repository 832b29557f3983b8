internal import CSodium
import Foundation
import Platform

/// libsodium's sealed boxes (`crypto_box_seal`, X25519 + XSalsa20-Poly1305): a message sealed to
/// a public key that only the holder of its secret key opens, the sender anonymous. Joining a
/// cloud account by approval carries the account key this way.
package enum SealedBox {
    package static let publicKeyLength = Int(crypto_box_PUBLICKEYBYTES)

    /// A new key pair: the public key in the clear, the secret key in owned memory.
    package static func keyPair() -> (publicKey: Data, secretKey: SecureBytes) {
        Sodium.initialize()
        var publicKey = Data(count: publicKeyLength)
        let secretKey = SecureBytes(count: Int(crypto_box_SECRETKEYBYTES)) { secret in
            publicKey.withUnsafeMutableBytes { pk in
                _ = crypto_box_keypair(pk.bytePointer, secret.bytePointer)
            }
        }
        return (publicKey, secretKey)
    }

    /// The key pair that follows from a 32-byte `seed` (`crypto_box_seed_keypair`): a device's
    /// own pair from its device secret, the recovery pair from the recovery key.
    package static func keyPair(seed: SecureBytes) -> (publicKey: Data, secretKey: SecureBytes) {
        Sodium.seededKeyPair(
            seed, seedLength: Int(crypto_box_SEEDBYTES), publicKeyLength: publicKeyLength,
            secretKeyLength: Int(crypto_box_SECRETKEYBYTES), crypto_box_seed_keypair)
    }

    /// Seals `message` (key bytes) to `publicKey`.
    package static func seal(_ message: SecureBytes, to publicKey: Data) throws(SealingError)
        -> Data
    {
        Sodium.initialize()
        guard publicKey.count == publicKeyLength else {
            throw SealingError(.authentication, "a public key is \(publicKeyLength) bytes")
        }
        var out = Data(count: message.count + crypto_box_sealbytes())
        let result = message.withUnsafeBytes { m in
            out.withUnsafeMutableBytes { c in
                publicKey.withUnsafeBytes { pk in
                    crypto_box_seal(
                        c.bytePointer,
                        m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count),
                        pk.bytePointer)
                }
            }
        }
        guard result == 0 else { throw SealingError(.authentication, "crypto_box_seal failed") }
        return out
    }

    /// Opens a sealed box into owned memory.
    package static func open(_ sealed: Data, publicKey: Data, secretKey: SecureBytes)
        throws(SealingError) -> SecureBytes
    {
        Sodium.initialize()
        return try opened(
            sealed, overhead: crypto_box_sealbytes(), publicKey: publicKey, secretKey: secretKey,
            what: "sealed box"
        ) { out, sealed, pk, sk in
            crypto_box_seal_open(out, sealed.baseAddress!, UInt64(sealed.count), pk, sk)
        }
    }

    /// Boxes `message` from `secretKey` to `publicKey` (`crypto_box_easy`, a random nonce in
    /// front): only the holder of `publicKey`'s secret key opens it, and only as from `secretKey`'s
    /// public key — the sender is authenticated, unlike `seal`.
    package static func box(_ message: SecureBytes, to publicKey: Data, from secretKey: SecureBytes)
        throws(SealingError) -> Data
    {
        Sodium.initialize()
        guard publicKey.count == publicKeyLength else {
            throw SealingError(.authentication, "a public key is \(publicKeyLength) bytes")
        }
        let nonceLength = Int(crypto_box_NONCEBYTES)
        var out = Data(count: nonceLength + message.count + Int(crypto_box_MACBYTES))
        let result = out.withUnsafeMutableBytes { o in
            let base = o.bytePointer
            randombytes_buf(base, nonceLength)
            return message.withUnsafeBytes { m in
                publicKey.withUnsafeBytes { pk in
                    secretKey.withUnsafeBytes { sk in
                        crypto_box_easy(
                            base + nonceLength, m.bindMemory(to: UInt8.self).baseAddress,
                            UInt64(m.count), base, pk.bytePointer,
                            sk.bytePointer)
                    }
                }
            }
        }
        guard result == 0 else { throw SealingError(.authentication, "crypto_box_easy failed") }
        return out
    }

    /// Opens a box made by `box` from `publicKey`'s holder, into owned memory.
    package static func unbox(_ boxed: Data, from publicKey: Data, secretKey: SecureBytes)
        throws(SealingError) -> SecureBytes
    {
        Sodium.initialize()
        let nonceLength = Int(crypto_box_NONCEBYTES)
        return try opened(
            boxed, overhead: nonceLength + Int(crypto_box_MACBYTES), publicKey: publicKey,
            secretKey: secretKey, what: "box"
        ) { out, boxed, pk, sk in
            let base = boxed.baseAddress!
            return crypto_box_open_easy(
                out, base + nonceLength, UInt64(boxed.count - nonceLength), base, pk, sk)
        }
    }

    /// `ciphertext` opened into owned memory by `open` (given the output, the ciphertext, the
    /// public and the secret key; 0 when it opened), after the bounds every box has: at least
    /// `overhead` bytes, a message of at most 1,024 bytes, a public key of its length.
    private static func opened(
        _ ciphertext: Data, overhead: Int, publicKey: Data, secretKey: SecureBytes, what: String,
        _ open: (
            UnsafeMutablePointer<UInt8>, UnsafeBufferPointer<UInt8>, UnsafePointer<UInt8>,
            UnsafePointer<UInt8>
        ) -> Int32
    ) throws(SealingError) -> SecureBytes {
        guard ciphertext.count >= overhead, ciphertext.count <= overhead + 1024,
            publicKey.count == publicKeyLength
        else { throw SealingError(.authentication, "not a \(what)") }
        var result: Int32 = -1
        let opened = SecureBytes(count: ciphertext.count - overhead) { out in
            result = ciphertext.withUnsafeBytes { c in
                publicKey.withUnsafeBytes { pk in
                    secretKey.withUnsafeBytes { sk in
                        open(
                            out.bytePointer,
                            c.bindMemory(to: UInt8.self),
                            pk.bytePointer,
                            sk.bytePointer)
                    }
                }
            }
        }
        guard result == 0 else { throw SealingError(.authentication, "the \(what) does not open") }
        return opened
    }
}
