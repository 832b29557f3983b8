import Device
import Foundation

/// The cloud account's own record on this device: one JSON object, kept in the device record
/// (`HeldAccountState.bytes`: bytes the device stores and never reads, and drops with the last
/// knowledge factor); its names are the ones it has always stored. Read field by field (a value that
/// does not read loses only that field) and written over only its own names (a name it does not
/// know, a later version's, is kept).
struct AccountState: Codable, Equatable {
    /// The cloud account's key, sealed under the AfterFirstUnlock class key.
    var wrappedCloudKey: Data?
    /// The account witness's seed (`AccountWitness`), sealed under the AfterFirstUnlock class key:
    /// kept here so that a cloud withholding its copy cannot stop this device signing.
    var wrappedWitnessSeed: Data?
    /// The device record's `generation` under which this device last registered the account key
    /// with the cloud's escrow (a passcode change or a re-seal registers again).
    var escrowGeneration: Int?
    /// The cloud account key's epoch this device holds (how many rotations it has followed).
    var cloudEpoch: Int?
    /// The device's `passcodeChanges` when this device last made, rotated or adopted the account
    /// key (nil: 0): a passcode changed since, through the account or the device alone, has the
    /// next unlock rotate the key. Following another device's rotation does not note it.
    var keyPasscodeChanges: Int?
    /// A rotation owed to a passcode change, where this device noted it itself: the next
    /// unlock rotates the key, which clears it.
    var rotationPending: Bool?

    init() {}

    init(from decoder: any Decoder) throws {
        let names = try decoder.container(keyedBy: CodingKeys.self)
        wrappedCloudKey = try? names.decodeIfPresent(Data.self, forKey: .wrappedCloudKey)
        wrappedWitnessSeed = try? names.decodeIfPresent(Data.self, forKey: .wrappedWitnessSeed)
        escrowGeneration = try? names.decodeIfPresent(Int.self, forKey: .escrowGeneration)
        cloudEpoch = try? names.decodeIfPresent(Int.self, forKey: .cloudEpoch)
        keyPasscodeChanges = try? names.decodeIfPresent(Int.self, forKey: .keyPasscodeChanges)
        rotationPending = try? names.decodeIfPresent(Bool.self, forKey: .rotationPending)
    }

    /// Whether the passcode changed since the account key was last made, rotated or adopted
    /// here, with the device's `passcodeChanges` at `changes`.
    func owesRotation(passcodeChanges changes: Int?) -> Bool {
        rotationPending == true || (keyPasscodeChanges ?? 0) != (changes ?? 0)
    }
}

extension HeldAccountState {
    /// The cloud account's own record as the device holds it (empty when there is none).
    var account: AccountState {
        get {
            bytes.flatMap { try? JSONDecoder().decode(AccountState.self, from: $0) }
                ?? AccountState()
        }
        set {
            var names = Self.names(in: bytes)
            let own = Self.names(in: try? JSONEncoder().encode(newValue))
            // Its own names are written over (a nil one removed); any other is kept.
            for name in AccountState.CodingKeys.allCases.map(\.stringValue) {
                names[name] = own[name]
            }
            bytes =
                names.isEmpty
                ? nil : try? JSONSerialization.data(withJSONObject: names, options: .sortedKeys)
        }
    }

    /// The names of the JSON object `bytes` (none when they are not one).
    private static func names(in bytes: Data?) -> [String: Any] {
        bytes.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] } ?? [:]
    }

    /// The account key `wrapped` (sealed under a class key) held from now on, at `epoch`. Made,
    /// rotated or adopted here (`underThisPasscode`), it is noted as the current passcode's: a
    /// key followed from another device's rotation is not, so a rotation this device owes for
    /// its own passcode change is still made.
    mutating func holdAccountKey(_ wrapped: Data, epoch: Int, underThisPasscode: Bool) {
        var state = account
        (state.wrappedCloudKey, state.cloudEpoch) = (wrapped, epoch)
        if underThisPasscode {
            (state.keyPasscodeChanges, state.rotationPending) = (passcodeChanges, nil)
        }
        account = state
    }
}

extension AccountState {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case wrappedCloudKey, wrappedWitnessSeed, escrowGeneration, cloudEpoch
        case keyPasscodeChanges, rotationPending
    }
}
