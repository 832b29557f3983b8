import Foundation
import Sealing
import Synchronization
import Platform

/// Where an escrow keeps its slots: one record per slot, each write durable (on disk, synced)
/// before it returns — the count of a claim is on disk before the claim is answered.
package protocol SlotStorage: Sendable {
    func load(_ slot: Data) throws -> Data?
    func save(_ slot: Data, _ record: Data) throws
    func count() -> Int
}

/// The escrow's side of `EscrowProtocol`: slots, their counts, challenges. One request at a time
/// (state changes are serialized under one lock; each is a few microseconds plus one synced write).
package final class EscrowService: Sendable {
    /// What `status` reports the count is kept in (`file`: the escrow's own state directory).
    package let counter: String
    private let storage: any SlotStorage
    private let maximumSlots: Int
    private let now: @Sendable () -> Date
    private let policy: ClaimPolicy
    /// The paths it answers (a guess counter on its socket answers the slots' alone: no
    /// witness, which any caller could fill).
    private let paths: Set<EscrowProtocol.Path>
    private let state = Mutex(Volatile())

    /// Half-done registrations and outstanding challenges: in memory only (a restart voids them,
    /// which costs a retry, never a count).
    private struct Volatile {
        var pending: [Data: (key: SecureBytes, expires: Date)] = [:]
        /// A claim's challenge, and the slot's last wrong claim before it (what a right proof
        /// puts back: its own claim was counted as the last wrong one until then).
        var claims: [Data: (challenge: Data, expires: Date, lastWrong: Int64)] = [:]
        /// Challenges for a removal or for reading the count.
        /// Several at once a slot (the newest 8), each taken once: a caller asking for
        /// challenges in a loop cannot void the slot's device's own.
        var challenges: [Data: [(challenge: Data, expires: Date)]] = [:]

        /// Takes `offered` from the slot's outstanding challenges when it is one of them.
        mutating func take(_ offered: Data, for slot: Data, at now: Date) -> Bool {
            guard var issued = challenges[slot],
                let index = issued.firstIndex(where: {
                    $0.expires > now && constantTimeEquals($0.challenge, offered)
                })
            else { return false }
            issued.remove(at: index)
            challenges[slot] = issued.isEmpty ? nil : issued
            return true
        }
    }

    package init(
        storage: any SlotStorage, counter: String, maximumSlots: Int = 100_000,
        policy: ClaimPolicy = .real,
        paths: Set<EscrowProtocol.Path> = Set(EscrowProtocol.Path.allCases),
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.storage = storage
        self.policy = policy
        self.paths = paths
        self.counter = counter
        self.maximumSlots = maximumSlots
        self.now = now
    }

    /// Answers one request: the HTTP status and body. Never throws; every failure is an answer
    /// that names it (without anything secret: the escrow holds nothing a message may echo).
    package func answer(method: String, path: String, body: Data) -> (status: Int, body: Data) {
        do throws(EscrowError) {
            guard let route = EscrowProtocol.Path(rawValue: path), paths.contains(route) else {
                throw EscrowError(.notFound, "no such request: \(path.prefix(64))")
            }
            guard method == (route == .status ? "GET" : "POST") else {
                throw EscrowError(
                    .malformed, "\(route.rawValue) takes \(route == .status ? "GET" : "POST")")
            }
            let fields = try route == .status ? nil : EscrowProtocol.fields(body)
            let reply: [(EscrowProtocol.Tag, Data)]
            switch route {
            case .register: reply = try register(fields!)
            case .finishRegistration: reply = try finishRegistration(fields!)
            case .claim: reply = try claim(fields!)
            case .finishClaim: reply = try finishClaim(fields!)
            case .challenge: reply = try challenge(fields!)
            case .remove: reply = try remove(fields!)
            case .slot: reply = try slotStatus(fields!)
            case .witness: reply = try witness(fields!)
            case .readWitness: reply = try readWitness(fields!)
            case .status:
                reply = [
                    (.counter, Data(counter.utf8)),
                    (.slots, EscrowProtocol.integer(Int64(storage.count()))),
                ]
            }
            return (200, EscrowProtocol.message(reply))
        } catch {
            return (error.status, EscrowProtocol.message([(.message, Data(error.message.utf8))]))
        }
    }

    // MARK: - Requests

    private func register(_ fields: TLV.Fields) throws(EscrowError) -> [(EscrowProtocol.Tag, Data)]
    {
        let blinded = try fields.exactly(.blinded, OPRF.elementLength)
        let key = OPRF.newKey()
        let (evaluated, proof) = try evaluate(blinded, key)
        let slot = KeyDerivation.randomBytes(EscrowProtocol.slotIDLength)
        try state.withLock { (state) throws(EscrowError) in
            let now = now()
            state.pending = state.pending.filter { $0.value.expires > now }
            guard state.pending.count < 1024, storage.count() < maximumSlots else {
                throw EscrowError(
                    .busy, "too many slots or registrations under way: try again later")
            }
            state.pending[slot] = (key, now + EscrowProtocol.challengeLifetime)
        }
        return [
            (.slot, slot), (.evaluated, evaluated), (.publicKey, OPRF.publicKey(key)),
            (.proof, proof),
        ]
    }

    private func finishRegistration(_ fields: TLV.Fields) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        var record = SlotRecord(
            key: OPRF.newKey(),  // replaced below by the pending key
            verifier: try fields.exactly(.verifier, Signature.publicKeyLength),
            owner: try fields.exactly(.owner, Signature.publicKeyLength),
            envelope: try fields.atMost(.envelope, EscrowProtocol.maximumEnvelope),
            salt: try fields.exactly(.salt, KeyDerivation.saltLength),
            operations: try fields.integer(.operations, in: 1...64),
            memory: try fields.integer(.memory, in: 8192...(4 << 30)),
            limit: try fields.integer(.limit, in: 1...EscrowProtocol.maximumLimit), failures: 0,
            reader: fields[EscrowProtocol.Tag.reader.rawValue] == nil
                ? nil : try fields.exactly(.reader, Signature.publicKeyLength))
        try state.withLock { (state) throws(EscrowError) in
            guard let pending = state.pending.removeValue(forKey: slot), pending.expires > now()
            else { throw EscrowError(.stale, "no registration under way for this slot (expired?)") }
            record.key = pending.key
            try save(slot, record)
        }
        return []
    }

    private func claim(_ fields: TLV.Fields) throws(EscrowError) -> [(EscrowProtocol.Tag, Data)] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let blinded = try fields.exactly(.blinded, OPRF.elementLength)
        do { try OPRF.validate(blinded) } catch {  // bad input is never a claim
            throw EscrowError(.malformed, "the blinded element: \(error)")
        }
        return try state.withLock { (state) throws(EscrowError) in
            var record = try load(slot)
            let now = now()
            record.recover(at: now, policy: policy)
            guard record.failures < record.limit else {
                try destroy(slot, &state)
                throw EscrowError(
                    .destroyed,
                    "\(record.limit) claims without the right passcode: the slot is destroyed")
            }
            let notBefore = record.lastWrong + Int64(policy.delay(spent: record.failures) * 1000)
            guard notBefore <= now.milliseconds else {
                // When is told to the slot's reader only (it says how many were spent).
                throw EscrowError(.wait, "too many wrong passcodes lately: try again later")
            }
            // Counted, durably, before anything that depends on the key is computed or sent.
            let lastWrong = record.lastWrong
            record.failures += 1
            record.sinceRight += 1
            record.lastWrong = now.milliseconds
            try save(slot, record)
            let (evaluated, proof) = try evaluate(blinded, record.key)
            let challenge = KeyDerivation.randomBytes(EscrowProtocol.challengeLength)
            state.claims[slot] = (
                challenge, now + EscrowProtocol.challengeLifetime, lastWrong
            )
            return [(.evaluated, evaluated), (.proof, proof), (.challenge, challenge)]
        }
    }

    private func finishClaim(_ fields: TLV.Fields) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let challenge = try fields.exactly(.challenge, EscrowProtocol.challengeLength)
        let boxKey = try fields.exactly(.boxKey, SealedBox.publicKeyLength)
        let signature = try fields.exactly(.signature, Signature.length)
        return try state.withLock { (state) throws(EscrowError) in
            var record = try load(slot)
            // One proof per counted claim: the challenge goes whatever the proof says.
            guard let issued = state.claims.removeValue(forKey: slot), issued.expires > now(),
                constantTimeEquals(issued.challenge, challenge)
            else {
                throw EscrowError(.stale, "no claim under way with this challenge: claim again")
            }
            let proof = EscrowProtocol.claimProof(slot: slot, challenge: challenge, boxKey: boxKey)
            guard Signature.verify(signature, of: proof, publicKey: record.verifier) else {
                if record.failures >= record.limit {
                    try destroy(slot, &state)
                    throw EscrowError(
                        .destroyed,
                        "\(record.limit) claims without the right passcode: the slot is destroyed")
                }
                // The count is told to the slot's reader only (`slotStatus`).
                throw EscrowError(.authFailed, "wrong passcode")
            }
            // This claim's own count taken back; every earlier wrong one stays spent.
            record.failures = max(0, record.failures - 1)
            let wrong = max(0, record.sinceRight - 1)
            record.sinceRight = 0
            record.lastWrong = issued.lastWrong
            try save(slot, record)
            let sealed: Data
            do {
                sealed = try SealedBox.seal(SecureBytes(copying: record.envelope), to: boxKey)
            } catch {
                throw EscrowError(.malformed, "the claim's key: \(error)")
            }
            return [
                (.sealed, sealed), (.sinceRight, EscrowProtocol.integer(wrong)),
                (.lastWrong, EscrowProtocol.integer(wrong > 0 ? issued.lastWrong : 0)),
            ]
        }
    }

    private func challenge(_ fields: TLV.Fields) throws(EscrowError) -> [(EscrowProtocol.Tag, Data)]
    {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        return try state.withLock { (state) throws(EscrowError) in
            _ = try load(slot)
            let challenge = KeyDerivation.randomBytes(EscrowProtocol.challengeLength)
            let now = now()
            let live = (state.challenges[slot] ?? []).filter { $0.expires > now }.suffix(7)
            state.challenges[slot] = live + [(challenge, now + EscrowProtocol.challengeLifetime)]
            return [(.challenge, challenge)]
        }
    }

    private func remove(_ fields: TLV.Fields) throws(EscrowError) -> [(EscrowProtocol.Tag, Data)] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let challenge = try fields.exactly(.challenge, EscrowProtocol.challengeLength)
        let signature = try fields.exactly(.signature, Signature.length)
        try state.withLock { (state) throws(EscrowError) in
            let record = try load(slot)
            guard state.take(challenge, for: slot, at: now()) else {
                throw EscrowError(.stale, "no removal under way with this challenge")
            }
            let proof = EscrowProtocol.removalProof(slot: slot, challenge: challenge)
            // The owner (a key derived from the secret the slot holds), or the slot's reader
            // (its device, retiring a slot its passcode change left behind).
            guard
                Signature.verify(signature, of: proof, publicKey: record.owner)
                    || record.reader.map({
                        Signature.verify(signature, of: proof, publicKey: $0)
                    }) == true
            else {
                throw EscrowError(.authFailed, "not signed by the slot's owner or its reader")
            }
            try destroy(slot, &state)
        }
        return []
    }

    /// What a claimer needs (the salt, the cost, the slot's public key, the limit, where the
    /// count is kept), and the count itself only to the slot's reader: a signature of its key
    /// over a fresh challenge (`/v1/challenge`). Never counted.
    private func slotStatus(_ fields: TLV.Fields) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let signature =
            fields[EscrowProtocol.Tag.signature.rawValue] == nil
            ? nil : try fields.exactly(.signature, Signature.length)
        let offered =
            signature == nil ? nil : try fields.exactly(.challenge, EscrowProtocol.challengeLength)
        return try state.withLock { (state) throws(EscrowError) in
            var record = try load(slot)
            var reply: [(EscrowProtocol.Tag, Data)] = [
                (.salt, record.salt), (.operations, EscrowProtocol.integer(record.operations)),
                (.memory, EscrowProtocol.integer(record.memory)),
                (.limit, EscrowProtocol.integer(record.limit)), (.counter, Data(counter.utf8)),
                (.publicKey, OPRF.publicKey(record.key)),
            ]
            guard let signature, let offered else { return reply }
            guard let reader = record.reader,
                state.take(offered, for: slot, at: now()),
                Signature.verify(
                    signature, of: EscrowProtocol.readProof(slot: slot, challenge: offered),
                    publicKey: reader)
            else {
                throw EscrowError(.authFailed, "the count is told only to the slot's device")
            }
            let now = now()
            record.recover(at: now, policy: policy)
            let notBefore = record.lastWrong + Int64(policy.delay(spent: record.failures) * 1000)
            reply += [
                (.failures, EscrowProtocol.integer(record.failures)),
                (.sinceRight, EscrowProtocol.integer(record.sinceRight)),
                (.lastWrong, EscrowProtocol.integer(record.sinceRight > 0 ? record.lastWrong : 0)),
                (.notBefore, EscrowProtocol.integer(max(notBefore, 0))),
            ]
            return reply
        }
    }

    /// Keeps an account's latest state: the first statement under an ID names the key every
    /// later one must be signed with; a later one must order no lower than the one kept (one
    /// that orders the same replaces nothing and is answered as kept).
    private func witness(_ fields: TLV.Fields) throws(EscrowError) -> [(EscrowProtocol.Tag, Data)] {
        let id = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let offered = WitnessRecord(
            publicKey: try fields.exactly(.owner, Signature.publicKeyLength),
            statement: try fields.atMost(.statement, EscrowProtocol.maximumStatement),
            signature: try fields.exactly(.signature, Signature.length))
        guard let order = EscrowProtocol.order(of: offered.statement), order.0 <= UInt64(Int32.max)
        else {
            throw EscrowError(
                .malformed, "a statement is at least 16 bytes, its epoch at most 2³¹ − 1")
        }
        guard
            Signature.verify(
                offered.signature,
                of: EscrowProtocol.witnessProof(id: id, statement: offered.statement),
                publicKey: offered.publicKey)
        else { throw EscrowError(.authFailed, "the statement is not signed by its key") }
        try state.withLock { _ throws(EscrowError) in
            if let kept = try loadWitness(id) {
                guard constantTimeEquals(kept.publicKey, offered.publicKey) else {
                    throw EscrowError(.authFailed, "not signed by this witness's key")
                }
                let keptOrder = EscrowProtocol.order(of: kept.statement)!
                guard order >= keptOrder else {
                    throw EscrowError(.stale, "older than the state this witness keeps")
                }
                if order == keptOrder { return }
            } else if storage.count() >= maximumSlots {
                throw EscrowError(.busy, "the escrow is full: try again later")
            }
            do { try storage.save(id, offered.encoded()) } catch {
                throw EscrowError(
                    .unavailable,
                    "the escrow could not keep the statement: \(error.localizedDescription)")
            }
        }
        return []
    }

    private func readWitness(_ fields: TLV.Fields) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let id = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let kept = try state.withLock { _ throws(EscrowError) in try loadWitness(id) }
        guard let kept else { throw EscrowError(.notFound, "no statement under this ID") }
        return [
            (.owner, kept.publicKey), (.statement, kept.statement), (.signature, kept.signature),
        ]
    }

    private func loadWitness(_ id: Data) throws(EscrowError) -> WitnessRecord? {
        let bytes: Data?
        do { bytes = try storage.load(id) } catch {
            throw EscrowError(.unavailable, "the escrow's state: \(error.localizedDescription)")
        }
        guard let bytes else { return nil }
        guard let record = WitnessRecord.parse(bytes) else {
            throw EscrowError(.unavailable, "the escrow's record under this ID is not a statement")
        }
        return record
    }

    // MARK: - Slots

    private func evaluate(_ blinded: Data, _ key: SecureBytes) throws(EscrowError) -> (
        evaluated: Data, proof: Data
    ) {
        do {
            return try OPRF.evaluateWithProof(blinded, key: key, context: EscrowProtocol.context)
        } catch {
            throw EscrowError(.malformed, "the blinded element: \(error)")
        }
    }

    private func load(_ slot: Data) throws(EscrowError) -> SlotRecord {
        let bytes: Data?
        do { bytes = try storage.load(slot) } catch {
            throw EscrowError(.unavailable, "the escrow's state: \(error.localizedDescription)")
        }
        guard let bytes else { throw EscrowError(.notFound, "no such slot") }
        if bytes == SlotRecord.tombstone {
            throw EscrowError(.destroyed, "the slot is destroyed")
        }
        guard let record = SlotRecord.parse(bytes) else {
            throw EscrowError(.unavailable, "the escrow's record of this slot does not decode")
        }
        return record
    }

    private func save(_ slot: Data, _ record: SlotRecord) throws(EscrowError) {
        do { try storage.save(slot, record.encoded()) } catch {
            throw EscrowError(
                .unavailable, "the escrow could not record the count: \(error.localizedDescription)"
            )
        }
    }

    /// Erases the slot's key for good: a tombstone takes its record's place.
    private func destroy(_ slot: Data, _ state: inout Volatile) throws(EscrowError) {
        state.claims[slot] = nil
        state.challenges[slot] = nil
        do { try storage.save(slot, SlotRecord.tombstone) } catch {
            throw EscrowError(
                .unavailable, "the escrow could not destroy the slot: \(error.localizedDescription)"
            )
        }
    }
}

