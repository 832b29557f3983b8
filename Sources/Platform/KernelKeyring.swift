internal import CKeyutils
import Foundation
import Synchronization

/// A named keyring of the user's in the Linux kernel, holding small values by name.
///
/// Kernel memory, never on disk and never swapped; gone at reboot (and when the user's last
/// session ends). The keyring is linked into the user keyring (`@u`), so every process of the
/// user shares it; possessor and user may view, read, write, search, link and set attributes,
/// group and others nothing. Any process of the user can therefore also write it: a caller that
/// must not trust what it reads checks it.
///
/// Thread-safe.
package final class KernelKeyring: Sendable {
    /// The keyring's description (`keyctl show @u` lists it).
    package let name: String
    /// The keyring's serial and its keys' serials, as last found: a read by serial costs one
    /// system call; a serial that no longer answers (invalidated, cleared, unlinked) is looked up
    /// again, so these are hints, never the truth.
    private let serials = Mutex<(ring: key_serial_t?, keys: [String: key_serial_t])>((nil, [:]))

    private static let permissions = key_perm_t(KEY_POS_ALL | KEY_USR_ALL)

    package init(name: String) { self.name = name }

    /// A refusal of the kernel's, with what to do about it.
    package struct Refusal: Error, Sendable {
        package let message: String
    }

    /// The kernel keyring's refusal of `what`, with what to do: a container's seccomp profile that
    /// forbids the key calls (Docker's default: `EPERM`, or `ENOSYS`), or a full key quota.
    package static func refusal(_ what: String, errno code: Int32) -> Refusal {
        let reason = String(cString: strerror(code))
        let advice =
            switch code {
            case EPERM, EACCES, ENOSYS:
                "; in a container, allow the keyctl, add_key and request_key system calls in its seccomp profile (docs/running.md)"
            case EDQUOT:
                "; the user's kernel key quota is full (/proc/sys/kernel/keys/maxkeys and maxbytes)"
            default: ""
            }
        return Refusal(message: "the kernel keyring refused \(what): \(reason)\(advice)")
    }

    /// The keyring, made when `create` and missing.
    private func ring(create: Bool) throws(Refusal) -> key_serial_t? {
        // A remembered keyring still alive answers `describe`, far cheaper than `setperm`.
        if let ring = serials.withLock({ $0.ring }), Self.isAlive(ring) { return ring }
        let found = keyctl_search(KEY_SPEC_USER_KEYRING, "keyring", name, 0)
        if found > 0 {
            serials.withLock { $0 = (key_serial_t(found), [:]) }
            return key_serial_t(found)
        }
        guard create else { return nil }
        let made = add_key("keyring", name, nil, 0, KEY_SPEC_USER_KEYRING)
        guard made > 0 else { throw Self.refusal("a keyring", errno: errno) }
        _ = keyctl_setperm(made, Self.permissions)
        serials.withLock { $0 = (made, [:]) }
        return made
    }

    /// Forgets the serials remembered: the next call finds the keyring as the kernel has it now.
    /// Before storing: another process may have unlinked the keyring this process knew.
    package func refresh() {
        serials.withLock { $0 = (nil, [:]) }
    }

    /// Stores `bytes` under `key` (replacing an earlier value), making the keyring when missing;
    /// `what` names the value in a refusal.
    package func store(_ key: String, _ bytes: UnsafeRawBufferPointer, what: String)
        throws(Refusal)
    {
        guard let ring = try ring(create: true) else { return }
        let serial = add_key("user", key, bytes.baseAddress, bytes.count, ring)
        guard serial > 0 else { throw Self.refusal(what, errno: errno) }
        _ = keyctl_setperm(serial, Self.permissions)
        serials.withLock { $0.keys[key] = serial }
    }

    /// Reads the value of `key` into `buffer`: its length (which may exceed the buffer's), or nil
    /// when the keyring holds no such key.
    package func read(_ key: String, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let out = buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
        var length = -1
        // A key's serial as last found is read directly: a key leaves the keyring only
        // invalidated, and an invalidated key answers no read, so a read that works is a key still
        // in the keyring. Otherwise the keyring is searched.
        if let known = serials.withLock({ $0.keys[key] }) {
            length = keyctl_read(known, out, buffer.count)
        }
        if length < 0 {
            guard let ring = try? ring(create: false) else { return nil }
            let serial = keyctl_search(ring, "user", key, 0)
            guard serial > 0 else {
                serials.withLock { _ = $0.keys.removeValue(forKey: key) }
                return nil
            }
            serials.withLock { $0.keys[key] = key_serial_t(serial) }
            length = keyctl_read(key_serial_t(serial), out, buffer.count)
        }
        return length < 0 ? nil : length
    }

    /// Invalidates each of `keys`: gone for every process at once, not just unlinked from this
    /// keyring.
    package func invalidate(_ keys: [String]) {
        serials.withLock { serials in for key in keys { serials.keys[key] = nil } }
        guard let ring = try? ring(create: false) else { return }
        invalidate(keys, in: ring)
    }

    private func invalidate(_ keys: [String], in ring: key_serial_t) {
        for key in keys {
            let serial = keyctl_search(ring, "user", key, 0)
            if serial > 0 {
                // The kernel's garbage collector takes an invalidated key out of its keyrings
                // later; unlinking it from ours now keeps the listing true at once.
                _ = keyctl_invalidate(key_serial_t(serial))
                _ = keyctl_unlink(key_serial_t(serial), ring)
            }
        }
    }

    /// Invalidates `keys`, then clears the keyring and unlinks it from the user keyring.
    package func remove(invalidating keys: [String]) {
        guard let ring = try? ring(create: false) else { return }
        invalidate(keys, in: ring)
        _ = keyctl_clear(ring)
        _ = keyctl_unlink(ring, KEY_SPEC_USER_KEYRING)
        serials.withLock { $0 = (nil, [:]) }
    }

    private static func isAlive(_ serial: key_serial_t) -> Bool {
        var description = [CChar](repeating: 0, count: 256)
        return keyctl_describe(serial, &description, 256) >= 0
    }
}
