internal import CSodium
import Foundation

/// XChaCha20-Poly1305 (IETF) envelopes with a versioned header.
///
/// Layout (version 1): `"KSE"` · version `0x01` · 24-byte nonce · ciphertext ‖ 16-byte tag.
/// The associated data is the 4-byte header followed by the caller's associated data, so the
/// version is authenticated too and a value opens only where it was sealed (same key, same
/// associated data).
public enum Envelope {
    public static let magic: [UInt8] = Array("KSE".utf8)
    public static let version: UInt8 = 1
    public static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    public static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    public static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    public static let headerLength = 4
    public static let overhead = headerLength + nonceLength + tagLength

    /// Seals `plaintext` under `key`, binding `associatedData`. A random nonce unless one is given
    /// (fixed nonces are for test vectors only).
    public static func seal(
        _ plaintext: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol,
        nonce: [UInt8]? = nil
    ) -> Data {
        Sodium.initialize()
        precondition(key.count == keyLength, "an envelope key is \(keyLength) bytes")
        let header = magic + [version]
        var nonceBytes = nonce ?? [UInt8](repeating: 0, count: nonceLength)
        if nonce == nil { randombytes_buf(&nonceBytes, nonceLength) }
        precondition(nonceBytes.count == nonceLength)
        let message = Array(plaintext)
        let ad = header + Array(associatedData)
        var out = [UInt8](repeating: 0, count: message.count + tagLength)
        var outLength: UInt64 = 0
        key.withUnsafeBytes { k in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                &out, &outLength, message, UInt64(message.count), ad, UInt64(ad.count), nil,
                nonceBytes, k.bindMemory(to: UInt8.self).baseAddress!)
        }
        return Data(header + nonceBytes + out[0..<Int(outLength)])
    }

    /// Opens an envelope into owned memory (`SecureBytes`): for keys and long-lived secrets.
    ///
    /// - Throws: `.malformed` (too short, wrong magic), `.unknownVersion`, `.authentication`
    ///   (wrong key or associated data, or any byte changed).
    public static func open(
        _ envelope: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol
    ) throws(SealingError) -> SecureBytes {
        try open(envelope, key: key, associatedData: associatedData) { plaintext in
            SecureBytes(count: plaintext.count) { $0.copyMemory(from: plaintext) }
        }
    }

    /// Opens an envelope and hands the plaintext to `body` in a buffer that is wiped
    /// (`sodium_memzero`) as soon as `body` returns: the cheap path for values that are decoded
    /// at once. Whatever `body` copies out is the caller's to look after.
    public static func open<R>(
        _ envelope: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws(SealingError) -> R {
        Sodium.initialize()
        let bytes = envelope as? Data ?? Data(envelope)
        guard bytes.count >= overhead, bytes.prefix(3).elementsEqual(magic) else {
            throw SealingError(.malformed)
        }
        guard bytes[bytes.startIndex + 3] == version else { throw SealingError(.unknownVersion) }
        guard key.count == keyLength else { throw SealingError(.authentication) }
        let ad = bytes.prefix(headerLength) + (associatedData as? Data ?? Data(associatedData))
        let plaintextLength = bytes.count - overhead
        var plaintext = [UInt8](repeating: 0, count: max(plaintextLength, 1))
        defer { plaintext.withUnsafeMutableBytes { _ = sodium_memzero($0.baseAddress, $0.count) } }
        let ok = bytes.withUnsafeBytes { raw -> Bool in
            let base = raw.bindMemory(to: UInt8.self).baseAddress!
            let nonce = base + headerLength
            let ciphertext = nonce + nonceLength
            return ad.withUnsafeBytes { adBytes in
                key.withUnsafeBytes { k in
                    var outLength: UInt64 = 0
                    return crypto_aead_xchacha20poly1305_ietf_decrypt(
                        &plaintext, &outLength, nil, ciphertext,
                        UInt64(plaintextLength + tagLength),
                        adBytes.bindMemory(to: UInt8.self).baseAddress, UInt64(adBytes.count), nonce,
                        k.bindMemory(to: UInt8.self).baseAddress!) == 0
                }
            }
        }
        guard ok else { throw SealingError(.authentication) }
        do {
            return try plaintext.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0.prefix(plaintextLength))) }
        } catch {
            throw SealingError(.malformed, "the opened value did not decode")
        }
    }
}
