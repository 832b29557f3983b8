import Foundation

// C-free, so the cloud objects that carry it decode in the fuzzer alone (`scripts/fuzz`).

/// Where a TPM keeps one device's passcode-released secret (public values only).
package struct TPMSlot: Codable, Sendable, Hashable {
    /// The device's guess counter: an NV counter, monotonic — it can never be lowered or reset,
    /// and a new counter starts at the highest value any counter of the TPM ever had.
    package var counterIndex: UInt32
    /// The secret: an NV index readable only through the policy
    /// `PolicyNV(counter ≤ base + limit) ∧ PolicyAuthValue(passcode authorization)`.
    package var secretIndex: UInt32
    /// The counter's value when the secret index was made (after the last right passcode).
    package var base: UInt64
    package var limit: UInt64
}
