internal import CSodium
import Foundation
import Synchronization
import Platform

/// XChaCha20-Poly1305 (IETF) envelopes with a versioned header.
///
/// Layout (version 1): `"KSE"` · version `0x01` · 24-byte nonce · ciphertext ‖ 16-byte tag.
/// The associated data is the 4-byte header followed by the caller's associated data, so the
/// version is authenticated too and a value opens only where it was sealed (same key, same
/// associated data).
package enum Envelope {
    package static let magic: [UInt8] = Array("KSE".utf8)
    package static let version: UInt8 = 1
    package static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    package static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    package static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    package static let headerLength = 4
    package static let overhead = headerLength + nonceLength + tagLength

    /// Seals `plaintext` under `key`, binding `associatedData`. A random nonce unless one is given
    /// (fixed nonces are for test vectors only). Sealing is on every store's write path and must
    /// cost about what libsodium itself costs: the inputs are used in place and the output is
    /// written once.
    package static func seal(
        _ plaintext: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol,
        nonce: [UInt8]? = nil
    ) -> Data {
        Sodium.initialize()
        precondition(key.count == keyLength, "an envelope key is \(keyLength) bytes")
        precondition(nonce == nil || nonce!.count == nonceLength)
        return withBytes(plaintext) { m in
            #if KEEPSAKE_TEST_HOOKS
                sealObserver.withLock { $0 }?(m)
            #endif
            return withHeaderedAssociatedData(magic + [version], associatedData) { a in
                let total = headerLength + nonceLength + m.count + tagLength
                let out = UnsafeMutablePointer<UInt8>.allocate(capacity: total)
                out[0] = magic[0]
                out[1] = magic[1]
                out[2] = magic[2]
                out[3] = version
                let noncePointer = out + headerLength
                if let nonce {
                    nonce.withUnsafeBufferPointer {
                        noncePointer.update(from: $0.baseAddress!, count: nonceLength)
                    }
                } else {
                    randombytes_buf(noncePointer, nonceLength)
                }
                var outLength: UInt64 = 0
                key.withUnsafeBytes { k in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        noncePointer + nonceLength, &outLength,
                        m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count),
                        a.bindMemory(to: UInt8.self).baseAddress, UInt64(a.count), nil,
                        noncePointer, k.bytePointer)
                }
                // The Data takes the buffer over without a copy.
                return Data(
                    bytesNoCopy: out, count: total,
                    deallocator: .custom { pointer, _ in pointer.deallocate() })
            }
        }
    }

    #if KEEPSAKE_TEST_HOOKS
        /// Test hook, compiled only into debug builds (`KEEPSAKE_TEST_HOOKS`, Package.swift) and
        /// visible only inside this package: sees every plaintext sealed in this process, so that the
        /// suite can sweep untrusted storage (cloud accounts, transfer files) for any of them
        /// (`KeepsakeTestSupport.SuiteSweep`). nil outside the test suite.
        package static let sealObserver = Mutex<(@Sendable (UnsafeRawBufferPointer) -> Void)?>(nil)
    #endif

    /// The bytes of a collection in place when it is contiguous (Data, [UInt8]), else copied once.
    /// (Callers in other modules reach here unspecialized: no per-element generic access.)
    static func withBytes<R>(
        _ bytes: some DataProtocol, _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withWipedContiguousBytes(bytes, body)
    }

    /// `header ‖ associatedData` in one temporary buffer: what sealing and opening authenticate.
    static func withHeaderedAssociatedData<R>(
        _ header: some DataProtocol, _ associatedData: some DataProtocol,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) rethrows -> R {
        try withBytes(associatedData) { ad in
            let buffer = UnsafeMutableRawBufferPointer.allocate(
                byteCount: header.count + ad.count, alignment: 16)
            defer { buffer.deallocate() }
            buffer.copyBytes(from: header)
            if ad.count > 0 {
                UnsafeMutableRawBufferPointer(rebasing: buffer[header.count...]).copyMemory(
                    from: ad)
            }
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Opens an envelope into owned memory (``SecureBytes``): for keys and long-lived secrets.
    ///
    /// - Throws: `.malformed` (too short, wrong magic), `.unknownVersion`, `.authentication`
    ///   (wrong key or associated data, or any byte changed).
    package static func open(
        _ envelope: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol
    ) throws(SealingError) -> SecureBytes {
        try open(envelope, key: key, associatedData: associatedData) { plaintext in
            SecureBytes(count: plaintext.count) { $0.copyMemory(from: plaintext) }
        }
    }

    /// Opens an envelope and hands the plaintext to `body` in a buffer that is wiped
    /// (`sodium_memzero`) as soon as `body` returns: the cheap path for values that are decoded
    /// at once. Whatever `body` copies out is the caller's to look after.
    package static func open<R>(
        _ envelope: some DataProtocol, key: SecureBytes, associatedData: some DataProtocol,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws(SealingError) -> R {
        let outcome: Result<R, SealingError> = withBytes(envelope) { bytes in
            withBytes(associatedData) { ad in
                var decoded: Result<R, SealingError> = .failure(SealingError(.malformed))
                if let failure = open(
                    bytes, key: key, associatedData: ad,
                    { plaintext in
                        do { decoded = .success(try body(plaintext)) } catch { return false }
                        return true
                    })
                {
                    return .failure(failure)
                }
                return decoded
            }
        }
        return try outcome.get()
    }

    /// `open(_:key:associatedData:_:)` for `Data`, without generics: `body` decodes the
    /// plaintext into the caller's own variable and says whether it could. A read-all opens
    /// thousands of envelopes, and the generic form looked up the metadata of its result type on
    /// every one of them, under a runtime lock.
    package static func open(
        _ envelope: Data, key: SecureBytes, associatedData: Data,
        decoding body: (UnsafeRawBufferPointer) -> Bool
    ) throws(SealingError) {
        let failure = envelope.withUnsafeBytes { bytes in
            associatedData.withUnsafeBytes { ad in
                open(bytes, key: key, associatedData: ad, body)
            }
        }
        if let failure { throw failure }
    }

    /// The one opening: checks the header, authenticates and decrypts with the header and
    /// `associatedData`, and hands the plaintext to `body` in a buffer wiped when it returns.
    /// nil when opened and decoded.
    private static func open(
        _ bytes: UnsafeRawBufferPointer, key: SecureBytes, associatedData: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) -> Bool
    ) -> SealingError? {
        Sodium.initialize()
        guard key.count == keyLength else { return SealingError(.authentication) }
        guard bytes.count >= overhead, bytes[0] == magic[0], bytes[1] == magic[1],
            bytes[2] == magic[2]
        else { return SealingError(.malformed) }
        guard bytes[3] == version else { return SealingError(.unknownVersion) }
        let base = bytes.bytePointer
        let nonce = base + headerLength
        let ciphertext = nonce + nonceLength
        let plaintextLength = bytes.count - overhead
        let plaintext = UnsafeMutableRawBufferPointer.allocate(
            byteCount: max(plaintextLength, 1), alignment: 16)
        defer {
            sodium_memzero(plaintext.baseAddress, plaintext.count)
            plaintext.deallocate()
        }
        let header = UnsafeRawBufferPointer(rebasing: bytes[0..<headerLength])
        let ok = withHeaderedAssociatedData(header, associatedData) { ad in
            key.withUnsafeBytes { k in
                var outLength: UInt64 = 0
                return crypto_aead_xchacha20poly1305_ietf_decrypt(
                    plaintext.bindMemory(to: UInt8.self).baseAddress, &outLength, nil,
                    ciphertext, UInt64(plaintextLength + tagLength),
                    ad.bindMemory(to: UInt8.self).baseAddress, UInt64(ad.count), nonce,
                    k.bytePointer) == 0
            }
        }
        guard ok else { return SealingError(.authentication) }
        guard body(UnsafeRawBufferPointer(rebasing: plaintext[0..<plaintextLength])) else {
            return SealingError(.malformed, "the opened value did not decode")
        }
        return nil
    }
}
