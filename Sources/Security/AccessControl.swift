// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (Apple's C names: SecItemAdd, CFErrorGetCode, … — the point of this module.)
import Foundation
import Keychain
import Sealing

/// Mirrors `SecAccessControlCreateFlags`, Apple's raw values: the Keychain's `AccessConstraints`,
/// bit for bit (each flag below is the constraint of its name).
public struct SecAccessControlCreateFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    init(_ constraints: AccessConstraints) { self.init(rawValue: UInt(constraints.rawValue)) }
    /// The same flags as the Keychain's constraints.
    var constraints: AccessConstraints { AccessConstraints(rawValue: UInt64(rawValue)) }

    public static let userPresence = Self(AccessConstraints.userPresence)
    public static let biometryAny = Self(AccessConstraints.biometryAny)
    @available(*, deprecated, renamed: "biometryAny")
    public static let touchIDAny = biometryAny
    public static let biometryCurrentSet = Self(AccessConstraints.biometryCurrentSet)
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static let touchIDCurrentSet = biometryCurrentSet
    public static let devicePasscode = Self(AccessConstraints.devicePasscode)
    public static let watch = companion
    public static let companion = Self(AccessConstraints.companion)
    public static let or = Self(AccessConstraints.or)
    public static let and = Self(AccessConstraints.and)
    public static let privateKeyUsage = Self(AccessConstraints.privateKeyUsage)
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
public typealias SecAccessControlRef = SecAccessControl

/// Equal as CoreFoundation compares two `SecAccessControl`s (`CFEqual`): the same protection
/// class and constraints. Hashable, as every CF type is in Swift, so Apple code can keep one in a
/// `[String: AnyHashable]` query (Valet does).
extension SecAccessControl: Hashable {
    public static func == (a: SecAccessControl, b: SecAccessControl) -> Bool {
        a.accessible == b.accessible && a.flags == b.flags
    }
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
