import Foundation
import Sealing
import Platform

/// Whose codes `KeyValueStoreError`'s are.
public enum KeyValueStoreErrorDomain {}

/// The one error type of the KeyValueStore module, thrown by the checked writes
/// (`write(_:forKey:)`) underneath Apple's non-throwing `set` and `removeObject`. Compares by
/// code; the message never carries a value.
public typealias KeyValueStoreError = CodedError<KeyValueStoreErrorDomain>

extension ErrorCode<KeyValueStoreErrorDomain> {
    /// Over a limit (1024 keys, 1 MB, keys of 1…64 bytes): nothing changed
    /// (`NSUbiquitousKeyValueStoreQuotaViolationChange`, 2).
    public static var quotaViolation: Self {
        Self("NSUbiquitousKeyValueStoreQuotaViolationChange (2)")
    }
    /// The local cache could not be written (disk full, device key unavailable): the stored
    /// values are the ones from before the call.
    public static var notPersisted: Self { Self("not persisted") }
    /// A synchronize did not get through to the cloud account (unreachable, or its copy
    /// refused as rolled back or tampered with; the cause is `underlying`): every value
    /// stays in the local cache and is exchanged at the next synchronize.
    public static var notSynchronized: Self { Self("not synchronized") }
    /// Nothing to synchronize with: signed out, no end-to-end-encryption-capable lock
    /// screen, or this device holds no key of the account (Apple's `synchronize()` is
    /// `false`); values stay in the local cache.
    public static var noCloudAccount: Self { Self("no cloud account") }
}
