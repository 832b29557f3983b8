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
    /// The secret's length in bytes (nil: 32, the device key's; the escrow holds 32 or 64).
    package var secretSize: Int?

    package init(
        counterIndex: UInt32, secretIndex: UInt32, base: UInt64, limit: UInt64, secretSize: Int?
    ) {
        self.counterIndex = counterIndex
        self.secretIndex = secretIndex
        self.base = base
        self.limit = limit
        self.secretSize = secretSize == 32 ? nil : secretSize
    }

    /// Whether its values are ones Keepsake makes (a secret of 32 or 64 bytes).
    package var isPlausible: Bool { secretSize == nil || secretSize == 32 || secretSize == 64 }
}
