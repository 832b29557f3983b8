import Foundation
import Sealing
import Platform

/// A device's side of `EscrowProtocol`, over any transport that carries one request and its
/// answer (HTTP in `Device`; a recording relay in the tests).
package struct EscrowClient: Sendable {
    /// Sends `body` to `path` with `method`; returns the status and the answer's body.
    package typealias Transport =
        @Sendable (_ method: String, _ path: String, _ body: Data) throws(EscrowError) -> (
            status: Int, body: Data
        )

    /// What the escrow says about a slot: the passcode key's derivation, the slot's public key,
    /// and its count when the caller is its reader.
    package struct SlotStatus: Sendable, Equatable {
        package var salt: Data
        package var cost: Argon2Cost
        package var limit: Int
        /// Where the escrow keeps its count (`EscrowService.counter`).
        package var counter: String
        /// The slot's OPRF public key, as the escrow names it.
        package var publicKey: Data
        /// Told to the slot's reader only (`count(of:reader:)`).
        package var count: Count?
    }

    /// A slot's count, as its reader is told it: its budget's, which every slot of its caller
    /// shares.
    package struct Count: Sendable, Equatable {
        /// Tries spent (wrong claims not yet reported to the owner): at `limit` the slot is gone.
        package var spent: Int
        /// Wrong claims not yet reported, and when the first and the last were.
        package var wrongSinceRight: Int
        package var firstWrong: Date?
        package var lastWrong: Date?
        /// The slot takes no claim before this (nil: now).
        package var notBefore: Date?
    }

    /// What a right claim released, and its report of the claims before it.
    package struct Released: Sendable {
        package var secret: SecureBytes
        /// Wrong claims not yet reported (made through Keepsake or around it, on any slot of the
        /// caller's), and when the first and the last were.
        package var wrongSinceRight: Int
        package var firstWrong: Date?
        package var lastWrong: Date?
        /// The report's token: `acknowledge` gives the tries it showed back once the owner saw it.
        package var report: Data?
    }

    /// A new slot: its ID and the public key its evaluations are proven under.
    package struct Registered: Sendable {
        package var slot: Data
        package var publicKey: Data
    }

    private let transport: Transport

    package init(transport: @escaping Transport) { self.transport = transport }

    /// Puts `secret` (32 or 64 bytes) in a new slot, released to the passcode whose key is
    /// `passcodeKey` (derived with `salt` and `cost`, which the escrow keeps for claimers), at
    /// most `limit` claims without it in a row. Removing the slot later takes the secret itself
    /// (`remove`): whoever registered it, or claimed it with the right passcode — or, when
    /// `owner` is given, that part of it (a key the secret starts with). `reader`: the public
    /// key the slot tells its count to (`EscrowProtocol.reader`). Returns the slot's ID and the
    /// public key it is evaluated under (checked against the registration's own proof), which
    /// the caller pins. `succeeding`: the slot this one replaces and the report of the right
    /// claim on it that proved the passcode just now — its unreported wrong claims go to this
    /// one when it is removed (a slot without one leaves them spent).
    package func register(
        _ secret: SecureBytes, owner: SecureBytes? = nil, passcodeKey: SecureBytes, salt: Data,
        cost: Argon2Cost, limit: Int, reader: Data? = nil,
        inherit: (slot: Data, reader: SecureBytes)? = nil,
        succeeding: (slot: Data, report: Data)? = nil
    ) throws(EscrowError) -> Registered {
        let (blind, blinded) = OPRF.blind(passcodeKey, context: EscrowProtocol.context)
        let answer = try send(.register, [(.blinded, blinded)])
        let slot = try answer.exactly(.slot, EscrowProtocol.slotIDLength)
        let publicKey = try answer.exactly(.publicKey, OPRF.elementLength)
        let evaluated = try answer.exactly(.evaluated, OPRF.elementLength)
        try Self.check(answer, publicKey: publicKey, blinded: blinded, evaluated: evaluated)
        let keys = try derive(passcodeKey, blind: blind, evaluated: evaluated, slot: slot)
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
            ] + (reader.map { [(.reader, $0)] } ?? [])
                + (inherit.map {
                    [
                        (.inherit, $0.slot),
                        (
                            .inheritSignature,
                            Signature.sign(
                                EscrowProtocol.inheritProof(slot: slot, from: $0.slot),
                                secretKey: $0.reader)
                        ),
                    ]
                } ?? [])
                + (succeeding.map { [(.inherit, $0.slot), (.report, $0.report)] } ?? []))
        return Registered(slot: slot, publicKey: publicKey)
    }

    /// The slot's derivation and public key: never counted, nothing secret.
    package func status(of slot: Data) throws(EscrowError) -> SlotStatus {
        try slotStatus(try send(.slot, [(.slot, slot)]))
    }

    /// The slot's status with its count, asked as its reader (the key registered with it):
    /// nobody else is told the count.
    package func count(of slot: Data, reader: (publicKey: Data, secretKey: SecureBytes))
        throws(EscrowError) -> SlotStatus
    {
        let challenge = try send(.challenge, [(.slot, slot)])
            .exactly(.challenge, EscrowProtocol.challengeLength)
        let proof = EscrowProtocol.readProof(slot: slot, challenge: challenge)
        return try slotStatus(
            try send(
                .slot,
                [
                    (.slot, slot), (.challenge, challenge),
                    (.signature, Signature.sign(proof, secretKey: reader.secretKey)),
                ]))
    }

    private func slotStatus(_ answer: TLV.Fields) throws(EscrowError) -> SlotStatus {
        let cost = Argon2Cost(
            operations: UInt64(try answer.integer(.operations, in: 1...64)),
            memoryBytes: Int(try answer.integer(.memory, in: 8192...(4 << 30))))
        guard cost.isWithinBounds else {
            throw EscrowError(.malformed, "the escrow's passcode cost is out of bounds")
        }
        let limit = try answer.integer(.limit, in: 1...EscrowProtocol.maximumLimit)
        var count: Count?
        if answer[EscrowProtocol.Tag.failures.rawValue] != nil {
            let lastWrong = try answer.integer(.lastWrong, in: 0...Int64.max)
            let firstWrong =
                answer[EscrowProtocol.Tag.firstWrong.rawValue] == nil
                ? 0 : try answer.integer(.firstWrong, in: 0...Int64.max)
            let notBefore = try answer.integer(.notBefore, in: 0...Int64.max)
            let wrong = try answer.integer(.sinceRight, in: 0...Int64(Int32.max))
            count = Count(
                spent: Int(try answer.integer(.failures, in: 0...limit)),
                wrongSinceRight: Int(wrong),
                firstWrong: wrong == 0 || firstWrong == 0 ? nil : Self.date(firstWrong),
                lastWrong: wrong == 0 || lastWrong == 0 ? nil : Self.date(lastWrong),
                notBefore: Self.date(notBefore) > Date() ? Self.date(notBefore) : nil)
        }
        return SlotStatus(
            salt: try answer.exactly(.salt, KeyDerivation.saltLength), cost: cost,
            limit: Int(limit), counter: answer.text(.counter) ?? "unknown",
            publicKey: try answer.exactly(.publicKey, OPRF.elementLength), count: count)
    }

    /// One claim: counted by the escrow before it answers; the secret when `passcodeKey` is the
    /// slot's. The escrow's evaluation is checked against `publicKey` (the key pinned at
    /// registration, or the one the escrow names) before anything derived from it is sent: an
    /// answer that is not the slot's own service's ends the claim there.
    ///
    /// - Throws: `.authFailed` for a wrong passcode (counted), `.destroyed` once the slot's limit
    ///   was reached, `.wait` while the slot takes no claim, `.notTheService`, `.notFound`,
    ///   `.unavailable`.
    package func claim(_ slot: Data, passcodeKey: SecureBytes, publicKey: Data)
        throws(EscrowError) -> Released
    {
        let (blind, blinded) = OPRF.blind(passcodeKey, context: EscrowProtocol.context)
        let answer = try send(.claim, [(.slot, slot), (.blinded, blinded)])
        let challenge = try answer.exactly(.challenge, EscrowProtocol.challengeLength)
        let evaluated = try answer.exactly(.evaluated, OPRF.elementLength)
        try Self.check(answer, publicKey: publicKey, blinded: blinded, evaluated: evaluated)
        let keys = try derive(passcodeKey, blind: blind, evaluated: evaluated, slot: slot)
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
        let secret: SecureBytes
        do {
            let envelope = try SealedBox.open(
                sealed, publicKey: box.publicKey, secretKey: box.secretKey)
            secret = try Envelope.open(
                envelope.unsafeData(), key: keys.envelope,
                associatedData: EscrowProtocol.envelopeBinding(slot: slot))
        } catch {
            throw EscrowError(.malformed, "the escrow released something that does not open")
        }
        let wrong = try released.integer(.sinceRight, in: 0...Int64(Int32.max))
        let lastWrong = try released.integer(.lastWrong, in: 0...Int64.max)
        let firstWrong =
            released[EscrowProtocol.Tag.firstWrong.rawValue] == nil
            ? 0 : try released.integer(.firstWrong, in: 0...Int64.max)
        let report =
            released[EscrowProtocol.Tag.report.rawValue] == nil
            ? nil : try released.exactly(.report, EscrowProtocol.challengeLength)
        return Released(
            secret: secret, wrongSinceRight: Int(wrong),
            firstWrong: wrong == 0 || firstWrong == 0 ? nil : Self.date(firstWrong),
            lastWrong: wrong == 0 || lastWrong == 0 ? nil : Self.date(lastWrong), report: report)
    }

    /// Tells the escrow that the owner was shown `released`'s report: the wrong claims it showed
    /// come back (and only those). Without it they stay spent and are reported again at the
    /// next right claim.
    package func acknowledge(_ slot: Data, _ released: Released) throws(EscrowError) {
        guard let report = released.report else { return }
        _ = try send(.acknowledge, [(.slot, slot), (.report, report)])
    }

    /// The evaluation's proof under `publicKey`, checked before anything is derived from it.
    private static func check(
        _ answer: TLV.Fields, publicKey: Data, blinded: Data, evaluated: Data
    ) throws(EscrowError) {
        let proof = try answer.exactly(.proof, OPRF.proofLength)
        guard
            OPRF.verify(
                proof: proof, publicKey: publicKey, blinded: blinded, evaluated: evaluated,
                context: EscrowProtocol.context)
        else {
            throw EscrowError(
                .notTheService,
                "the answer is not proven under the slot's key: not the service this slot was registered with (nothing derived from the passcode was sent)"
            )
        }
    }

    private static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Removes a slot as its reader: the device that registered it, retiring a slot its
    /// passcode change left behind.
    package func remove(_ slot: Data, reader: (publicKey: Data, secretKey: SecureBytes))
        throws(EscrowError)
    {
        try remove(slot, signer: reader.secretKey)
    }

    /// Removes a slot, proving it knows the slot's secret (nothing else removes one: not the
    /// cloud that names the slot, not a process that reads the record naming it — only the
    /// slot's reader, `remove(_:reader:)`).
    package func remove(_ slot: Data, secret: SecureBytes) throws(EscrowError) {
        try remove(slot, signer: Self.owner(secret).secretKey)
    }

    private func remove(_ slot: Data, signer: SecureBytes) throws(EscrowError) {
        let challenge = try send(.challenge, [(.slot, slot)])
            .exactly(.challenge, EscrowProtocol.challengeLength)
        let proof = EscrowProtocol.removalProof(slot: slot, challenge: challenge)
        _ = try send(
            .remove,
            [
                (.slot, slot), (.challenge, challenge),
                (.signature, Signature.sign(proof, secretKey: signer)),
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
