import Foundation
import Sealing

/// What the device record holds for the signed-in account, as one read of it saw it: the
/// account's own bytes (which the device keeps and never reads), and the device's facts the
/// account's rules read. It is also the stamp a replacement of the account's bytes is checked
/// against (`Device.replaceAccountState(since:_:)`).
///
/// The account reads the device through this alone: never the record itself, its passcode slot
/// or its guess count.
package struct HeldAccountState: Sendable {
    /// The account's own record (nil: none). The device applies one rule to it: it goes with the
    /// last knowledge factor, in the same write, as every end-to-end key does.
    package var bytes: Data?
    /// The device's stable public identifier.
    package let deviceID: String
    /// Whether a knowledge factor (pin, pattern, password) is set: end-to-end encryption needs
    /// one.
    package let hasKnowledgeFactor: Bool
    /// The record's generation, bumped by every lock-screen change and re-seal of the class keys.
    package let generation: Int?
    /// How many times a passcode replaced another on this device (nil: none yet).
    package let passcodeChanges: Int?
    /// The presence key's public half: a knowledge factor removed and set again has a new one.
    let presencePublicKey: Data?
    /// The device secret, for the keyed hashes the account derives from it (`keyedHash`).
    private let deviceSecret: Data

    init(_ record: DeviceRecord) {
        bytes = record.accountRecord
        deviceID = record.deviceID
        hasKnowledgeFactor = record.kind.hasKnowledgeFactor
        generation = record.generation
        passcodeChanges = record.passcodeChanges
        presencePublicKey = record.presencePublicKey
        deviceSecret = record.deviceSecret
    }

    /// A keyed hash of `input` under the device secret, bound to `context`: a key or a name the
    /// account derives from the device without holding its secret.
    package func keyedHash(context: String, _ input: Data = Data()) -> SecureBytes {
        KeyDerivation.keyedHash(key: SecureBytes(copying: deviceSecret), context: context, input)
    }

    /// Whether the device's state, as it is now (`self`), still holds for an operation of the
    /// account that began from `read`: the same device (not erased since), and no knowledge factor
    /// removed since. One removed and set again has a new presence key, and has lost the account's
    /// bytes `read` held (which tells it in a record without a presence key yet: the next unlock
    /// makes one).
    func stillHolds(since read: HeldAccountState) -> Bool {
        guard deviceID == read.deviceID else { return false }
        guard read.hasKnowledgeFactor else { return true }
        return hasKnowledgeFactor
            && (read.presencePublicKey == nil || presencePublicKey == read.presencePublicKey)
            && (read.bytes == nil || bytes != nil)
    }
}

extension Device {
    /// The signed-in account's state as the device record holds it now: one read of the record.
    /// The class keys' lookups that follow (sealing the account's keys on this device) read it
    /// no more: the runtime state is found through this read.
    package func accountState() throws(DeviceError) -> HeldAccountState {
        let record = try records.load().record
        _ = try runtime(record)
        return HeldAccountState(record)
    }

    /// Replaces the account's bytes by a compare-and-swap on the device's state as the account
    /// read it (`read`): under the device's lock, the record is read again, and `change` applied to
    /// the account's state as it is now only while the device's state still holds for what began
    /// from `read` (the same device, no knowledge factor removed since). Returns the state as
    /// stored; nil, with nothing written, when it no longer holds.
    package func replaceAccountState(
        since read: HeldAccountState,
        _ change: (inout HeldAccountState) throws(DeviceError) -> Void
    ) throws(DeviceError) -> HeldAccountState? {
        try records.exclusively { (held) throws(DeviceError) -> HeldAccountState? in
            let loaded = try records.load()
            var record = loaded.record
            var current = HeldAccountState(record)
            guard current.stillHolds(since: read) else { return nil }
            try change(&current)
            if current.bytes != record.accountRecord {
                record.accountRecord = current.bytes
                try records.store(record, replacing: loaded.path, held)
            }
            return current
        }
    }
}
