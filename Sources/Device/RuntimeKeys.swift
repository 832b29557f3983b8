import Foundation
import Platform
import Sealing
import Synchronization

/// Runtime state: the unwrapped class keys of one device, in the Linux kernel keyring.
///
/// Kernel memory, never on disk and never swapped; gone at reboot (and when the user's last
/// session ends). The keys sit in a keyring of the device's own (`keepsake:device:<id>`) linked
/// into the user keyring (`@u`), so every process of the user shares them — as every app on a
/// phone shares the unlocked state — and no Secret Service collection is involved, so runtime state
/// works the same on every provider. Lock invalidates the `WhenUnlocked…` keys; ``forgetAll()`` is a
/// reboot (the test harness and `device reboot` use it).
///
/// Any process of the user can write that keyring, so a key found there is used only after it
/// matched the device record's check value for its class (`PasscodeKeys.check`, keyed by the
/// device secret): a planted or replaced key reads as absent — the class locked — and is never
/// sealed or opened with.
///
/// Thread-safe.
package final class RuntimeKeys: Sendable {
    package let deviceID: String
    /// The device's own keyring in the kernel.
    private let keyring: KernelKeyring
    /// The last keys read, so that reading the same key again does not allocate owned memory
    /// each time. Only ever returned after the kernel gave the same bytes.
    private let recent = Mutex<[ProtectionClass: SecureBytes]>([:])

    /// The check values a key read from the kernel must match (nil: a record without checks,
    /// whose keys are taken unchecked), and the device secret they are keyed by.
    private let checks: Mutex<[ProtectionClass: Data]?>
    private let deviceSecret: SecureBytes?

    /// Runtime keys of `deviceID`; with `checks`, only keys matching them are ever returned.
    package init(
        deviceID: String, checks: [ProtectionClass: Data]? = nil, deviceSecret: SecureBytes? = nil
    ) {
        self.deviceID = deviceID
        self.keyring = KernelKeyring(name: "keepsake:device:\(deviceID)")
        self.checks = Mutex(checks)
        self.deviceSecret = deviceSecret
    }

    /// Whether `bytes`, read from the kernel as the key of `protection`, is the device's own.
    private func isGenuine(_ bytes: UnsafeRawBufferPointer, _ protection: ProtectionClass) -> Bool {
        guard let checks = checks.withLock({ $0 }), let deviceSecret else { return true }
        guard let expected = checks[protection] else { return false }
        return constantTimeEquals(
            PasscodeKeys.check(bytes, protection, deviceSecret: deviceSecret), expected)
    }

    private func keyName(_ protection: ProtectionClass) -> String {
        "keepsake:\(deviceID):\(protection.rawValue)"
    }

    /// The kernel keyring's refusal as the device's error.
    package static func refused(_ what: String, errno code: Int32) -> DeviceError {
        DeviceError(.notAvailable, KernelKeyring.refusal(what, errno: code).message)
    }

    /// Puts `keys` in runtime state (replacing any earlier key of the same class).
    package func store(_ keys: [ProtectionClass: SecureBytes]) throws(DeviceError) {
        guard !keys.isEmpty else { return }
        // Keys stored here come from the record (unwrapped): their checks hold from now on.
        if let deviceSecret {
            let stored = PasscodeKeys.checks(keys, deviceSecret: deviceSecret)
            checks.withLock { checks in
                guard checks != nil else { return }
                for (name, value) in stored {
                    if let protection = ProtectionClass(rawValue: name) {
                        checks![protection] = value
                    }
                }
            }
        }
        keyring.refresh()
        for (protection, key) in keys {
            let refusal = key.withUnsafeBytes { bytes in
                Result { () throws(KernelKeyring.Refusal) in
                    try keyring.store(keyName(protection), bytes, what: "a class key")
                }
            }
            if case .failure(let error) = refusal {
                throw DeviceError(.notAvailable, error.message)
            }
        }
    }

    /// The class keys available now (only those of `classes` when given).
    package func keys(_ classes: Set<ProtectionClass>? = nil) -> [ProtectionClass: SecureBytes] {
        var keys: [ProtectionClass: SecureBytes] = [:]
        for protection in ProtectionClass.allCases where classes?.contains(protection) ?? true {
            if let key = read(protection) { keys[protection] = key }
        }
        return keys
    }

    /// The key of `protection`, when it is in runtime state.
    package func key(_ protection: ProtectionClass) -> SecureBytes? { read(protection) }

    private func read(_ protection: ProtectionClass) -> SecureBytes? {
        // One `keyctl_read` into a wiped buffer of our own (read_alloc reads twice).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 16)
        defer {
            wipeMemory(buffer.baseAddress!, 64)
            buffer.deallocate()
        }
        guard keyring.read(keyName(protection), into: buffer) == Envelope.keyLength else {
            return nil
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<Envelope.keyLength])
        return recent.withLock { recent in
            if let known = recent[protection],
                known.withUnsafeBytes({ constantTimeEquals($0, bytes) })
            {
                return known
            }
            // New bytes: used only when they are the device's own key (`recent` holds only such).
            guard isGenuine(bytes, protection) else { return nil }
            let key = SecureBytes(copying: bytes)
            recent[protection] = key
            return key
        }
    }

    /// Drops the keys of `classes` (lock).
    package func forget(_ classes: [ProtectionClass]) {
        recent.withLock { recent in for protection in classes { recent[protection] = nil } }
        keyring.invalidate(classes.map(keyName))
    }

    /// Drops every key of the device and its keyring: a reboot.
    package func forgetAll() {
        recent.withLock { $0 = [:] }
        keyring.remove(invalidating: ProtectionClass.allCases.map(keyName))
    }
}
