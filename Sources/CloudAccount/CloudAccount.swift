import Device
import Foundation

/// The cloud account a device is signed in to: everything the account does — joins (by
/// approval, recovery key or passcode), approving a new device, the account key and its
/// rotation, the witness that signs the account's manifest, the account's devices, the recovery
/// key, the session the stores sync through, and where the account stands — is this type's.
///
/// It is built from a `Device` and the account's storage: `CloudAccount(device, cloud:)`, or
/// `CloudAccount(secretService:directory:cloud:…)` to make the device too. The device knows
/// nothing of it: unlock and change the lock screen through the account
/// (`account.unlock(passcode:)`, `account.setLockScreen(…)`), which acts on what the device's own
/// calls return (makes, joins, re-registers or rotates its key). Give the account, not the
/// device, to a store that syncs. Signed out (`cloud` nil), it answers every call as signed out.
public struct CloudAccount: Sendable {
    /// The device signed in to the account: its lock screen, class keys and record.
    public let device: Device

    /// The account's storage, or nil when the device is signed out.
    public let cloud: (any CloudStorage)?

    /// The account's escrow service, when the account uses one: it holds the account key for
    /// joining with a passcode, and counts the claims.
    package let escrow: EscrowConfiguration?

    /// `device` signed in to the account at `cloud` (nil: signed out), joining with a passcode
    /// through `escrow` when the account uses one.
    public init(
        _ device: Device, cloud: (any CloudStorage)?, escrow: EscrowConfiguration? = nil
    ) {
        self.device = device
        self.cloud = cloud
        self.escrow = escrow
        // A lock left on the server by a process of this device that died is released by the
        // next one, not waited out (WebDAV locks last two minutes).
        cloud?.keepLockTokens(in: device.directory.appendingPathComponent("cloud-locks"))
    }
}
