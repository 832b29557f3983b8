internal import CSodium
import Foundation
import Platform

/// An oblivious pseudorandom function on ristretto255 (2HashDH, as in OPAQUE and RFC 9497's
/// base mode): the output `F(k, x) = H(x, k · H₁(x))` is computed between a client that holds `x`
/// and a server that holds `k`, and neither learns the other's input. The client sends
/// `r · H₁(x)` for a fresh random scalar `r` — a uniformly random group element whatever `x` is —
/// the server answers `k · (r · H₁(x))`, and the client removes `r`. Without `k` nobody (the server's
/// network, the cloud, a recording relay) can test a guess of `x` against anything it saw; the
/// server answers each guess once and can count it.
package enum OPRF {
    package static let elementLength = Int(crypto_core_ristretto255_BYTES)
    package static let scalarLength = Int(crypto_core_ristretto255_SCALARBYTES)

    /// A new server key: a random non-zero scalar.
    package static func newKey() -> SecureBytes {
        Sodium.initialize()
        return SecureBytes(count: scalarLength) {
            crypto_core_ristretto255_scalar_random($0.bytePointer)
        }
    }

    /// The client's first step: the blind `r` (kept) and `r · H₁(input)` (sent).
    package static func blind(_ input: SecureBytes, context: String) -> (
        blind: SecureBytes, blinded: Data
    ) {
        Sodium.initialize()
        let point = hashToGroup(input, context: context)
        let blind = newKey()
        var blinded = Data(count: elementLength)
        blinded.withUnsafeMutableBytes { out in
            blind.withUnsafeBytes { r in
                point.withUnsafeBytes { p in
                    // A random scalar times a valid non-identity point: never the identity.
                    _ = crypto_scalarmult_ristretto255(
                        out.bytePointer,
                        r.bytePointer,
                        p.bytePointer)
                }
            }
        }
        return (blind, blinded)
    }

    /// The server's step: `key · blinded`.
    ///
    /// - Throws: `.malformed` for bytes that are not a canonical ristretto255 element, or the
    ///   identity (checked before the key touches them).
    package static func evaluate(_ blinded: Data, key: SecureBytes) throws(SealingError) -> Data {
        try multiplied(blinded, by: key)
    }

    /// The server's public key `K = key · G`, which a client pins and checks every evaluation's
    /// proof against.
    package static func publicKey(_ key: SecureBytes) -> Data {
        Sodium.initialize()
        var out = Data(count: elementLength)
        out.withUnsafeMutableBytes { o in
            key.withUnsafeBytes { k in
                _ = crypto_scalarmult_ristretto255_base(o.bytePointer, k.bytePointer)
            }
        }
        return out
    }

    /// Length of a proof: the challenge and the response, one scalar each.
    package static let proofLength = 2 * scalarLength

    /// The server's step with its proof (RFC 9497's verifiable mode, one element): `Z = key · B`
    /// and a Chaum–Pedersen proof that `log_G K = log_B Z` — the same key that `publicKey` names
    /// evaluated `B`. A fresh `t`: `A₁ = t·G`, `A₂ = t·B`, `c = H(K, B, Z, A₁, A₂)`, `s = t − c·key`.
    ///
    /// - Throws: `.malformed` as `evaluate` does.
    package static func evaluateWithProof(_ blinded: Data, key: SecureBytes, context: String)
        throws(SealingError) -> (evaluated: Data, proof: Data)
    {
        let evaluated = try evaluate(blinded, key: key)
        let nonce = newKey()
        let commitments = try commit(nonce, blinded)
        let challenge = proofChallenge(
            publicKey(key), blinded, evaluated, commitments.0, commitments.1, context: context)
        var response = Data(count: scalarLength)
        response.withUnsafeMutableBytes { out in
            var product = [UInt8](repeating: 0, count: scalarLength)
            challenge.withUnsafeBytes { c in
                key.withUnsafeBytes { k in
                    crypto_core_ristretto255_scalar_mul(&product, c.bytePointer, k.bytePointer)
                }
            }
            nonce.withUnsafeBytes { t in
                crypto_core_ristretto255_scalar_sub(out.bytePointer, t.bytePointer, product)
            }
            sodium_memzero(&product, product.count)
        }
        return (evaluated, challenge + response)
    }

    /// The client's check of `proof`: `evaluated` is `blinded` under the key whose public key is
    /// `publicKey`. False for anything else, malformed elements and scalars included.
    package static func verify(
        proof: Data, publicKey: Data, blinded: Data, evaluated: Data, context: String
    ) -> Bool {
        Sodium.initialize()
        guard proof.count == proofLength, (try? validate(publicKey)) != nil,
            (try? validate(blinded)) != nil, (try? validate(evaluated)) != nil
        else { return false }
        let challenge = Data(proof.prefix(scalarLength))
        let response = Data(proof.suffix(scalarLength))
        guard isCanonicalScalar(challenge), isCanonicalScalar(response),
            let sG = multiplyPublic(nil, response), let cK = multiplyPublic(publicKey, challenge),
            let sB = multiplyPublic(blinded, response),
            let cZ = multiplyPublic(evaluated, challenge)
        else { return false }
        let first = add(sG, cK)
        let second = add(sB, cZ)
        let expected = proofChallenge(
            publicKey, blinded, evaluated, first, second, context: context)
        return constantTimeEquals(expected, challenge)
    }

    /// `t·G` and `t·B`.
    private static func commit(_ nonce: SecureBytes, _ blinded: Data) throws(SealingError) -> (
        Data, Data
    ) {
        var onBase = Data(count: elementLength)
        onBase.withUnsafeMutableBytes { o in
            nonce.withUnsafeBytes { t in
                _ = crypto_scalarmult_ristretto255_base(o.bytePointer, t.bytePointer)
            }
        }
        return (onBase, try multiplied(blinded, by: nonce))
    }

    /// The proof's challenge: 64 bytes of BLAKE2b over every element, reduced to a scalar.
    private static func proofChallenge(
        _ publicKey: Data, _ blinded: Data, _ evaluated: Data, _ first: Data, _ second: Data,
        context: String
    ) -> Data {
        let transcript = publicKey + blinded + evaluated + first + second
        let wide = transcript.withUnsafeBytes { wideHash(of: $0, context: context + " proof") }
        var scalar = Data(count: scalarLength)
        scalar.withUnsafeMutableBytes { out in
            wide.withUnsafeBytes { w in
                crypto_core_ristretto255_scalar_reduce(out.bytePointer, w.bytePointer)
            }
        }
        return scalar
    }

    /// `scalar · element` (`G` for nil) of public values; nil for the identity.
    private static func multiplyPublic(_ element: Data?, _ scalar: Data) -> Data? {
        var out = Data(count: elementLength)
        let rc = out.withUnsafeMutableBytes { o in
            scalar.withUnsafeBytes { s in
                guard let element else {
                    return crypto_scalarmult_ristretto255_base(o.bytePointer, s.bytePointer)
                }
                return element.withUnsafeBytes { e in
                    crypto_scalarmult_ristretto255(o.bytePointer, s.bytePointer, e.bytePointer)
                }
            }
        }
        return rc == 0 ? out : nil
    }

    private static func add(_ a: Data, _ b: Data) -> Data {
        var out = Data(count: elementLength)
        out.withUnsafeMutableBytes { o in
            a.withUnsafeBytes { x in
                b.withUnsafeBytes { y in
                    _ = crypto_core_ristretto255_add(o.bytePointer, x.bytePointer, y.bytePointer)
                }
            }
        }
        return out
    }

    /// A scalar below the group order (reducing it changes nothing).
    private static func isCanonicalScalar(_ scalar: Data) -> Bool {
        var wide = [UInt8](scalar) + [UInt8](repeating: 0, count: 32)
        var reduced = [UInt8](repeating: 0, count: scalarLength)
        crypto_core_ristretto255_scalar_reduce(&reduced, &wide)
        return reduced == [UInt8](scalar)
    }

    /// The client's last step: the function's output, `H(input ‖ r⁻¹ · evaluated)`.
    ///
    /// - Throws: `.malformed` when `evaluated` is not a valid non-identity element.
    package static func finalize(
        _ input: SecureBytes, blind: SecureBytes, evaluated: Data, context: String
    ) throws(SealingError) -> SecureBytes {
        Sodium.initialize()
        let inverse = SecureBytes(count: scalarLength) { out in
            blind.withUnsafeBytes { r in
                _ = crypto_core_ristretto255_scalar_invert(out.bytePointer, r.bytePointer)
            }
        }
        let unblinded = try typed {
            try SecureBytes(count: elementLength) { try multiply(evaluated, by: inverse, into: $0) }
        }
        // H(x, N): the input keyed by the unblinded element, both only in owned memory.
        let inputHash = KeyDerivation.keyedHash(key: input, context: context + " input")
        return inputHash.withUnsafeBytes { x in
            KeyDerivation.keyedHash(
                key: unblinded, context: context + " output",
                UnsafeRawBufferPointer(x).bindMemory(to: UInt8.self))
        }
    }

    /// 64 bytes of unkeyed BLAKE2b over `bytes` under `context`, to reduce or map to the group.
    private static func wideHash(of bytes: UnsafeRawBufferPointer, context: String) -> SecureBytes {
        SecureBytes(count: 64) { out in
            KeyDerivation.blake2b(
                key: UnsafeRawBufferPointer(start: nil, count: 0), context: context, into: out
            ) { update in update(bytes) }
        }
    }

    /// `H₁`: the input hashed to a group element (64 bytes of BLAKE2b, then Elligator).
    static func hashToGroup(_ input: SecureBytes, context: String) -> SecureBytes {
        let wide = input.withUnsafeBytes { wideHash(of: $0, context: context + " hash-to-group") }
        return SecureBytes(count: elementLength) { out in
            wide.withUnsafeBytes { h in
                _ = crypto_core_ristretto255_from_hash(out.bytePointer, h.bytePointer)
            }
        }
    }

    /// Checks that `element` is a canonical ristretto255 encoding of a point other than the
    /// identity: what `evaluate` accepts (a server checks before it counts).
    package static func validate(_ element: Data) throws(SealingError) {
        Sodium.initialize()
        guard element.count == elementLength,
            element.contains(where: { $0 != 0 }),  // the identity encodes as zeros
            element.withUnsafeBytes({
                crypto_core_ristretto255_is_valid_point($0.bytePointer)
            }) == 1
        else {
            throw SealingError(.malformed, "not a ristretto255 element other than the identity")
        }
    }

    /// `scalar · element`, for a public result.
    private static func multiplied(_ element: Data, by scalar: SecureBytes) throws(SealingError)
        -> Data
    {
        try typed {
            var out = Data(count: elementLength)
            try out.withUnsafeMutableBytes { try multiply(element, by: scalar, into: $0) }
            return out
        }
    }

    /// `body`'s result, where `body` throws only `multiply`'s errors through rethrowing calls.
    private static func typed<T>(_ body: () throws -> T) throws(SealingError) -> T {
        do { return try body() } catch let error as SealingError { throw error } catch {
            throw SealingError(.malformed, "\(error)")
        }
    }

    private static func multiply(
        _ element: Data, by scalar: SecureBytes, into out: UnsafeMutableRawBufferPointer
    ) throws(SealingError) {
        try validate(element)
        let rc = element.withUnsafeBytes { e in
            scalar.withUnsafeBytes { s in
                crypto_scalarmult_ristretto255(out.bytePointer, s.bytePointer, e.bytePointer)
            }
        }
        // Non-zero: the result is the identity (the input was, or the scalar is zero).
        guard rc == 0 else { throw SealingError(.malformed, "the identity element") }
    }
}

