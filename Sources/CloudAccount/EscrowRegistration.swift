import Device
import Escrow
import Foundation
import Sealing

/// The account key's registration with the account's escrow service (which holds it for joining
/// with a passcode, and counts the claims): a slot under the passcode, named in the cloud's
/// escrow record by compare-and-swap, the slot named before removed.
struct EscrowRegistration {
    /// The keeper of the account key on this device.
    let keys: AccountKeyKeeper

    /// `register`, recorded in `record` when it went through. One that did not (the escrow
    /// unreachable, another device's record won the race) is tried again at the next unlock and
    /// never undoes what was done before it — an account just made, a rotation just switched.
    func registerOrRetry(
        _ accountKey: SecureBytes, passcode: SecureBytes, escrow: EscrowConfiguration,
        cloud: any CloudStorage, previousKey: SecureBytes? = nil, _ record: inout HeldAccountState
    ) -> Bool {
        guard
            (try? register(
                accountKey, passcode: passcode, escrow: escrow, cloud: cloud,
                previousKey: previousKey, seed: keys.witnessSeed(accountKey, record: record)))
                != nil
        else { return false }
        record.account.escrowGeneration = record.generation
        return true
    }

    /// Puts `accountKey` in a new escrow slot under `passcode`, names it in the cloud, and
    /// removes the slot named before (removing takes the account key it held: `previousKey`
    /// after a rotation, else `accountKey`). Needs the account's lock held by the
    /// caller or no other writer (escrow record).
    func register(
        _ accountKey: SecureBytes, passcode: SecureBytes, escrow: EscrowConfiguration,
        cloud: any CloudStorage, previousKey: SecureBytes? = nil, seed: SecureBytes?
    ) throws(DeviceError) {
        let found = try cloud.checked.readVersioned(AccountObjects.escrow)
        let old = found.flatMap { EscrowRecord.parse($0.data) }
        let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            passcode, salt: salt, cost: keys.device.passcodeCost)
        let client = escrow.client()
        let secret = AccountWitness.escrowSecret(accountKey, seed: seed)
        // The new slot joins the old one's budget (signed by the old slot's reader key): a
        // passcode change or a rotation gives no wrong claim back.
        let inherit = old.map {
            (
                slot: $0.slot,
                reader: EscrowProtocol.reader(secret: previousKey ?? accountKey).secretKey
            )
        }
        let register = { (inherit: (slot: Data, reader: SecureBytes)?) throws(EscrowError) in
            try client.register(
                secret, owner: accountKey, passcodeKey: passcodeKey, salt: salt,
                cost: keys.device.passcodeCost, limit: Int(EscrowProtocol.maximumLimit),
                reader: EscrowProtocol.reader(secret: accountKey).publicKey, inherit: inherit
            ).slot
        }
        let slot: Data
        do {
            do { slot = try register(inherit) } catch
                where inherit != nil
                && [.notFound, .destroyed].contains(error.code)
            {
                slot = try register(nil)  // the old slot is gone, and its budget with it
            }
        } catch { throw DeviceError(escrow: error) }
        // Compare-and-swap: when another device registered meanwhile, its record stands and
        // this one's slot goes; this device registers again at its next unlock.
        let swapped = try cloud.checked.write(
            AccountObjects.escrow, EscrowRecord(slot: slot).encoded(),
            ifVersion: found?.version)
        guard swapped else {
            try? client.remove(slot, secret: accountKey)
            throw DeviceError(
                .notAvailable, "the escrow record changed meanwhile: registered at the next unlock")
        }
        if let old { try? client.remove(old.slot, secret: previousKey ?? accountKey) }
    }
}
