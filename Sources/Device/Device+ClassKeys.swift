import Foundation
import Sealing
import SecretService

/// The class keys: read in runtime state (the kernel keyring), made again from the device secret
/// alone on a device without a knowledge factor.
extension Device {
    /// Secrets of `paths` and the class keys available now.
    package struct KeyedRead: Sendable {
        package var secrets: [ItemPath: Data]
        package var classKeys: [ProtectionClass: SecureBytes]
    }

    /// Reads `paths` (one `GetSecrets` round trip) together with the runtime class keys (only
    /// those of `classes` when the caller knows which it needs). Paths that no longer exist are
    /// absent. A process's first read fetches the device record in the same round trip, at the
    /// path it was last found at, instead of searching for it first.
    package func read(_ paths: [ItemPath], classes: Set<ProtectionClass>? = nil)
        throws(DeviceError) -> KeyedRead
    {
        if paths.isEmpty { return KeyedRead(secrets: [:], classKeys: try runtime().keys(classes)) }
        let record =
            runtimeCache.withLock({ $0 }) == nil
            ? records.notedPath.flatMap { paths.contains($0) ? nil : $0 } : nil
        var secrets = try records.call { () throws(SecretServiceError) in
            guard let record else { return try secretService.secrets(at: paths) }
            do throws(SecretServiceError) {
                // In one batch, or not at all: a provider that fails a batch for one path gone
                // (KWallet) is not asked path by path for the hint's sake.
                return try secretService.secrets(at: paths + [record], oneByOneOnMissing: false)
            } catch  where error.code != .timedOut {
                // The noted path is only a hint: whatever it brings (gone, a locked item
                // elsewhere, a refusal), the items are read without it and the record found by
                // its search.
                return try secretService.secrets(at: paths)
            }
        }
        let noted = record.flatMap { records.recordAt(noted: secrets.removeValue(forKey: $0)) }
        return KeyedRead(secrets: secrets, classKeys: try runtime(noted).keys(classes))
    }

    /// The key of `protection`, when the lock state allows it.
    ///
    /// - Throws: `.interactionNotAllowed` when locked or before first unlock; `.authFailed` for
    ///   `WhenPasscodeSetThisDeviceOnly` on a device without a knowledge factor.
    package func classKey(_ protection: ProtectionClass) throws(DeviceError) -> SecureBytes {
        let runtime = try runtime()
        if let key = runtime.key(protection) { return key }
        let record = try records.load().record
        if protection.requiresPasscode && !record.kind.hasKnowledgeFactor {
            throw DeviceError(.authFailed, "this class needs a passcode to be set")
        }
        if record.kind.hasKnowledgeFactor {
            throw DeviceError(.interactionNotAllowed, "the device is locked")
        }
        // No knowledge factor: always unlocked; after a reboot the keys come back from the
        // device secret alone.
        let keys = try PasscodeKeys.unwrap(
            record.wrappedKeys,
            kek: PasscodeKeys.deviceKEK(SecureBytes(copying: record.deviceSecret)))
        try runtime.store(keys)
        guard let key = keys[protection] else {
            throw DeviceError(.corrupt, "no key for class \(protection.rawValue)")
        }
        return key
    }
}
