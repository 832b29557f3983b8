import Foundation
import Platform

/// Whose codes `SealingError`'s are.
public enum SealingErrorDomain {}

/// The one error type of the Sealing module. Compares by code; never carries key material.
public typealias SealingError = CodedError<SealingErrorDomain>

extension ErrorCode<SealingErrorDomain> {
    /// Too short, a wrong magic, or a header that does not parse.
    public static var malformed: Self { Self("malformed envelope") }
    /// A version this build does not know.
    public static var unknownVersion: Self { Self("unknown envelope version") }
    /// The tag did not verify: wrong key, wrong associated data, or tampered bytes.
    public static var authentication: Self { Self("authentication failed") }
    /// Argon2id could not run (out of memory, bad parameters).
    public static var keyDerivation: Self { Self("key derivation failed") }
}
