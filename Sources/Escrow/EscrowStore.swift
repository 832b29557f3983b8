import Foundation
import Platform
import Sealing
import Synchronization

/// Where an escrow keeps its state, and how a request changes it: whole, or not at all.
///
/// Two kinds of state: records (slots, callers' budgets, witnesses), each durable before a
/// request that changed it is answered; and each slot's session (a registration or a claim under
/// way, a report, challenges), which lives minutes. The embedded store (`LocalEscrowStore`, one
/// process over a `SlotStorage`) keeps sessions in memory and serializes requests under one lock;
/// a shared store (PostgreSQL: `keepsake-escrow --store postgresql://…`) keeps both in the
/// database, so any number of escrow nodes serve the same slots and count each claim once.
package protocol EscrowStore: Sendable {
    /// What `status` reports the count is kept in (`file`, the TPM's kind, `postgresql`).
    var counter: String { get }
    /// Runs `body` as one transaction over the escrow's state: what it reads and changes applies
    /// whole, after every transaction it saw, or not at all, whichever node runs it. A store whose
    /// transactions can conflict runs `body` again (so `body` acts on nothing but `transaction`).
    /// A refusal `body` throws is an answer, not a failure: what it changed first (a challenge
    /// taken, a slot destroyed) is committed, and the refusal thrown on; a failure of the store
    /// itself changes nothing.
    func transaction<R>(_ body: (any EscrowTransaction) throws(EscrowError) -> R)
        throws(EscrowError) -> R
    /// How many records the store holds (slots, budgets, witnesses): for `status` and the cap
    /// on new slots. A shared store may answer an estimate.
    func count() -> Int
    /// Charges one request to `source` (a network caller's address) in the minute `window`:
    /// whether it is within `limit` requests that minute — kept where every node sees it.
    func charge(source: String, window: Int64, limit: Int) throws(EscrowError) -> Bool
}

/// One transaction of an `EscrowStore`.
package protocol EscrowTransaction {
    func load(_ id: Data) throws(EscrowError) -> Data?
    func save(_ id: Data, _ record: Data) throws(EscrowError)
    /// Forgets a record (a slot removed by its owner or retired by its caller's registrations).
    func delete(_ id: Data) throws(EscrowError)
    /// The session of slot `id` (empty when none).
    func session(_ id: Data) throws(EscrowError) -> SlotSession
    /// Replaces the session of slot `id` (an empty one is forgotten).
    func setSession(_ id: Data, _ session: SlotSession) throws(EscrowError)
    /// The registrations under way that have not expired at `now`: every one (`budget` nil), or
    /// those of one local user's budget; the oldest first.
    func registrations(of budget: Data?, at now: Date) throws(EscrowError) -> [(
        slot: Data, expires: Date
    )]
}

/// What a slot has under way: minutes of state, which a restart of the embedded store loses (at
/// the cost of a retry, never of a count).
package struct SlotSession: Sendable {
    /// A registration under way: the slot's OPRF key, and the budget of the local user who asked
    /// (nil over the network, where the budget is named at the finish).
    var pending: (key: SecureBytes, expires: Date, budget: Data?)?
    /// A claim's challenge, and its budget as it was before the claim was counted (what a right
    /// proof puts back, unless other claims were counted meanwhile).
    var claim: (challenge: Data, expires: Date, before: CallerBudget)?
    /// A right claim's report, until its claimer acknowledges it: the token and how many wrong
    /// claims it showed.
    var report: (token: Data, shown: Int64, expires: Date)?
    /// Challenges for a removal or for reading the count: several at once (the newest 8), each
    /// taken once, so a caller asking for challenges in a loop cannot void the device's own.
    var challenges: [(challenge: Data, expires: Date)] = []

    package init() {}

    /// Whether nothing is under way (a store forgets such a session).
    package var isEmpty: Bool {
        pending == nil && claim == nil && report == nil && challenges.isEmpty
    }

    /// The registration under way, as a shared store indexes it: when it expires, and the local
    /// user's budget it is for (nil over the network).
    package var pendingRegistration: (expires: Date, budget: Data?)? {
        pending.map { ($0.expires, $0.budget) }
    }

    /// When the last of it expires (what a shared store may forget it after).
    package var expiry: Date {
        ([pending?.expires, claim?.expires, report?.expires] + challenges.map(\.expires))
            .compactMap { $0 }.max() ?? .distantPast
    }

    /// Takes `offered` from the outstanding challenges when it is one of them.
    mutating func take(_ offered: Data, at now: Date) -> Bool {
        guard
            let index = challenges.firstIndex(where: {
                $0.expires > now && constantTimeEquals($0.challenge, offered)
            })
        else { return false }
        challenges.remove(at: index)
        return true
    }

    private static let magic = Data("KESN".utf8)

    /// The session as bytes (a shared store seals them: the pending key is a slot's secret).
    package func encoded() -> Data {
        var record = TLV(magic: Self.magic)
        if let pending {
            pending.key.withUnsafeBytes {
                record.append(1, UnsafeRawBufferPointer($0).bindMemory(to: UInt8.self))
            }
            record.append(2, pending.expires.milliseconds)
            if let budget = pending.budget { record.append(3, budget) }
        }
        if let claim {
            record.append(4, claim.challenge)
            record.append(5, claim.expires.milliseconds)
            record.append(6, claim.before.encoded())
        }
        if let report {
            record.append(7, report.token)
            record.append(8, report.shown)
            record.append(9, report.expires.milliseconds)
        }
        if !challenges.isEmpty {
            record.append(
                10,
                challenges.reduce(Data()) {
                    $0 + $1.challenge + Self.bytes($1.expires.milliseconds)
                })
        }
        return record.bytes
    }

    /// The session `bytes` encode, or nil when they do not.
    package static func parse(_ bytes: Data) -> SlotSession? {
        guard let fields = try? TLV.fields(bytes, magic: magic, known: 1...10) else { return nil }
        var session = SlotSession()
        func date(_ tag: UInt8) -> Date? {
            (try? fields.int64(tag)).map { Date(timeIntervalSince1970: Double($0) / 1000) }
        }
        if let key = fields[1], key.count == OPRF.scalarLength, let expires = date(2) {
            session.pending = (SecureBytes(copying: key), expires, fields[3].map { Data($0) })
        }
        if let challenge = fields[4], let expires = date(5),
            let before = fields[6].flatMap({ CallerBudget.parse(Data($0)) })
        {
            session.claim = (Data(challenge), expires, before)
        }
        if let token = fields[7], let shown = try? fields.int64(8), let expires = date(9) {
            session.report = (Data(token), shown, expires)
        }
        let entry = EscrowProtocol.challengeLength + 8
        if let all = fields[10].map({ Data($0) }), all.count % entry == 0 {
            for start in stride(from: 0, to: all.count, by: entry) {
                let value = all[start..<start + entry]
                let milliseconds = value.suffix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
                session.challenges.append(
                    (
                        Data(value.prefix(EscrowProtocol.challengeLength)),
                        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
                    ))
            }
        }
        return session
    }

    private static func bytes(_ value: Int64) -> Data {
        Data((0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) })
    }
}

