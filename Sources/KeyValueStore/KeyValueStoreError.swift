import Foundation
import Sealing

/// The one error type of the KeyValueStore module, thrown by the checked writes
/// (`write(_:forKey:)`) underneath Apple's non-throwing `set` and `removeObject`. Compares by
/// code; the message never carries a value.
public struct KeyValueStoreError: KeepsakeError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case quotaViolation, notPersisted, notSynchronized, noCloudAccount
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        /// Over a limit (1024 keys, 1 MB, keys of 1…64 bytes): nothing changed
        /// (`NSUbiquitousKeyValueStoreQuotaViolationChange`, 2).
        public static let quotaViolation = Code(.quotaViolation)
        /// The local cache could not be written (disk full, device key unavailable): the stored
        /// values are the ones from before the call.
        public static let notPersisted = Code(.notPersisted)
        /// A synchronize did not get through to the cloud account (unreachable, or its copy
        /// refused as rolled back or tampered with; the cause is `underlying`): every value
        /// stays in the local cache and is exchanged at the next synchronize.
        public static let notSynchronized = Code(.notSynchronized)
        /// Nothing to synchronize with: signed out, no end-to-end-encryption-capable lock
        /// screen, or this device holds no key of the account (Apple's `synchronize()` is
        /// `false`); values stay in the local cache.
        public static let noCloudAccount = Code(.noCloudAccount)
        public var description: String {
            switch value {
            case .quotaViolation: "NSUbiquitousKeyValueStoreQuotaViolationChange (2)"
            case .notPersisted: "not persisted"
            case .notSynchronized: "not synchronized"
            case .noCloudAccount: "no cloud account"
            }
        }
    }

    public let code: Code
    public let message: String
    /// The failure underneath, when there was one (a file or device error).
    public let underlying: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

}
