import Device
import Foundation

/// The cloud account's state in the device record (`DeviceRecord.accountState`): its names are
/// this module's, and so is their meaning. The names are the ones records have always stored.
extension DeviceRecord {
    /// The cloud account's key, sealed under the AfterFirstUnlock class key.
    var wrappedCloudKey: Data? {
        get { accountState.data("wrappedCloudKey") }
        set { accountState.set("wrappedCloudKey", newValue) }
    }

    /// The account witness's seed (`AccountWitness`), sealed under the AfterFirstUnlock class key:
    /// kept here so that a cloud withholding its copy cannot stop this device signing.
    var wrappedWitnessSeed: Data? {
        get { accountState.data("wrappedWitnessSeed") }
        set { accountState.set("wrappedWitnessSeed", newValue) }
    }

    /// The `generation` under which this device last registered the account key with the
    /// cloud's escrow (a passcode change registers again).
    var escrowGeneration: Int? {
        get { accountState.int("escrowGeneration") }
        set { accountState.set("escrowGeneration", newValue) }
    }

    /// The cloud account key's epoch this device holds (how many rotations it has followed).
    var cloudEpoch: Int? {
        get { accountState.int("cloudEpoch") }
        set { accountState.set("cloudEpoch", newValue) }
    }

    /// The passcode changed while the account key could not be rotated (the cloud unreachable,
    /// or this process not signed in): the next unlock rotates it.
    var rotationPending: Bool? {
        get { accountUpkeepPending }
        set { accountUpkeepPending = newValue }
    }
}
