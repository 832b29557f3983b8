import Foundation
import Device
import Sealing

/// Constraints on each use of an item's secret, with the raw values of Apple's
/// `SecAccessControlCreateFlags`. Several constraints must all be met unless `or` is given.
///
/// On Linux: `devicePasscode` and `userPresence` (biometry or passcode; no biometric hardware is
/// used, so the passcode) need the device passcode at each use, counted by the lock screen's
/// guess limit; `applicationPassword` needs the app's password; biometry and companion
/// constraints can never be met, as on a Mac without that hardware.
public struct AccessConstraints: OptionSet, Sendable, Hashable {
    /// The constraints' bits, with Apple's `SecAccessControlCreateFlags` values.
    public let rawValue: UInt64
    /// Constraints from their bits; bits Apple does not define are `errSecParam` when an item is
    /// added.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Biometry or the device passcode at each use; on Linux, the device passcode.
    public static let userPresence = AccessConstraints(rawValue: 1 << 0)
    /// Any enrolled biometry at each use; never met on Linux.
    public static let biometryAny = AccessConstraints(rawValue: 1 << 1)
    /// The biometry enrolled when the item was added, at each use; never met on Linux.
    public static let biometryCurrentSet = AccessConstraints(rawValue: 1 << 3)
    /// The device passcode at each use (`ItemAuthentication.passcode`), one counted attempt each.
    public static let devicePasscode = AccessConstraints(rawValue: 1 << 4)
    /// A paired companion device (an Apple Watch) at each use; never met on Linux.
    public static let companion = AccessConstraints(rawValue: 1 << 5)
    /// Any one of the other constraints suffices (with `and` too: `errSecParam`).
    public static let or = AccessConstraints(rawValue: 1 << 14)
    /// Every constraint is needed, as when neither `or` nor `and` is given.
    public static let and = AccessConstraints(rawValue: 1 << 15)
    /// Apple: use of a Secure Enclave private key. Keys only: on a password item, `errSecParam`.
    public static let privateKeyUsage = AccessConstraints(rawValue: 1 << 30)
    /// The app's password (`ItemAuthentication.applicationPassword`) to add the item and at each
    /// use; the secret is sealed under Argon2id of it.
    public static let applicationPassword = AccessConstraints(rawValue: 1 << 31)

    /// Every flag Apple defines.
    public static let known: AccessConstraints = [
        .userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .companion, .or, .and,
        .privateKeyUsage, .applicationPassword,
    ]
    /// Constraints that need a credential at each use (all but the conjunctions).
    var uses: AccessConstraints { subtracting([.or, .and]) }
    /// A use needs the device passcode (`.userPresence` is biometry or passcode: the passcode).
    var needsPasscode: Bool { !uses.isDisjoint(with: [.devicePasscode, .userPresence]) }
    var needsApplicationPassword: Bool { uses.contains(.applicationPassword) }
    /// Biometry or a companion device: nothing on Linux provides it.
    var needsUnavailable: Bool {
        !uses.isDisjoint(with: [.biometryAny, .biometryCurrentSet, .companion])
    }
}

/// What a use of a protected item is given (Apple: the `LAContext` of
/// `kSecUseAuthenticationContext`, and `kSecUseAuthenticationUI`).
public struct ItemAuthentication: Sendable {
    /// The device passcode, for `devicePasscode` / `userPresence` items. Each use is one counted
    /// passcode attempt.
    public var passcode: SecureBytes?
    /// The app's password, for `applicationPassword` items.
    public var applicationPassword: SecureBytes?
    /// `kSecUseAuthenticationUISkip`: queries leave out items that would need a credential they
    /// were not given, instead of failing.
    public var skipItemsNeedingAuthentication: Bool
    /// Told what a proof of `passcode` reported (wrong passcodes since the owner was last told),
    /// whenever it reported any: show it to the owner.
    public var reportWrongPasscodes: (@Sendable (WrongPasscodes) -> Void)?

    /// Credentials for items with access constraints; none by default.
    public init(
        passcode: SecureBytes? = nil, applicationPassword: SecureBytes? = nil,
        skipItemsNeedingAuthentication: Bool = false,
        reportWrongPasscodes: (@Sendable (WrongPasscodes) -> Void)? = nil
    ) {
        self.passcode = passcode
        self.applicationPassword = applicationPassword
        self.skipItemsNeedingAuthentication = skipItemsNeedingAuthentication
        self.reportWrongPasscodes = reportWrongPasscodes
    }

    /// No credential, no skipping: what every call is given unless told otherwise.
    public static let none = ItemAuthentication()
}