/// The embedded store: one escrow process over its `SlotStorage` (a state directory, under a
/// TPM or not), requests serialized under one lock, sessions in memory.
package final class LocalEscrowStore: EscrowStore {
    package let counter: String
    private let storage: any SlotStorage
    private let sessions = Mutex<[Data: SlotSession]>([:])
    /// Each source's requests in its current minute (the oldest sources go past 4,096).
    private let sources = Mutex<[String: (window: Int64, count: Int)]>([:])

    package init(storage: any SlotStorage, counter: String) {
        self.storage = storage
        self.counter = counter
    }

    package func count() -> Int { storage.count() }

    package func charge(source: String, window: Int64, limit: Int) -> Bool {
        sources.withLock { sources in
            if sources.count > 4096 { sources = sources.filter { $0.value.window == window } }
            var entry = sources[source] ?? (window, 0)
            if entry.window != window { entry = (window, 0) }
            entry.count += 1
            sources[source] = entry
            return entry.count <= limit
        }
    }

    package func transaction<R>(_ body: (any EscrowTransaction) throws(EscrowError) -> R)
        throws(EscrowError) -> R
    {
        try sessions.withLock { (sessions) throws(EscrowError) -> R in
            let transaction = Transaction(storage: storage, sessions: sessions)
            // Kept whatever `body` says: a refusal commits what it changed (each storage write
            // is durable as it is made).
            defer { sessions = transaction.sessions }
            return try body(transaction)
        }
    }

    /// One transaction: the storage's writes are each durable as they are made (one request's
    /// few writes, under the lock); the sessions it changed are kept when it ends.
    private final class Transaction: EscrowTransaction {
        let storage: any SlotStorage
        var sessions: [Data: SlotSession]

        init(storage: any SlotStorage, sessions: [Data: SlotSession]) {
            self.storage = storage
            self.sessions = sessions
        }

        func load(_ id: Data) throws(EscrowError) -> Data? {
            do { return try storage.load(id) } catch {
                throw EscrowError(
                    .unavailable, "the escrow's state: \(error.localizedDescription)")
            }
        }

        func save(_ id: Data, _ record: Data) throws(EscrowError) {
            do { try storage.save(id, record) } catch {
                throw EscrowError(
                    .unavailable,
                    "the escrow could not record its state: \(error.localizedDescription)")
            }
        }

        func delete(_ id: Data) throws(EscrowError) {
            do { try storage.delete(id) } catch {
                throw EscrowError(
                    .unavailable,
                    "the escrow could not remove a record: \(error.localizedDescription)")
            }
        }

        func session(_ id: Data) -> SlotSession { sessions[id] ?? SlotSession() }

        func setSession(_ id: Data, _ session: SlotSession) {
            sessions[id] = session.isEmpty ? nil : session
        }

        func registrations(of budget: Data?, at now: Date) -> [(slot: Data, expires: Date)] {
            // Expired sessions go as they are met here (a registration's is the one that grows).
            sessions = sessions.filter { $0.value.expiry > now }
            return sessions.compactMap { slot, session in
                guard let pending = session.pending, pending.expires > now,
                    budget == nil || pending.budget == budget
                else { return nil }
                return (slot, pending.expires)
            }.sorted { $0.expires < $1.expires }
        }
    }
}
