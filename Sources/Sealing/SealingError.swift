import Foundation

/// The one error type of the Sealing module. Compares by code; never carries key material.
public struct SealingError: KeepsakeError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case malformed, unknownVersion, authentication, keyDerivation
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        /// Too short, a wrong magic, or a header that does not parse.
        public static let malformed = Code(.malformed)
        /// A version this build does not know.
        public static let unknownVersion = Code(.unknownVersion)
        /// The tag did not verify: wrong key, wrong associated data, or tampered bytes.
        public static let authentication = Code(.authentication)
        /// Argon2id could not run (out of memory, bad parameters).
        public static let keyDerivation = Code(.keyDerivation)
        public var description: String {
            switch value {
            case .malformed: "malformed envelope"
            case .unknownVersion: "unknown envelope version"
            case .authentication: "authentication failed"
            case .keyDerivation: "key derivation failed"
            }
        }
    }
    public let code: Code
    public let message: String
    /// Always nil: Sealing fails on its own (libsodium reports no detail); kept so that every
    /// Keepsake error has one shape (code, message, underlying).
    public let underlying: (any Error & Sendable)? = nil
    public init(_ code: Code, _ message: String = "") {
        self.code = code
        self.message = message
    }
}
