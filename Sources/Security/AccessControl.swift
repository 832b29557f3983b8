// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (Apple's C names: SecItemAdd, CFErrorGetCode, … — the point of this module.)
import Foundation
import Keychain
import Sealing

/// Mirrors `SecAccessControlCreateFlags`, Apple's raw values: the Keychain's `AccessConstraints`,
/// bit for bit (each flag below is the constraint of its name).
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    /// The flags' bits, with Apple's values.
    public let rawValue: UInt
    /// Flags from their bits; bits Apple does not define are refused when an item is added
    /// (`errSecParam`).
    public init(rawValue: UInt) { self.rawValue = rawValue }
    init(_ constraints: AccessConstraints) { self.init(rawValue: UInt(constraints.rawValue)) }
    /// The same flags as the Keychain's constraints.
    var constraints: AccessConstraints { AccessConstraints(rawValue: UInt64(rawValue)) }

    /// Biometry or the device passcode at each use; on Linux, the device passcode.
    public static let userPresence = Self(AccessConstraints.userPresence)
    /// Any enrolled biometry at each use. Never met on Linux: alone or and-ed, the secret never
    /// opens; or-ed with the passcode, the passcode opens it.
    public static let biometryAny = Self(AccessConstraints.biometryAny)
    /// Apple's deprecated name for `biometryAny`.
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = biometryAny
    /// The biometry enrolled when the item was added, at each use. Never met on Linux.
    public static let biometryCurrentSet = Self(AccessConstraints.biometryCurrentSet)
    /// Apple's deprecated name for `biometryCurrentSet`.
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = biometryCurrentSet
    /// The device passcode at each use, from the `LAContext` in `kSecUseAuthenticationContext`;
    /// each use is one attempt counted by the lock screen's guess limit.
    public static let devicePasscode = Self(AccessConstraints.devicePasscode)
    /// Apple's deprecated name for `companion`.
    public static let watch = companion
    /// A paired companion device (an Apple Watch) at each use. Never met on Linux.
    public static let companion = Self(AccessConstraints.companion)
    /// Any one of the constraints opens the secret (with `and` too: `errSecParam`).
    public static let or = Self(AccessConstraints.or)
    /// Every constraint is needed, as when neither `or` nor `and` is given.
    public static let and = Self(AccessConstraints.and)
    /// Apple: a Secure Enclave private key may sign and exchange keys. Keys only: on a password,
    /// `errSecParam`.
    public static let privateKeyUsage = Self(AccessConstraints.privateKeyUsage)
    /// An application password (`LAContext.setCredential(_:type:)`) to add the item and at each
    /// use; the secret is sealed under Argon2id of it.
    public static let applicationPassword = Self(AccessConstraints.applicationPassword)
}

/// Mirrors `SecAccessControl`: a protection class and the constraints on each use.
public final class SecAccessControl: @unchecked Sendable {
    // Sendable: immutable after init.
    let accessible: Accessibility
    let flags: SecAccessControlCreateFlags

    init(accessible: Accessibility, flags: SecAccessControlCreateFlags) {
        self.accessible = accessible
        self.flags = flags
    }
}
/// Mirrors `SecAccessControlRef`, the C name of `SecAccessControl`.
public typealias SecAccessControlRef = SecAccessControl

/// Equal as CoreFoundation compares two `SecAccessControl`s (`CFEqual`): the same protection
/// class and constraints. Hashable, as every CF type is in Swift, so Apple code can keep one in a
/// `[String: AnyHashable]` query (Valet does).
extension SecAccessControl: Hashable {
    /// Equal when the protection class and the constraint flags are the same.
    public static func == (a: SecAccessControl, b: SecAccessControl) -> Bool {
        a.accessible == b.accessible && a.flags == b.flags
    }
    /// Hashes the protection class and the constraint flags, as `==` compares them.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(accessible)
        hasher.combine(flags)
    }
}

/// Mirrors `SecAccessControlCreateWithFlags`: nil and an `errSecParam` error for a protection
/// value Apple does not accept with access control (or flags it does not define).
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    guard let raw = protection as? String, let accessible = QueryDictionary.accessibility(raw)
    else {
        error?.pointee = Unmanaged.passRetained(
            NSError(
                domain: NSOSStatusErrorDomain, code: Int(errSecParam),
                userInfo: [NSLocalizedDescriptionKey: "unknown protection class"]))
        return nil
    }
    return SecAccessControl(accessible: accessible, flags: flags)
}

/// Mirrors `SecAccessControlGetTypeID`'s companion for tests: the constraint flags.
extension SecAccessControl: CustomStringConvertible {
    /// The protection class's raw value and the flags in hex:
    /// `<SecAccessControl: ak, flags 0x10>`.
    public var description: String {
        "<SecAccessControl: \(accessible.rawValue), flags 0x\(String(flags.rawValue, radix: 16))>"
    }
}

// MARK: - Randomness

/// Mirrors `SecRandomRef`; the default generator is the system's (libsodium's `randombytes`).
public typealias SecRandomRef = OpaquePointer
/// Mirrors `kSecRandomDefault`.
nonisolated(unsafe) public let kSecRandomDefault: SecRandomRef? = nil

/// Mirrors `SecRandomCopyBytes`: `count` random bytes into `bytes`; `errSecSuccess`.
public func SecRandomCopyBytes(
    _ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer
) -> Int32 {
    guard count >= 0 else { return errSecParam }
    KeyDerivation.randomFill(UnsafeMutableRawBufferPointer(start: bytes, count: count))
    return errSecSuccess
}
