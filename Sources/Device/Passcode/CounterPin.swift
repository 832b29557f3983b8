import Escrow
import Foundation
import Sealing

/// What a device learnt of its guess counter when it registered, kept in its record: who
/// answered on the socket (`SO_PEERCRED`) and the slot's OPRF public key. With the record's salt
/// and cost, under a MAC keyed by the device secret: a claim derives the passcode key with the
/// pinned salt and cost (never what a service says), asks only the pinned user, and checks each
/// evaluation's proof under the pinned key before it sends anything derived from it. A service
/// that is not the one registered with learns nothing a guess can be tested against.
package struct CounterPin: Codable, Sendable, Equatable {
    /// The uid that answered on the socket at registration.
    package var peer: UInt32
    /// The slot's OPRF public key.
    package var publicKey: Data
    /// BLAKE2b keyed by the device secret over the slot, the pin, the salt and the cost.
    package var mac: Data

    package init(
        peer: UInt32, publicKey: Data, slot: Data, salt: Data, cost: Argon2Cost,
        deviceSecret: SecureBytes
    ) {
        self.peer = peer
        self.publicKey = publicKey
        mac = Data()
        mac = authenticator(slot: slot, salt: salt, cost: cost, deviceSecret: deviceSecret)
    }

    /// The MAC checked: the pin, slot, salt and cost are the ones this device wrote.
    package func check(slot: Data, salt: Data, cost: Argon2Cost, deviceSecret: SecureBytes)
        throws(DeviceError)
    {
        let expected = authenticator(slot: slot, salt: salt, cost: cost, deviceSecret: deviceSecret)
        guard constantTimeEquals(expected, mac) else {
            throw DeviceError(
                .corrupt,
                "the device record's guess counter pin does not check (the record was rewritten): nothing was sent to the counter"
            )
        }
    }

    private func authenticator(slot: Data, salt: Data, cost: Argon2Cost, deviceSecret: SecureBytes)
        -> Data
    {
        var input = Data("keepsake counter pin v1\0".utf8)
        input += withUnsafeBytes(of: peer.bigEndian) { Data($0) } + publicKey + slot + salt
        input += withUnsafeBytes(of: cost.operations.bigEndian) { Data($0) }
        input += withUnsafeBytes(of: UInt64(cost.memoryBytes).bigEndian) { Data($0) }
        return KeyDerivation.keyedHash(key: deviceSecret, context: "keepsake.counter.pin", input)
            .unsafeData()
    }
}