/// One slot as the escrow keeps it.
struct SlotRecord {
    var key: SecureBytes
    var verifier: Data
    var owner: Data
    var envelope: Data
    var salt: Data
    var operations: Int64
    var memory: Int64
    var limit: Int64
    /// Tries spent: wrong claims (and claims never finished), less those that came back.
    var failures: Int64
    /// Who may read the count (a device's reader key); nil: nobody.
    var reader: Data?
    /// Wrong claims since the last right one, and when the last one was (ms since 1970; 0: none).
    var sinceRight: Int64 = 0
    var lastWrong: Int64 = 0
    /// When a spent try last came back (ms since 1970; nil: not yet counted from).
    var recoveredAt: Int64?

    /// Gives back one spent try for each `policy.recovery` since the last came back.
    mutating func recover(at now: Date, policy: ClaimPolicy) {
        let now = now.milliseconds
        let period = Int64(policy.recovery * 1000)
        guard failures > 0, period > 0, let since = recoveredAt, now > since else {
            if failures == 0 || recoveredAt == nil { recoveredAt = now }
            return
        }
        let periods = (now - since) / period
        guard periods > 0 else { return }
        failures = max(0, failures - periods)
        recoveredAt = failures == 0 ? now : since + periods * period
    }

    static let magic = Data("KESS".utf8)
    /// What a destroyed slot's record becomes: no key.
    static let tombstone = Data("KESD".utf8)

