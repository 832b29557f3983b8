import Device
import Foundation

/// The cloud account's state on this device, kept in the device record's account part
/// (`DeviceRecord.accountState`, which the device stores and never reads): the names are the
/// ones records have always stored.
struct AccountState: Codable, Equatable {
    /// The cloud account's key, sealed under the AfterFirstUnlock class key.
    var wrappedCloudKey: Data?
    /// The account witness's seed (`AccountWitness`), sealed under the AfterFirstUnlock class key:
    /// kept here so that a cloud withholding its copy cannot stop this device signing.
    var wrappedWitnessSeed: Data?
    /// The device record's `generation` under which this device last registered the account key
    /// with the cloud's escrow (a passcode change registers again).
    var escrowGeneration: Int?
    /// The cloud account key's epoch this device holds (how many rotations it has followed).
    var cloudEpoch: Int?
    /// The device record's `generation` (bumped by every lock-screen change) under which this
    /// device's account key was made, joined, followed or rotated: a later one means the passcode
    /// changed since, and the next unlock rotates the key. nil: not noted yet (the next unlock
    /// notes it).
    var keyGeneration: Int?
    /// Set in records whose device noted a passcode change for the account: the next unlock
    /// rotates the key and clears it.
    var rotationPending: Bool?

    /// Whether the passcode changed since the account key was last made or rotated here.
    func passcodeChangedSinceKey(generation: Int?) -> Bool {
        rotationPending == true || (keyGeneration != nil && keyGeneration != generation)
    }
}

extension DeviceRecord {
    /// The cloud account's state in this record (empty when there is none, or it does not read
    /// as the account's).
    var account: AccountState {
        get {
            guard let names = try? JSONEncoder().encode(accountState),
                let state = try? JSONDecoder().decode(AccountState.self, from: names)
            else { return AccountState() }
            return state
        }
        set {
            guard let json = try? JSONEncoder().encode(newValue),
                let names = try? JSONDecoder().decode([String: AccountValue].self, from: json)
            else { return }
            accountState = names
        }
    }

    /// The account key `wrapped` (sealed under a class key) held from now on, at `epoch`, noted
    /// under this record's generation.
    mutating func holdAccountKey(_ wrapped: Data, epoch: Int) {
        account.wrappedCloudKey = wrapped
        account.cloudEpoch = epoch
        account.keyGeneration = generation
        account.rotationPending = nil
    }
}
