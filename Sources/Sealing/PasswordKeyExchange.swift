import Foundation

/// A password-authenticated key exchange on ristretto255, in CPace's shape: each side hashes the
/// password with the session to a group element `G`, sends `y · G` for a fresh secret scalar `y`,
/// and multiplies the other side's share by its own `y`. The two get one key only when both used
/// the same password. Whoever sits between them gets one guess of the password per exchange (it
/// must pick a password to make a share), and what it sees — two shares that are uniformly random
/// elements whatever the password — lets it test no guess offline.
package enum PasswordKeyExchange {
    /// A fresh secret scalar and its share for `password` in `session` (public, unique per
    /// exchange: it keeps a share from serving in another).
    package static func share(password: SecureBytes, session: Data) -> (
        secret: SecureBytes, share: Data
    ) {
        precondition(password.count < 256, "a password of at most 255 bytes")
        // The password's length first: no password and session run into another pair.
        let input = SecureBytes(count: 1 + password.count + session.count) { out in
            out[0] = UInt8(password.count)
            password.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[1..<(1 + password.count)]).copyMemory(
                    from: $0)
            }
            UnsafeMutableRawBufferPointer(rebasing: out[(1 + password.count)...]).copyBytes(
                from: session)
        }
        let (secret, share) = OPRF.blind(input, context: "keepsake.pake.generator.v1")
        return (secret, share)
    }

    /// The key of the exchange, from this side's `secret` and the other side's share: a hash of
    /// the shared element with the session and both shares in a fixed order (the side that
    /// started the exchange first).
    ///
    /// - Throws: `.malformed` when `peerShare` is not a ristretto255 element other than the
    ///   identity.
    package static func key(
        secret: SecureBytes, peerShare: Data, initiatorShare: Data, responderShare: Data,
        session: Data
    ) throws(SealingError) -> SecureBytes {
        // The shared element passes through ordinary memory here (OPRF.evaluate's result); it
        // is only ever hashed.
        let shared = SecureBytes(copying: try OPRF.evaluate(peerShare, key: secret))
        precondition(session.count < 256, "a session of at most 255 bytes")
        return KeyDerivation.keyedHash(
            key: shared, context: "keepsake.pake.key.v1",
            Data([UInt8(session.count)]) + session + initiatorShare + responderShare)
    }
}