/// Ed25519 signatures (`crypto_sign_detached`): a key pair from a 32-byte seed, so that a key
/// derived from a secret (an OPRF output, the account key) signs without being stored.
package enum Signature {
    package static let publicKeyLength = Int(crypto_sign_PUBLICKEYBYTES)
    package static let length = Int(crypto_sign_BYTES)

    package static func keyPair(seed: SecureBytes) -> (publicKey: Data, secretKey: SecureBytes) {
        Sodium.seededKeyPair(
            seed, seedLength: Int(crypto_sign_SEEDBYTES), publicKeyLength: publicKeyLength,
            secretKeyLength: Int(crypto_sign_SECRETKEYBYTES), crypto_sign_seed_keypair)
    }

    package static func sign(_ message: Data, secretKey: SecureBytes) -> Data {
        Sodium.initialize()
        var signature = Data(count: length)
        signature.withUnsafeMutableBytes { sig in
            message.withUnsafeBytes { m in
                secretKey.withUnsafeBytes { sk in
                    _ = crypto_sign_detached(
                        sig.bytePointer, nil,
                        m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count),
                        sk.bytePointer)
                }
            }
        }
        return signature
    }

    package static func verify(_ signature: Data, of message: Data, publicKey: Data) -> Bool {
        Sodium.initialize()
        guard signature.count == length, publicKey.count == publicKeyLength else { return false }
        return signature.withUnsafeBytes { sig in
            message.withUnsafeBytes { m in
                publicKey.withUnsafeBytes { pk in
                    crypto_sign_verify_detached(
                        sig.bytePointer,
                        m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count),
                        pk.bytePointer) == 0
                }
            }
        }
    }
}
