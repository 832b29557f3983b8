internal import CSodium
import Foundation

/// Raw libsodium XChaCha20-Poly1305 on caller buffers, the baseline the benchmark measures
/// Keepsake's envelopes against (same key size, nonce, associated data, no framing or owned memory).
package enum SodiumBaseline {
    /// Seals and opens `plaintext` once; returns the ciphertext length.
    @discardableResult
    package static func sealAndOpen(_ plaintext: [UInt8], key: [UInt8], associatedData: [UInt8])
        -> Int
    {
        var nonce = [UInt8](repeating: 0, count: Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES))
        randombytes_buf(&nonce, nonce.count)
        var ciphertext = [UInt8](
            repeating: 0, count: plaintext.count + Int(crypto_aead_xchacha20poly1305_ietf_ABYTES))
        var length: UInt64 = 0
        crypto_aead_xchacha20poly1305_ietf_encrypt(
            &ciphertext, &length, plaintext, UInt64(plaintext.count), associatedData,
            UInt64(associatedData.count), nil, nonce, key)
        var opened = [UInt8](repeating: 0, count: plaintext.count)
        var openedLength: UInt64 = 0
        let result = crypto_aead_xchacha20poly1305_ietf_decrypt(
            &opened, &openedLength, nil, ciphertext, length, associatedData,
            UInt64(associatedData.count),
            nonce, key)
        precondition(result == 0)
        return Int(length)
    }
}
