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

    /// Opens an envelope into owned memory.
    ///
    /// - Throws: `.malformed` (too short, wrong magic), `.unknownVersion`, `.authentication`
    ///   (wrong key or associated data, or any byte changed).
    public static func open(
        _ envelope: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol
    ) throws(SealingError) -> SecureBytes {
        Sodium.initialize()
        let bytes = Array(envelope)
        guard bytes.count >= overhead, Array(bytes[0..<3]) == magic else {
            throw SealingError(.malformed)
        }
        guard bytes[3] == version else { throw SealingError(.unknownVersion) }
        guard key.count == keyLength else { throw SealingError(.authentication) }
        let nonce = Array(bytes[headerLength..<(headerLength + nonceLength)])
        let ciphertext = Array(bytes[(headerLength + nonceLength)...])
        let ad = Array(bytes[0..<headerLength]) + Array(associatedData)
        var ok = false
        let opened = SecureBytes(count: ciphertext.count - tagLength) { out in
            var outLength: UInt64 = 0
            ok = key.withUnsafeBytes { k in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    out.bindMemory(to: UInt8.self).baseAddress, &outLength, nil, ciphertext,
                    UInt64(ciphertext.count), ad, UInt64(ad.count), nonce,
                    k.bindMemory(to: UInt8.self).baseAddress!) == 0
            }
        }
        guard ok else { throw SealingError(.authentication) }
        return opened
    }
}
