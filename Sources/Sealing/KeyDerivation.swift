internal import CSodium
import Foundation
import Platform

/// Argon2id (libsodium `crypto_pwhash`, ALG_ARGON2ID13) cost parameters, stored beside each salt
/// so a verifier made with one cost is checked with that cost.
package struct Argon2Cost: Sendable, Hashable, Codable {
    package var operations: UInt64
    package var memoryBytes: Int

    package init(operations: UInt64, memoryBytes: Int) {
        self.operations = operations
        self.memoryBytes = memoryBytes
    }

    /// libsodium's MODERATE: about half a second here — the default for a device's passcode.
    package static let moderate = Argon2Cost(
        operations: UInt64(crypto_pwhash_OPSLIMIT_MODERATE),
        memoryBytes: Int(crypto_pwhash_MEMLIMIT_MODERATE))
    /// libsodium's INTERACTIVE: about 0.1 s.
    package static let interactive = Argon2Cost(
        operations: UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE),
        memoryBytes: Int(crypto_pwhash_MEMLIMIT_INTERACTIVE))
    /// The minimum libsodium accepts: for tests only, never for real passcodes.
    package static let minimum = Argon2Cost(
        operations: UInt64(crypto_pwhash_OPSLIMIT_MIN), memoryBytes: Int(crypto_pwhash_MEMLIMIT_MIN)
    )

    /// Whether a cost read from outside (a cloud account's key blob) is one Keepsake would use:
    /// between `minimum` and libsodium's SENSITIVE (4 passes, 1 GiB). Anything else is refused, so
    /// that a hostile blob cannot make a device spend hours or all its memory on one guess.
    package var isWithinBounds: Bool {
        (UInt64(crypto_pwhash_OPSLIMIT_MIN)...UInt64(crypto_pwhash_OPSLIMIT_SENSITIVE))
            .contains(operations)
            && (Int(crypto_pwhash_MEMLIMIT_MIN)...Int(crypto_pwhash_MEMLIMIT_SENSITIVE))
                .contains(memoryBytes)
    }

    /// By name, as `KEEPSAKE_ARGON2_COST` gives it.
    package init?(name: String) {
        switch name {
        case "moderate": self = .moderate
        case "interactive": self = .interactive
        case "minimum": self = .minimum
        default: return nil
        }
    }
}

package enum KeyDerivation {
    package static let saltLength = Int(crypto_pwhash_SALTBYTES)

    /// A 32-byte key from a passcode with Argon2id. Mirrors `crypto_pwhash`.
    package static func argon2id(passcode: SecureBytes, salt: some DataProtocol, cost: Argon2Cost)
        throws(SealingError) -> SecureBytes
    {
        Sodium.initialize()
        let saltBytes = Array(salt)
        guard saltBytes.count == saltLength else {
            throw SealingError(.keyDerivation, "bad salt length")
        }
        var result: Int32 = -1
        let key = SecureBytes(count: Envelope.keyLength) { out in
            result = passcode.withUnsafeBytes { p in
                crypto_pwhash(
                    out.bytePointer, UInt64(out.count),
                    p.bindMemory(to: CChar.self).baseAddress!, UInt64(p.count), saltBytes,
                    cost.operations, cost.memoryBytes, crypto_pwhash_ALG_ARGON2ID13)
            }
        }
        guard result == 0 else { throw SealingError(.keyDerivation, "crypto_pwhash failed") }
        return key
    }

    /// A 32-byte subkey: BLAKE2b keyed by `key` over a context label and `input`
    /// (`crypto_generichash`). Used to combine a passcode key with the device secret and to name
    /// things without revealing them.
    package static func keyedHash(
        key: SecureBytes, context: String, _ input: some DataProtocol = Data()
    )
        -> SecureBytes
    {
        Sodium.initialize()
        // Streamed (init / update / final), so the input — often key bytes — is hashed in place
        // and never copied into an unwiped buffer.
        return SecureBytes(count: 32) { out in
            key.withUnsafeBytes { k in
                blake2b(key: k, context: context, into: out) { update in
                    withWipedContiguousBytes(input) { update($0) }
                }
            }
        }
    }

    /// BLAKE2b streamed (init / update / final) into `out` (its length is the digest's):
    /// keyed by `key` (empty: unkeyed), over `context` and its NUL, then whatever `body` passes
    /// to its update function. The state is an over-aligned C struct Swift does not import: raw
    /// memory of libsodium's stated size and alignment, wiped before it is freed.
    static func blake2b(
        key: UnsafeRawBufferPointer, context: String, into out: UnsafeMutableRawBufferPointer,
        _ body: ((UnsafeRawBufferPointer) -> Void) -> Void
    ) {
        let size = crypto_generichash_statebytes()
        let state = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer {
            sodium_memzero(state, size)
            state.deallocate()
        }
        let typed = OpaquePointer(state)
        _ = crypto_generichash_init(
            typed, key.bindMemory(to: UInt8.self).baseAddress, key.count, out.count)
        var prefix = Array(context.utf8) + [0]
        _ = crypto_generichash_update(typed, &prefix, UInt64(prefix.count))
        body { bytes in
            _ = crypto_generichash_update(
                typed, bytes.bindMemory(to: UInt8.self).baseAddress, UInt64(bytes.count))
        }
        _ = crypto_generichash_final(typed, out.bytePointer, out.count)
    }

    /// Fills `buffer` with random bytes (`randombytes_buf`).
    package static func randomFill(_ buffer: UnsafeMutableRawBufferPointer) {
        Sodium.initialize()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(base, buffer.count)
    }

    /// Random bytes (`randombytes_buf`), for salts and ids.
    package static func randomBytes(_ count: Int) -> Data {
        Sodium.initialize()
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, count)
        return Data(bytes)
    }
}
