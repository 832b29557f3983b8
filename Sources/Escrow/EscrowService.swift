import Foundation
import Sealing
import Synchronization
import Platform

/// Where an escrow keeps its slots: one record per slot, each write durable (on disk, synced)
/// before it returns — the count of a claim is on disk before the claim is answered.
package protocol SlotStorage: Sendable {
    func load(_ slot: Data) throws -> Data?
    func save(_ slot: Data, _ record: Data) throws
    /// Forgets a record (a slot removed by its owner or retired by its caller's registrations).
    func delete(_ slot: Data) throws
    func count() -> Int
}

/// The escrow's side of `EscrowProtocol`: slots, their callers' budgets, challenges. Each request
/// is one transaction of its store (`EscrowStore`): the embedded one serializes requests under
/// one lock (each a few microseconds plus one synced write); a shared one (PostgreSQL) lets any
/// number of escrow nodes serve the same slots, each claim counted once.
package final class EscrowService: Sendable {
    /// What `status` reports the count is kept in (`file`: the escrow's own state directory).
    package var counter: String { store.counter }
    private let store: any EscrowStore
    private let maximumSlots: Int
    private let clock: EscrowClock
    private let policy: ClaimPolicy
    /// The paths it answers (a guess counter on its socket answers the slots' alone: no
    /// witness, which any caller could fill).
    private let paths: Set<EscrowProtocol.Path>
    /// Registrations, claims and witness statements a network source may make a minute, across
    /// every node of the store (nil: no limit). The budget of each account is the limit on
    /// guesses; this one keeps one source from spreading guesses over many accounts' slots, or
    /// filling the table.
    private let sourceLimit: Int?

    /// Registrations one local user may have under way at once (the oldest goes first).
    private static let pendingPerUser = 8

    /// An escrow over `store`, with at most `maximumSlots` records.
    package init(
        store: any EscrowStore, maximumSlots: Int = 100_000, policy: ClaimPolicy = .real,
        paths: Set<EscrowProtocol.Path> = Set(EscrowProtocol.Path.allCases),
        clock: EscrowClock = .system, sourceLimit: Int? = nil
    ) {
        self.store = store
        self.sourceLimit = sourceLimit
        self.policy = policy
        self.paths = paths
        self.maximumSlots = maximumSlots
        self.clock = clock
    }

    /// An escrow embedded in one process over `storage` (`LocalEscrowStore`).
    package convenience init(
        storage: any SlotStorage, counter: String, maximumSlots: Int = 100_000,
        policy: ClaimPolicy = .real,
        paths: Set<EscrowProtocol.Path> = Set(EscrowProtocol.Path.allCases),
        clock: EscrowClock = .system, sourceLimit: Int? = nil
    ) {
        self.init(
            store: LocalEscrowStore(storage: storage, counter: counter),
            maximumSlots: maximumSlots, policy: policy, paths: paths, clock: clock,
            sourceLimit: sourceLimit)
    }

    /// Answers one request from `caller` (over the network, from `source`: its address): the
    /// HTTP status and body. Never throws; every failure is an answer that names it (without
    /// anything secret: the escrow holds nothing a message may echo).
    package func answer(
        method: String, path: String, body: Data, caller: EscrowCaller = .network,
        source: String? = nil
    ) -> (status: Int, body: Data) {
        do throws(EscrowError) {
            guard let route = EscrowProtocol.Path(rawValue: path), paths.contains(route) else {
                throw EscrowError(.notFound, "no such request: \(path.prefix(64))")
            }
            guard method == (route == .status ? "GET" : "POST") else {
                throw EscrowError(
                    .malformed, "\(route.rawValue) takes \(route == .status ? "GET" : "POST")")
            }
            let fields = try route == .status ? nil : EscrowProtocol.fields(body)
            // A first witness statement writes a row as a registration does: charged alike.
            if let sourceLimit, let source, [.claim, .register, .witness].contains(route) {
                let window = clock.wall().milliseconds / 60_000
                guard try store.charge(source: source, window: window, limit: sourceLimit) else {
                    throw EscrowError(
                        .wait,
                        "more than \(sourceLimit) registrations and claims this minute from this address: try again after \(EscrowProtocol.time(Date(timeIntervalSince1970: Double((window + 1) * 60))))"
                    )
                }
            }
            let reply: [(EscrowProtocol.Tag, Data)]
            switch route {
            case .register: reply = try register(fields!, caller)
            case .finishRegistration: reply = try finishRegistration(fields!, caller)
            case .claim: reply = try claim(fields!, caller)
            case .finishClaim: reply = try finishClaim(fields!, caller)
            case .acknowledge: reply = try acknowledge(fields!, caller)
            case .challenge: reply = try challenge(fields!, caller)
            case .remove: reply = try remove(fields!, caller)
            case .slot: reply = try slotStatus(fields!, caller)
            case .witness: reply = try witness(fields!)
            case .readWitness: reply = try readWitness(fields!)
            case .status:
                reply = [
                    (.counter, Data(counter.utf8)),
                    (.slots, EscrowProtocol.integer(Int64(store.count()))),
                ]
            }
            return (200, EscrowProtocol.message(reply))
        } catch {
            return (error.status, EscrowProtocol.message([(.message, Data(error.message.utf8))]))
        }
    }

    // MARK: - Requests

    private func register(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let blinded = try fields.exactly(.blinded, OPRF.elementLength)
        let key = OPRF.newKey()
        let (evaluated, proof) = try evaluate(blinded, key)
        let slot = KeyDerivation.randomBytes(EscrowProtocol.slotIDLength)
        let budget: Data? =
            if case .user(let uid) = caller { CallerBudget.id(user: uid) } else { nil }
        try store.transaction { (state) throws(EscrowError) in
            let now = clock.wall()
            if let budget {
                // One user's registrations in a loop void its own oldest, nobody else's.
                let own = try state.registrations(of: budget, at: now)
                for oldest in own.prefix(max(0, own.count - Self.pendingPerUser + 1)) {
                    var session = try state.session(oldest.slot)
                    session.pending = nil
                    try state.setSession(oldest.slot, session)
                }
            }
            guard try state.registrations(of: nil, at: now).count < 1024,
                store.count() < maximumSlots
            else {
                throw EscrowError(
                    .busy, "too many slots or registrations under way: try again later")
            }
            var session = try state.session(slot)
            session.pending = (key, now + EscrowProtocol.challengeLifetime, budget)
            try state.setSession(slot, session)
        }
        return [
            (.slot, slot), (.evaluated, evaluated), (.publicKey, OPRF.publicKey(key)),
            (.proof, proof),
        ]
    }

    private func finishRegistration(_ fields: TLV.Fields, _ caller: EscrowCaller)
        throws(EscrowError) -> [(EscrowProtocol.Tag, Data)]
    {
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
        // The slot this one succeeds: named with its reader's signature (the account's escrow),
        // or with the report of a right claim on it (a device's passcode change or re-pin).
        let predecessor =
            fields[EscrowProtocol.Tag.inherit.rawValue] == nil
            ? nil : try fields.exactly(.inherit, EscrowProtocol.slotIDLength)
        var inherit: (slot: Data, signature: Data)?
        if let predecessor, fields[EscrowProtocol.Tag.inheritSignature.rawValue] != nil {
            inherit = (predecessor, try fields.exactly(.inheritSignature, Signature.length))
        }
        let successionReport =
            fields[EscrowProtocol.Tag.report.rawValue] == nil
            ? nil : try fields.exactly(.report, EscrowProtocol.challengeLength)
        try store.transaction { (state) throws(EscrowError) in
            var session = try state.session(slot)
            let pending = session.pending
            session.pending = nil
            try state.setSession(slot, session)
            guard let pending, pending.expires > clock.wall() else {
                throw EscrowError(.stale, "no registration under way for this slot (expired?)")
            }
            if case .user(let uid) = caller, pending.budget != CallerBudget.id(user: uid) {
                throw EscrowError(.stale, "no registration under way for this slot (expired?)")
            }
            record.key = pending.key
            // A local user's slot is in its user's budget, whatever it names.
            let budgetID: Data
            if let own = pending.budget {
                budgetID = own
            } else {
                budgetID = try budget(joining: inherit, slot: slot, state)
            }
            record.budget = budgetID
            // A new slot's own budget starts now; one it joins (an earlier slot's) must be there.
            var budget = try loadBudget(
                budgetID, state, named: pending.budget == nil && inherit != nil)
            budget.touch(slot)
            if let predecessor, budget.slots.contains(predecessor) {
                if inherit != nil, caller == .network {
                    // Signed by its reader (checked): an account's device. Never on the socket,
                    // where any process of the user derives the reader key from the record.
                    budget.successors[predecessor] = slot
                } else if let successionReport,
                    let report = try state.session(predecessor).report,
                    report.expires > clock.wall(),
                    constantTimeEquals(report.token, successionReport)
                {
                    budget.successors[predecessor] = slot
                }
            }
            // Past the most live slots a caller keeps, its own least recently used goes.
            while budget.slots.count > CallerBudget.maximumSlots {
                let retired = budget.slots[0]
                budget.drop(retired)
                try delete(retired, state)
            }
            // The budget first: a slot is never kept naming a budget that is not there.
            try state.save(budgetID, budget.encoded())
            try state.save(slot, record.encoded())
        }
        return []
    }

    /// The budget a network registration joins: an earlier slot's, when the registration is
    /// signed by that slot's reader key (an account's device re-registering after a rotation);
    /// else a budget of its own.
    private func budget(
        joining inherit: (slot: Data, signature: Data)?, slot: Data,
        _ state: any EscrowTransaction
    ) throws(EscrowError) -> Data {
        guard let inherit else { return CallerBudget.id(slot: slot) }
        let earlier = try load(inherit.slot, for: .network, state)
        guard let reader = earlier.reader,
            Signature.verify(
                inherit.signature,
                of: EscrowProtocol.inheritProof(slot: slot, from: inherit.slot), publicKey: reader)
        else {
            throw EscrowError(.authFailed, "the earlier slot's budget is joined only by its reader")
        }
        return earlier.budget ?? CallerBudget.id(slot: inherit.slot)
    }

    private func claim(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let blinded = try fields.exactly(.blinded, OPRF.elementLength)
        do { try OPRF.validate(blinded) } catch {  // bad input is never a claim
            throw EscrowError(.malformed, "the blinded element: \(error)")
        }
        return try store.transaction { (state) throws(EscrowError) in
            let record = try load(slot, for: caller, state)
            let budgetID = record.budget!
            var budget = try loadBudget(budgetID, state, named: true)
            let (wall, boot) = (clock.wall(), clock.boot())
            if budget.carry(into: boot, wall: wall) { try state.save(budgetID, budget.encoded()) }
            guard budget.spent < record.limit else {
                try exhaust(budgetID, budget, slot, state, caller: caller)
                throw EscrowError(
                    .destroyed,
                    "\(record.limit) claims without the right passcode: the slot is destroyed")
            }
            if let until = budget.notBefore(policy, wall: wall, boot: boot) {
                throw EscrowError(
                    .wait,
                    "too many wrong passcodes lately: the next claim is taken after \(EscrowProtocol.time(until))"
                )
            }
            // Counted, durably, before anything that depends on the key is computed or sent.
            let before = budget
            budget.countWrong(on: slot, at: wall, boot: boot)
            budget.touch(slot)
            try state.save(budgetID, budget.encoded())
            let (evaluated, proof) = try evaluate(blinded, record.key)
            let challenge = KeyDerivation.randomBytes(EscrowProtocol.challengeLength)
            var session = try state.session(slot)
            session.claim = (challenge, wall + EscrowProtocol.challengeLifetime, before)
            try state.setSession(slot, session)
            return [(.evaluated, evaluated), (.proof, proof), (.challenge, challenge)]
        }
    }

    private func finishClaim(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError)
        -> [(EscrowProtocol.Tag, Data)]
    {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let challenge = try fields.exactly(.challenge, EscrowProtocol.challengeLength)
        let boxKey = try fields.exactly(.boxKey, SealedBox.publicKeyLength)
        let signature = try fields.exactly(.signature, Signature.length)
        return try store.transaction { (state) throws(EscrowError) in
            let record = try load(slot, for: caller, state)
            let budgetID = record.budget!
            var budget = try loadBudget(budgetID, state, named: true)
            // One proof per counted claim: the challenge goes whatever the proof says (a refusal
            // commits what its transaction changed: `EscrowStore.transaction`).
            var session = try state.session(slot)
            let issued = session.claim
            session.claim = nil
            try state.setSession(slot, session)
            guard let issued, issued.expires > clock.wall(),
                constantTimeEquals(issued.challenge, challenge)
            else {
                throw EscrowError(.stale, "no claim under way with this challenge: claim again")
            }
            let proof = EscrowProtocol.claimProof(slot: slot, challenge: challenge, boxKey: boxKey)
            guard Signature.verify(signature, of: proof, publicKey: record.verifier) else {
                if budget.spent >= record.limit {
                    try exhaust(budgetID, budget, slot, state, caller: caller)
                    throw EscrowError(
                        .destroyed,
                        "\(record.limit) claims without the right passcode: the slot is destroyed")
                }
                // The count is told to the slot's reader only (`slotStatus`).
                throw EscrowError(.authFailed, "wrong passcode")
            }
            // This claim's own count taken back; the wrong ones before it stay spent until the
            // report that shows them is acknowledged.
            budget.giveBack(1, on: slot)
            if budget.spent == issued.before.spent { budget.times = issued.before.times }
            try state.save(budgetID, budget.encoded())
            // What the report shows: this slot's wrong claims (and those of the slots it
            // succeeded), never another slot's.
            let shown = budget.attributed[slot] ?? 0
            let sealed: Data
            do {
                sealed = try SealedBox.seal(SecureBytes(copying: record.envelope), to: boxKey)
            } catch {
                throw EscrowError(.malformed, "the claim's key: \(error)")
            }
            let token = KeyDerivation.randomBytes(EscrowProtocol.challengeLength)
            session.report = (token, shown, clock.wall() + EscrowProtocol.challengeLifetime)
            try state.setSession(slot, session)
            return [
                (.sealed, sealed), (.sinceRight, EscrowProtocol.integer(shown)),
                (.lastWrong, EscrowProtocol.integer(shown > 0 ? budget.lastWrong : 0)),
                (.firstWrong, EscrowProtocol.integer(shown > 0 ? budget.firstWrong : 0)),
                (.report, token),
            ]
        }
    }

    /// The claimer of a right claim showed its report to the owner: the tries it showed come
    /// back (those spent since stay spent).
    private func acknowledge(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError)
        -> [(EscrowProtocol.Tag, Data)]
    {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let token = try fields.exactly(.report, EscrowProtocol.challengeLength)
        try store.transaction { (state) throws(EscrowError) in
            let record = try load(slot, for: caller, state)
            var session = try state.session(slot)
            guard let report = session.report, report.expires > clock.wall(),
                constantTimeEquals(report.token, token)
            else { throw EscrowError(.stale, "no report under way with this token") }
            session.report = nil
            try state.setSession(slot, session)
            var budget = try loadBudget(record.budget!, state, named: true)
            budget.giveBack(report.shown, on: slot)
            try state.save(record.budget!, budget.encoded())
        }
        return []
    }

    private func challenge(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        return try store.transaction { (state) throws(EscrowError) in
            _ = try load(slot, for: caller, state)
            let challenge = KeyDerivation.randomBytes(EscrowProtocol.challengeLength)
            let now = clock.wall()
            var session = try state.session(slot)
            session.challenges =
                session.challenges.filter { $0.expires > now }.suffix(7)
                + [(challenge, now + EscrowProtocol.challengeLifetime)]
            try state.setSession(slot, session)
            return [(.challenge, challenge)]
        }
    }

    private func remove(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let challenge = try fields.exactly(.challenge, EscrowProtocol.challengeLength)
        let signature = try fields.exactly(.signature, Signature.length)
        try store.transaction { (state) throws(EscrowError) in
            let record = try load(slot, for: caller, state)
            guard try take(challenge, for: slot, state) else {
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
            // Its budget keeps what was spent: a removal gives nothing back.
            var budget = try loadBudget(record.budget!, state, named: true)
            budget.drop(slot)
            try state.save(record.budget!, budget.encoded())
            try delete(slot, state)
        }
        return []
    }

    /// What a claimer needs (the salt, the cost, the slot's public key, the limit, where the
    /// count is kept), and the count itself only to the slot's reader: a signature of its key
    /// over a fresh challenge (`/v1/challenge`). Never counted. The count is the slot's budget's:
    /// every wrong claim of its caller, on whichever slot.
    private func slotStatus(_ fields: TLV.Fields, _ caller: EscrowCaller) throws(EscrowError)
        -> [(EscrowProtocol.Tag, Data)]
    {
        let slot = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let signature =
            fields[EscrowProtocol.Tag.signature.rawValue] == nil
            ? nil : try fields.exactly(.signature, Signature.length)
        let offered =
            signature == nil ? nil : try fields.exactly(.challenge, EscrowProtocol.challengeLength)
        return try store.transaction { (state) throws(EscrowError) in
            let record = try load(slot, for: caller, state)
            var reply: [(EscrowProtocol.Tag, Data)] = [
                (.salt, record.salt), (.operations, EscrowProtocol.integer(record.operations)),
                (.memory, EscrowProtocol.integer(record.memory)),
                (.limit, EscrowProtocol.integer(record.limit)), (.counter, Data(counter.utf8)),
                (.publicKey, OPRF.publicKey(record.key)),
            ]
            guard let signature, let offered else { return reply }
            guard let reader = record.reader,
                try take(offered, for: slot, state),
                Signature.verify(
                    signature, of: EscrowProtocol.readProof(slot: slot, challenge: offered),
                    publicKey: reader)
            else {
                throw EscrowError(.authFailed, "the count is told only to the slot's device")
            }
            var budget = try loadBudget(record.budget!, state, named: true)
            let (wall, boot) = (clock.wall(), clock.boot())
            if budget.carry(into: boot, wall: wall) {
                try state.save(record.budget!, budget.encoded())
            }
            let notBefore = budget.notBefore(policy, wall: wall, boot: boot)
            reply += [
                (.failures, EscrowProtocol.integer(min(budget.spent, record.limit))),
                (.sinceRight, EscrowProtocol.integer(budget.attributed[slot] ?? 0)),
                (.lastWrong, EscrowProtocol.integer(budget.lastWrong)),
                (.firstWrong, EscrowProtocol.integer(budget.firstWrong)),
                (.notBefore, EscrowProtocol.integer(notBefore?.milliseconds ?? 0)),
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
        try store.transaction { (state) throws(EscrowError) in
            if let kept = try loadWitness(id, state) {
                guard constantTimeEquals(kept.publicKey, offered.publicKey) else {
                    throw EscrowError(.authFailed, "not signed by this witness's key")
                }
                let keptOrder = EscrowProtocol.order(of: kept.statement)!
                guard order >= keptOrder else {
                    throw EscrowError(.stale, "older than the state this witness keeps")
                }
                if order == keptOrder { return }
            } else if store.count() >= maximumSlots {
                throw EscrowError(.busy, "the escrow is full: try again later")
            }
            try state.save(id, offered.encoded())
        }
        return []
    }

    private func readWitness(_ fields: TLV.Fields) throws(EscrowError) -> [(
        EscrowProtocol.Tag, Data
    )] {
        let id = try fields.exactly(.slot, EscrowProtocol.slotIDLength)
        let kept = try store.transaction { (state) throws(EscrowError) in
            try loadWitness(id, state)
        }
        guard let kept else { throw EscrowError(.notFound, "no statement under this ID") }
        return [
            (.owner, kept.publicKey), (.statement, kept.statement), (.signature, kept.signature),
        ]
    }

    private func loadWitness(_ id: Data, _ state: any EscrowTransaction) throws(EscrowError)
        -> WitnessRecord?
    {
        guard let bytes = try state.load(id) else { return nil }
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

    /// The slot's record, with the budget it answers to: a local user's slot only to its own
    /// user (another is told there is no such slot); a slot from before budgets joins its
    /// caller's budget (a local user's) or one of its own, with what it had spent.
    private func load(_ slot: Data, for caller: EscrowCaller, _ state: any EscrowTransaction)
        throws(EscrowError) -> SlotRecord
    {
        let bytes = try state.load(slot)
        guard let bytes, !bytes.starts(with: CallerBudget.magic) else {
            // A local user's slot destroyed at its budget's limit leaves no record: its budget
            // names it.
            if bytes == nil, case .user(let uid) = caller,
                try loadBudget(CallerBudget.id(user: uid), state).destroyed.contains(slot)
            {
                throw EscrowError(.destroyed, "the slot is destroyed")
            }
            throw EscrowError(.notFound, "no such slot")
        }
        if bytes == SlotRecord.tombstone {
            throw EscrowError(.destroyed, "the slot is destroyed")
        }
        guard var record = SlotRecord.parse(bytes) else {
            throw EscrowError(.unavailable, "the escrow's record of this slot does not decode")
        }
        if case .user(let uid) = caller, let budget = record.budget,
            budget != CallerBudget.id(user: uid)
        {
            throw EscrowError(.notFound, "no such slot")
        }
        if record.budget == nil {
            let id: Data
            if case .user(let uid) = caller {
                id = CallerBudget.id(user: uid)
            } else {
                id = CallerBudget.id(slot: slot)
            }
            var budget = try loadBudget(id, state)
            budget.spent += record.failures
            if record.failures > 0 { budget.attributed[slot, default: 0] += record.failures }
            budget.touch(slot)
            record.budget = id
            record.failures = 0
            try state.save(id, budget.encoded())
            try state.save(slot, record.encoded())
        }
        return record
    }

    /// The budget `id`; a new one when there is none — unless a slot `named` it: then its record
    /// went missing (deleted behind the escrow, or not answered by its store), and the request is
    /// refused rather than started again from nothing.
    private func loadBudget(_ id: Data, _ state: any EscrowTransaction, named: Bool = false)
        throws(EscrowError) -> CallerBudget
    {
        guard let bytes = try state.load(id) else {
            guard !named else {
                throw EscrowError(
                    .unavailable,
                    "the count of this slot's caller is missing from the escrow's state: refused, so no count starts again"
                )
            }
            return CallerBudget()
        }
        guard let budget = CallerBudget.parse(bytes) else {
            throw EscrowError(
                .unavailable, "the escrow's record of a caller's count does not decode")
        }
        return budget
    }

    /// Takes `offered` from `slot`'s outstanding challenges when it is one of them.
    private func take(_ offered: Data, for slot: Data, _ state: any EscrowTransaction)
        throws(EscrowError) -> Bool
    {
        var session = try state.session(slot)
        guard session.take(offered, at: clock.wall()) else { return false }
        try state.setSession(slot, session)
        return true
    }

    private func delete(_ slot: Data, _ state: any EscrowTransaction) throws(EscrowError) {
        try state.setSession(slot, SlotSession())
        try state.delete(slot)
    }

    /// The budget is spent: every slot it lists (and `slot`) is destroyed for good — a tombstone
    /// takes each record's place — and the budget starts again, as nothing it guarded is left.
    /// A local user's budget lists the slots it destroyed (the newest 32) in place of a
    /// tombstone each: a user's loop of exhausted slots never grows the table.
    private func exhaust(
        _ id: Data, _ budget: CallerBudget, _ slot: Data, _ state: any EscrowTransaction,
        caller: EscrowCaller
    ) throws(EscrowError) {
        var next = CallerBudget()
        for destroyed in Set(budget.slots + [slot]).sorted(by: { $0.lexicographicallyPrecedes($1) })
        {
            try state.setSession(destroyed, SlotSession())
            if case .user = caller {
                try state.delete(destroyed)
                next.destroyed.append(destroyed)
            } else {
                try state.save(destroyed, SlotRecord.tombstone)
            }
        }
        next.destroyed = Array((budget.destroyed + next.destroyed).suffix(32))
        try state.save(id, next.encoded())
    }
}
