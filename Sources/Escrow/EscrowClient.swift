import Foundation
import Sealing

/// A device's side of `EscrowProtocol`, over any transport that carries one request and its
/// answer (HTTP in `Device`; a recording relay in the tests).
package struct EscrowClient: Sendable {
    /// Sends `body` to `path` with `method`; returns the status and the answer's body.
    package typealias Transport =
        @Sendable (_ method: String, _ path: String, _ body: Data) throws(EscrowError) -> (
            status: Int, body: Data
        )

    /// What the escrow says about a slot: the passcode key's derivation, and its count.
    package struct SlotStatus: Sendable, Equatable {
        package var salt: Data
        package var cost: Argon2Cost
        package var failures: Int
        package var limit: Int
        /// Where the escrow keeps its count (`EscrowService.counter`).
        package var counter: String
    }

    private let transport: Transport

    package init(transport: @escaping Transport) { self.transport = transport }

    /// Puts `secret` (32 or 64 bytes) in a new slot, released to the passcode whose key is
    /// `passcodeKey` (derived with `salt` and `cost`, which the escrow keeps for claimers), at
    /// most `limit` claims without it in a row. Removing the slot later takes the secret itself
    /// (`remove`): whoever registered it, or claimed it with the right passcode — or, when
    /// `owner` is given, that part of it (a key the secret starts with). Returns the slot's ID.
    package func register(
        _ secret: SecureBytes, owner: SecureBytes? = nil, passcodeKey: SecureBytes, salt: Data,
        cost: Argon2Cost, limit: Int
    ) throws(EscrowError) -> Data {
        let (blind, blinded) = OPRF.blind(passcodeKey, context: EscrowProtocol.context)
        let answer = try send(.register, [(.blinded, blinded)])
        let slot = try answer.exactly(.slot, EscrowProtocol.slotIDLength)
        let keys = try derive(
            passcodeKey, blind: blind,
            evaluated: try answer.exactly(.evaluated, OPRF.elementLength), slot: slot)
        let envelope = secret.withUnsafeBytes {
            Envelope.seal(
                $0, key: keys.envelope, associatedData: EscrowProtocol.envelopeBinding(slot: slot))
        }
        _ = try send(
            .finishRegistration,
            [
                (.slot, slot), (.verifier, keys.verifier.publicKey),
                (.owner, Self.owner(owner ?? secret).publicKey), (.envelope, envelope),
                (.salt, salt), (.operations, EscrowProtocol.integer(Int64(cost.operations))),
                (.memory, EscrowProtocol.integer(Int64(cost.memoryBytes))),
                (.limit, EscrowProtocol.integer(Int64(limit))),
            ])
        return slot
    }

    /// The slot's derivation and count: never counted, nothing secret.
    package func status(of slot: Data) throws(EscrowError) -> SlotStatus {
        let answer = try send(.slot, [(.slot, slot)])
        let cost = Argon2Cost(
            operations: UInt64(try answer.integer(.operations, in: 1...64)),
            memoryBytes: Int(try answer.integer(.memory, in: 8192...(4 << 30))))
        guard cost.isWithinBounds else {
            throw EscrowError(.malformed, "the escrow's passcode cost is out of bounds")
        }
        return SlotStatus(
            salt: try answer.exactly(.salt, KeyDerivation.saltLength), cost: cost,
            failures: Int(try answer.integer(.failures, in: 0...EscrowProtocol.maximumLimit)),
            limit: Int(try answer.integer(.limit, in: 1...EscrowProtocol.maximumLimit)),
            counter: answer.text(.counter) ?? "unknown")
    }

    /// One claim: counted by the escrow before it answers; the secret when `passcodeKey` is the
    /// slot's.
    ///
    /// - Throws: `.authFailed` for a wrong passcode (counted), `.destroyed` once the slot's limit
    ///   was reached, `.notFound`, `.unavailable`.
    package func claim(_ slot: Data, passcodeKey: SecureBytes) throws(EscrowError) -> SecureBytes {
        let (blind, blinded) = OPRF.blind(passcodeKey, context: EscrowProtocol.context)
        let answer = try send(.claim, [(.slot, slot), (.blinded, blinded)])
        let challenge = try answer.exactly(.challenge, EscrowProtocol.challengeLength)
        let keys = try derive(
            passcodeKey, blind: blind,
            evaluated: try answer.exactly(.evaluated, OPRF.elementLength), slot: slot)
        let box = SealedBox.keyPair()
        let proof = EscrowProtocol.claimProof(
            slot: slot, challenge: challenge, boxKey: box.publicKey)
        let released = try send(
            .finishClaim,
            [
                (.slot, slot), (.challenge, challenge), (.boxKey, box.publicKey),
                (.signature, Signature.sign(proof, secretKey: keys.verifier.secretKey)),
            ])
        let sealed = try released.atMost(.sealed, 1024)
        do {
            let envelope = try SealedBox.open(
                sealed, publicKey: box.publicKey, secretKey: box.secretKey)
            return try Envelope.open(
                envelope.unsafeData(), key: keys.envelope,
                associatedData: EscrowProtocol.envelopeBinding(slot: slot))
        } catch {
            throw EscrowError(.malformed, "the escrow released something that does not open")
        }
    }

    /// Removes a slot, proving it knows the slot's secret (nothing else removes one: not the
    /// cloud that names the slot, not a process that reads the record naming it).
    package func remove(_ slot: Data, secret: SecureBytes) throws(EscrowError) {
        let challenge = try send(.challenge, [(.slot, slot)])
            .exactly(.challenge, EscrowProtocol.challengeLength)
        let proof = EscrowProtocol.removalProof(slot: slot, challenge: challenge)
        _ = try send(
            .remove,
            [
                (.slot, slot), (.challenge, challenge),
                (.signature, Signature.sign(proof, secretKey: Self.owner(secret).secretKey)),
            ])
    }

    /// Puts `statement` in the witness `id` (signed here with `key`; the escrow keeps it only over
    /// one that orders no higher). An older one than the escrow keeps is `.stale`.
    package func witness(
        _ id: Data, statement: Data, key: (publicKey: Data, secretKey: SecureBytes)
    ) throws(EscrowError) {
        let proof = EscrowProtocol.witnessProof(id: id, statement: statement)
        _ = try send(
            .witness,
            [
                (.slot, id), (.owner, key.publicKey), (.statement, statement),
                (.signature, Signature.sign(proof, secretKey: key.secretKey)),
            ])
    }

    /// The statement the witness `id` keeps, once its signature verified under `publicKey` (the
    /// key the reader derived itself, whatever key the escrow names); nil when it keeps none.
    ///
    /// - Throws: `.authFailed` for a statement not signed by `publicKey`.
    package func witnessed(_ id: Data, publicKey: Data) throws(EscrowError) -> Data? {
        let answer: TLV.Fields
        do { answer = try send(.readWitness, [(.slot, id)]) } catch {
            if error.code == .notFound { return nil }
            throw error
        }
        let statement = try answer.atMost(.statement, EscrowProtocol.maximumStatement)
        let signature = try answer.exactly(.signature, Signature.length)
        guard
            Signature.verify(
                signature, of: EscrowProtocol.witnessProof(id: id, statement: statement),
                publicKey: publicKey)
        else {
            throw EscrowError(.authFailed, "the witnessed statement is not signed by this account")
        }
        return statement
    }

    /// The slot owner's signing key: derived from the secret the slot holds.
    static func owner(_ secret: SecureBytes) -> (publicKey: Data, secretKey: SecureBytes) {
        Signature.keyPair(
            seed: KeyDerivation.keyedHash(key: secret, context: "keepsake-escrow owner"))
    }

    /// Where the escrow keeps its count, as it says.
    package func counter() throws(EscrowError) -> String {
        let (status, body) = try transport("GET", EscrowProtocol.Path.status.rawValue, Data())
        let fields = try EscrowProtocol.fields(body)
        guard status == 200, let counter = fields.text(.counter) else {
            throw EscrowError(status: status, message: fields.text(.message) ?? "HTTP \(status)")
        }
        return counter
    }

    // MARK: -

    /// The keys a slot's OPRF output gives: the verifier's signing key and the envelope's key.
    private func derive(_ passcodeKey: SecureBytes, blind: SecureBytes, evaluated: Data, slot: Data)
        throws(EscrowError) -> (
            verifier: (publicKey: Data, secretKey: SecureBytes), envelope: SecureBytes
        )
    {
        let output: SecureBytes
        do {
            output = try OPRF.finalize(
                passcodeKey, blind: blind, evaluated: evaluated, context: EscrowProtocol.context)
        } catch {
            throw EscrowError(.malformed, "the escrow's evaluation: \(error)")
        }
        let seed = KeyDerivation.keyedHash(key: output, context: "keepsake-escrow verifier", slot)
        return (
            Signature.keyPair(seed: seed),
            KeyDerivation.keyedHash(key: output, context: "keepsake-escrow envelope", slot)
        )
    }

    private func send(_ path: EscrowProtocol.Path, _ fields: [(EscrowProtocol.Tag, Data)])
        throws(EscrowError) -> TLV.Fields
    {
        let (status, body) = try transport("POST", path.rawValue, EscrowProtocol.message(fields))
        let answer = try EscrowProtocol.fields(body)
        guard status == 200 else {
            throw EscrowError(
                status: status,
                message: answer.text(.message).map { "the escrow: \($0)" }
                    ?? "the escrow answered HTTP \(status)")
        }
        return answer
    }
}
