internal import CKeyutils
import Foundation
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
    /// The last keys read, so that reading the same key again does not allocate owned memory
    /// each time. Only ever returned after the kernel gave the same bytes.
    private let recent = Mutex<[ProtectionClass: SecureBytes]>([:])
    /// The device keyring's serial and the keys' serials, as last found: a read by serial costs
    /// one system call; a serial that no longer answers (invalidated, cleared, unlinked) is looked
    /// up again, so these are hints, never the truth.
    private let serials = Mutex<(ring: key_serial_t?, keys: [ProtectionClass: key_serial_t])>(
        (nil, [:]))

    /// The check values a key read from the kernel must match (nil: a record from before checks,
    /// whose keys are taken unchecked), and the device secret they are keyed by.
    private let checks: Mutex<[ProtectionClass: Data]?>
    private let deviceSecret: SecureBytes?

    /// Runtime keys of `deviceID`; with `checks`, only keys matching them are ever returned.
    package init(
        deviceID: String, checks: [ProtectionClass: Data]? = nil, deviceSecret: SecureBytes? = nil
    ) {
        self.deviceID = deviceID
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

    private var keyringName: String { "keepsake:device:\(deviceID)" }
    private func keyName(_ protection: ProtectionClass) -> String {
        "keepsake:\(deviceID):\(protection.rawValue)"
    }
    /// Possessor and user (every process of this uid) may view, read, write, search, link and
    /// set attributes; group and others nothing.
    private static let permissions = key_perm_t(KEY_POS_ALL | KEY_USR_ALL)

    /// The device's keyring, made when `create` and missing.
    private func keyring(create: Bool) throws(DeviceError) -> key_serial_t? {
        // A remembered keyring still alive answers `describe`, far cheaper than `setperm`.
        if let ring = serials.withLock({ $0.ring }), Self.isAlive(ring) { return ring }
        let found = keyctl_search(KEY_SPEC_USER_KEYRING, "keyring", keyringName, 0)
        if found > 0 {
            serials.withLock { $0 = (key_serial_t(found), [:]) }
            return key_serial_t(found)
        }
        guard create else { return nil }
        let made = add_key("keyring", keyringName, nil, 0, KEY_SPEC_USER_KEYRING)
        guard made > 0 else {
            throw Self.refused("a keyring", errno: errno)
        }
        _ = keyctl_setperm(made, Self.permissions)
        serials.withLock { $0 = (made, [:]) }
        return made
    }

    /// The kernel keyring's refusal, with what to do: a container's seccomp profile that forbids
    /// the key calls (Docker's default: `EPERM`, or `ENOSYS`), or a full key quota.
    package static func refused(_ what: String, errno code: Int32) -> DeviceError {
        let reason = String(cString: strerror(code))
        let advice =
            switch code {
            case EPERM, EACCES, ENOSYS:
                "; in a container, allow the keyctl, add_key and request_key system calls in its seccomp profile (docs/running.md)"
            case EDQUOT:
                "; the user's kernel key quota is full (/proc/sys/kernel/keys/maxkeys and maxbytes)"
            default: ""
            }
        return DeviceError(.notAvailable, "the kernel keyring refused \(what): \(reason)\(advice)")
    }

    /// Puts `keys` in runtime state (replacing any earlier key of the same class).
    package func store(_ keys: [ProtectionClass: SecureBytes]) throws(DeviceError) {
        // Always the keyring as the kernel has it now (not a remembered serial): another
        // process's reboot may have unlinked the one this process knew.
        serials.withLock { $0 = (nil, [:]) }
        guard !keys.isEmpty, let ring = try keyring(create: true) else { return }
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
        for (protection, key) in keys {
            let serial = key.withUnsafeBytes { bytes in
                add_key("user", keyName(protection), bytes.baseAddress, bytes.count, ring)
            }
            guard serial > 0 else {
                throw Self.refused("a class key", errno: errno)
            }
            _ = keyctl_setperm(serial, Self.permissions)
            serials.withLock { $0.keys[protection] = serial }
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
        // One `keyctl_read` into a wiped buffer of our own (read_alloc reads twice). A key's
        // serial as last found is read directly: a key leaves runtime state only invalidated
        // (lock, reboot: `forget`), and an invalidated key answers no read, so a read that works
        // is a key still in the device's keyring. Otherwise the keyring is searched.
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 16)
        defer {
            wipeMemory(buffer, 64)
            buffer.deallocate()
        }
        var length = -1
        if let known = serials.withLock({ $0.keys[protection] }) {
            length = keyctl_read(known, buffer.assumingMemoryBound(to: CChar.self), 64)
        }
        if length < 0 {
            guard let ring = try? keyring(create: false) else { return nil }
            let serial = keyctl_search(ring, "user", keyName(protection), 0)
            guard serial > 0 else {
                serials.withLock { _ = $0.keys.removeValue(forKey: protection) }
                return nil
            }
            serials.withLock { $0.keys[protection] = key_serial_t(serial) }
            length = keyctl_read(
                key_serial_t(serial), buffer.assumingMemoryBound(to: CChar.self), 64)
        }
        guard length == Envelope.keyLength else { return nil }
        let bytes = UnsafeRawBufferPointer(start: buffer, count: length)
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

    private static func isAlive(_ serial: key_serial_t) -> Bool {
        var description = [CChar](repeating: 0, count: 256)
        return keyctl_describe(serial, &description, 256) >= 0
    }

    /// Drops the keys of `classes` (lock).
    package func forget(_ classes: [ProtectionClass]) {
        recent.withLock { recent in for protection in classes { recent[protection] = nil } }
        serials.withLock { serials in
            for protection in classes { serials.keys[protection] = nil }
        }
        guard let ring = try? keyring(create: false) else { return }
        for protection in classes {
            let serial = keyctl_search(ring, "user", keyName(protection), 0)
            if serial > 0 {
                // Invalidate: gone for every process at once, not just unlinked from our ring.
                // The kernel's garbage collector takes an invalidated key out of its keyrings
                // later; unlinking it from ours now keeps the listing true at once.
                _ = keyctl_invalidate(key_serial_t(serial))
                _ = keyctl_unlink(key_serial_t(serial), ring)
            }
        }
    }

    /// Drops every key of the device and its keyring: a reboot.
    package func forgetAll() {
        recent.withLock { $0 = [:] }
        guard let ring = try? keyring(create: false) else { return }
        forget(ProtectionClass.allCases)
        _ = keyctl_clear(ring)
        _ = keyctl_unlink(ring, KEY_SPEC_USER_KEYRING)
        serials.withLock { $0 = (nil, [:]) }
    }
}