    func encoded() -> Data {
        var record = TLV(magic: Self.magic)
        key.withUnsafeBytes {
            record.append(1, UnsafeRawBufferPointer($0).bindMemory(to: UInt8.self))
        }
        record.append(2, verifier)
        record.append(3, owner)
        record.append(4, envelope)
        record.append(5, salt)
        record.append(6, operations)
        record.append(7, memory)
        record.append(8, limit)
        record.append(9, failures)
        if let reader { record.append(10, reader) }
        record.append(11, sinceRight)
        record.append(12, lastWrong)
        if let recoveredAt { record.append(13, recoveredAt) }
        return record.bytes
    }

    static func parse(_ bytes: Data) -> SlotRecord? {
        guard let fields = try? TLV.fields(bytes, magic: magic, known: 1...13),
            let key = fields[1], key.count == OPRF.scalarLength,
            let verifier = fields[2], let owner = fields[3], let envelope = fields[4],
            let salt = fields[5], let operations = try? fields.int64(6),
            let memory = try? fields.int64(7),
            let limit = try? fields.int64(8),
            let failures = try? fields.int64(9),
            fields[10].map({ $0.count == Signature.publicKeyLength }) ?? true
        else { return nil }
        return SlotRecord(
            key: SecureBytes(copying: key), verifier: Data(verifier), owner: Data(owner),
            envelope: Data(envelope), salt: Data(salt), operations: operations, memory: memory,
            limit: limit, failures: failures, reader: fields[10].map { Data($0) },
            sinceRight: fields[11] == nil ? 0 : (try? fields.int64(11)) ?? 0,
            lastWrong: fields[12] == nil ? 0 : (try? fields.int64(12)) ?? 0,
            recoveredAt: fields[13] == nil ? nil : try? fields.int64(13))
    }
}

/// An account's latest state as a witness keeps it: the key that signs, the statement, and its
/// signature (checked before it was kept; handed out as is).
struct WitnessRecord {
    var publicKey: Data
    var statement: Data
    var signature: Data

    static let magic = Data("KESW".utf8)

    func encoded() -> Data {
        var record = TLV(magic: Self.magic)
        record.append(1, publicKey)
        record.append(2, statement)
        record.append(3, signature)
        return record.bytes
    }

    static func parse(_ bytes: Data) -> WitnessRecord? {
        guard let fields = try? TLV.fields(bytes, magic: magic, known: 1...3),
            let publicKey = fields[1], publicKey.count == Signature.publicKeyLength,
            let statement = fields[2], statement.count >= 16,
            statement.count <= EscrowProtocol.maximumStatement,
            let signature = fields[3], signature.count == Signature.length
        else { return nil }
        return WitnessRecord(
            publicKey: Data(publicKey), statement: Data(statement), signature: Data(signature))
    }
}

extension Date {
    /// Milliseconds since 1970.
    var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
}
