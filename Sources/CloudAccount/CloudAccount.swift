import Device
import Foundation

/// The cloud account a device is signed in to: everything the account does — joins (by
/// approval, recovery key or passcode), approving a new device, the account key and its
/// rotation, the witness that signs the account's manifest, the account's devices, the recovery
/// key, the session the stores sync through, and where the account stands — is this type's.
///
/// It is built from a `Device`: `CloudAccount(device)` for a device already signed in, or
/// `CloudAccount(secretService:directory:cloud:…)` to make the device and sign it in. A device
/// signed out (`cloud` nil) answers every call as signed out.
public struct CloudAccount: Sendable {
    /// The device signed in to the account: its lock screen, class keys and record.
    public let device: Device

    /// The account `device` is signed in to (or the signed-out answers, when it is not).
    public init(_ device: Device) {
        self.device = device
    }

    var signIn: CloudSignIn? { device.account as? CloudSignIn }

    /// The account's storage, or nil when the device is signed out.
    public var cloud: (any CloudStorage)? { signIn?.storage }

    /// The account's escrow service, when the account uses one.
    package var escrow: EscrowConfiguration? { signIn?.escrow }

    /// Why the last unlock could not keep the account up to date (the device unlocked all the
    /// same), for a caller to say so; nil when it could or had nothing to do.
    package var lastProblem: String? { signIn?.lastProblem }
}
