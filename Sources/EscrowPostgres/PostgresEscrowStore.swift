import Escrow
import Foundation
import Platform
import Sealing
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The escrow's shared store: its records and sessions as rows of a PostgreSQL database, so that
/// any number of stateless escrow nodes (`keepsake-escrow --store postgresql://…`) serve the same
/// slots.
///
/// - **One count per claim, whichever node.** Every request is one `SERIALIZABLE` transaction:
///   two nodes counting claims on one budget at once conflict, one of them runs its request
///   again on what the other committed (`EscrowStore.transaction`), so each claim is counted
///   once and no claim is answered before its count is committed — with a synchronous standby,
///   committed on the standby too.
/// - **Failover.** A `postgresql://` URI naming the primary and its standby with
///   `target_session_attrs=read-write` reaches whichever is primary; a request whose connection
///   went before its commit runs again there (nothing of it was committed); one whose commit was
///   cut short is answered as failed (it may be counted: never answered and not counted twice).
/// - **Nothing a database operator reads.** Every row's value is sealed (XChaCha20-Poly1305)
///   under the service key, which the database never holds, bound to its table and ID (a row
///   moved to another ID does not open). The database holds the IDs, sizes and expiry times.
///   Someone who writes the database can put an older row back (a count goes back): the
///   database's operator is trusted for the counts, as a file store's administrator is without a
///   TPM (SECURITY.md).
package final class PostgresEscrowStore: EscrowStore {
    package let counter = "postgresql"
    private let conninfo: String
    private let serviceKey: SecureBytes
    /// Connections not in use.
    private let idle = Mutex<[PostgresConnection]>([])
    /// The record count and when it was taken (a `count(*)` over a million rows takes a moment:
    /// taken again at most every 10 s).
    private let counted = Mutex<(count: Int, at: Date)>((0, .distantPast))
    /// How long a request keeps trying to reach a primary (a failover's promotion).
    private let patience: TimeInterval

    /// The escrow's tables (made when missing).
    static let schema = [
        """
        CREATE TABLE IF NOT EXISTS keepsake_escrow_records (
            id bytea PRIMARY KEY, sealed bytea NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS keepsake_escrow_sessions (
            id bytea PRIMARY KEY, sealed bytea NOT NULL, expires bigint NOT NULL,
            pending_expires bigint, pending_budget bytea)
        """,
        """
        CREATE INDEX IF NOT EXISTS keepsake_escrow_sessions_pending
            ON keepsake_escrow_sessions (pending_expires) WHERE pending_expires IS NOT NULL
        """,
        """
        CREATE INDEX IF NOT EXISTS keepsake_escrow_sessions_expires
            ON keepsake_escrow_sessions (expires)
        """,
        """
        CREATE TABLE IF NOT EXISTS keepsake_escrow_meta (name text PRIMARY KEY, value bytea NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS keepsake_escrow_sources (
            source bytea PRIMARY KEY, minute bigint NOT NULL, requests integer NOT NULL)
        """,
        """
        CREATE INDEX IF NOT EXISTS keepsake_escrow_sources_minute
            ON keepsake_escrow_sources (minute)
        """,
    ]

    /// The store at `conninfo`, its rows sealed under `serviceKey` (32 bytes). Makes the tables
    /// when missing; refuses a database whose rows were sealed under another key.
    package init(_ conninfo: String, serviceKey: SecureBytes, patience: TimeInterval = 60)
        throws(EscrowError)
    {
        guard serviceKey.count == Envelope.keyLength else {
            throw EscrowError(.malformed, "the service key is \(Envelope.keyLength) bytes")
        }
        self.conninfo = conninfo
        self.serviceKey = serviceKey
        self.patience = patience
        let check = KeyDerivation.keyedHash(key: serviceKey, context: "keepsake-escrow pg key")
            .unsafeData()
        try transactionOnce(retrying: true) { (connection) throws(PostgresError) in
            // One node at a time makes the tables (CREATE … IF NOT EXISTS races another).
            try connection.execute("SELECT pg_advisory_xact_lock(7007)")
            for statement in Self.schema { try connection.execute(statement) }
            try connection.execute(
                "INSERT INTO keepsake_escrow_meta (name, value) VALUES ('key-check', $1) ON CONFLICT DO NOTHING",
                [.bytes(check)])
            let kept = try connection.execute(
                "SELECT value FROM keepsake_escrow_meta WHERE name = 'key-check'")
            guard let stored = kept.first?[0] ?? nil, constantTimeEquals(stored, check) else {
                throw PostgresError(
                    .statement,
                    "the database's escrow rows are sealed under another service key: start with that key (--service-key), or on another database"
                )
            }
        }
    }

    package func count() -> Int {
        let (known, at) = counted.withLock { $0 }
        if Date().timeIntervalSince(at) < 10 { return known }
        let fresh =
            try? transactionOnce(retrying: false) { (connection) throws(PostgresError) in
                PostgresConnection.integer(
                    try connection.execute("SELECT count(*) FROM keepsake_escrow_records")
                        .first?[0] ?? nil) ?? 0
            }
        let count = fresh.map(Int.init) ?? known
        counted.withLock { $0 = (count, Date()) }
        return count
    }

    /// One request more for `source` (kept as a keyed hash under the service key: a dump lists no
    /// address) in `window`, in a transaction of its own.
    package func charge(source: String, window: Int64, limit: Int) throws(EscrowError) -> Bool {
        let id = KeyDerivation.keyedHash(
            key: serviceKey, context: "keepsake-escrow source", Data(source.utf8)
        ).unsafeData().prefix(16)
        let count = try transactionOnce(retrying: true) { (connection) throws(PostgresError) in
            // Sources of minutes past go now and then (one request in 256 sweeps them).
            if Int.random(in: 0..<256) == 0 {
                try connection.execute(
                    "DELETE FROM keepsake_escrow_sources WHERE minute < $1", [.integer(window)])
            }
            return PostgresConnection.integer(
                try connection.execute(
                    """
                    INSERT INTO keepsake_escrow_sources (source, minute, requests) VALUES ($1, $2, 1)
                    ON CONFLICT (source) DO UPDATE SET
                        requests = CASE WHEN keepsake_escrow_sources.minute = excluded.minute
                            THEN keepsake_escrow_sources.requests + 1 ELSE 1 END,
                        minute = excluded.minute
                    RETURNING requests::bigint
                    """, [.bytes(Data(id)), .integer(window)]
                ).first?[0] ?? nil)
        }
        return (count ?? Int64.max) <= Int64(limit)
    }

    package func transaction<R>(_ body: (any EscrowTransaction) throws(EscrowError) -> R)
        throws(EscrowError) -> R
    {
        var refusal: EscrowError?
        let result: R? = try transactionOnce(retrying: true) {
            (connection) throws(PostgresError) -> R? in
            let transaction = Transaction(connection: connection, key: serviceKey)
            refusal = nil
            do throws(EscrowError) {
                return try body(transaction)
            } catch {
                // A failure of the database: the transaction goes (`transactionOnce` rolls
                // back, and runs it again when it can). A refusal commits what it changed.
                if let failure = transaction.failure { throw failure }
                refusal = error
                return nil
            }
        }
        if let refusal { throw refusal }
        return result!
    }

    /// Runs `body` in one serializable transaction on a connection of the pool, committed when it
    /// returns. `retrying`: a conflict, or a connection that went before the commit, runs it again
    /// (on a new connection: the primary a failover left) for up to `patience`. A commit cut
    /// short is never run again.
    private func transactionOnce<R>(
        retrying: Bool, _ body: (PostgresConnection) throws(PostgresError) -> R
    ) throws(EscrowError) -> R {
        let deadline = Date() + patience
        var attempt = 0
        while true {
            attempt += 1
            var committing = false
            var lastError: PostgresError
            do throws(PostgresError) {
                let connection = try checkout()
                do {
                    try connection.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                    let result = try body(connection)
                    committing = true
                    try connection.commit()
                    checkin(connection)
                    return result
                } catch {
                    if connection.isUsable {
                        _ = try? connection.execute("ROLLBACK")
                        checkin(connection)
                    }
                    throw error
                }
            } catch {
                lastError = error
            }
            if committing && [.connection, .unconfirmed].contains(lastError.kind) {
                Self.log(lastError)
                throw EscrowError(
                    .unavailable,
                    "the escrow's database did not confirm the request (it may have been counted): try again"
                )
            }
            guard retrying, lastError.kind != .statement, Date() < deadline else {
                Self.log(lastError)
                throw EscrowError(.unavailable, "the escrow's database is unavailable: try again")
            }
            // A conflict runs again at once (after a moment's jitter); a connection that went
            // waits for a primary to take its place.
            let pause =
                lastError.kind == .conflict
                ? Double.random(in: 0...0.002) * Double(min(attempt, 20))
                : min(0.05 * Double(attempt), 1)
            Thread.sleep(forTimeInterval: pause)
        }
    }

    /// What the database said, for the service's operator (standard error, the journal): never in
    /// an answer, where it would name the database's hosts and roles to any client.
    /// Written with write(2), whose failure (standard error closed: a harness that stopped
    /// reading) is no failure of the request — Foundation's `FileHandle.write` would end the
    /// process.
    private static func log(_ error: PostgresError) {
        let line = Array("keepsake-escrow: the database: \(error)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    private func checkout() throws(PostgresError) -> PostgresConnection {
        while let connection = idle.withLock({ $0.popLast() }) {
            if connection.isUsable { return connection }
        }
        return try PostgresConnection(conninfo)
    }

    private func checkin(_ connection: PostgresConnection) {
        guard connection.isUsable else { return }
        idle.withLock { if $0.count < 16 { $0.append(connection) } }
    }

    /// One transaction's reads and writes, each row's value sealed under the service key bound
    /// to its table and ID.
    private final class Transaction: EscrowTransaction {
        let connection: PostgresConnection
        let key: SecureBytes
        /// The database's failure, when one ended the transaction.
        var failure: PostgresError?

        init(connection: PostgresConnection, key: SecureBytes) {
            self.connection = connection
            self.key = key
        }

        @discardableResult
        private func run(_ sql: String, _ parameters: [PostgresConnection.Parameter] = [])
            throws(EscrowError) -> [[Data?]]
        {
            do { return try connection.execute(sql, parameters) } catch {
                failure = error
                throw EscrowError(.unavailable, "the escrow's database is unavailable")
            }
        }

        private func seal(_ value: Data, table: String, id: Data) -> Data {
            Envelope.seal(value, key: key, associatedData: Self.binding(table, id))
        }

        private func open(_ sealed: Data, table: String, id: Data) throws(EscrowError) -> Data {
            do {
                return try Envelope.open(sealed, key: key, associatedData: Self.binding(table, id))
                { Data($0) }
            } catch {
                throw EscrowError(
                    .unavailable,
                    "a row of the escrow's database does not open under the service key (written elsewhere, or moved)"
                )
            }
        }

        private static func binding(_ table: String, _ id: Data) -> Data {
            Data("keepsake-escrow.pg.\(table).v1\0".utf8) + id
        }

        func load(_ id: Data) throws(EscrowError) -> Data? {
            guard
                let sealed = try run(
                    "SELECT sealed FROM keepsake_escrow_records WHERE id = $1", [.bytes(id)]
                ).first?[0] ?? nil
            else { return nil }
            return try open(sealed, table: "records", id: id)
        }

        func save(_ id: Data, _ record: Data) throws(EscrowError) {
            try run(
                """
                INSERT INTO keepsake_escrow_records (id, sealed) VALUES ($1, $2)
                ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed
                """, [.bytes(id), .bytes(seal(record, table: "records", id: id))])
        }

        func delete(_ id: Data) throws(EscrowError) {
            try run("DELETE FROM keepsake_escrow_records WHERE id = $1", [.bytes(id)])
        }

        func session(_ id: Data) throws(EscrowError) -> SlotSession {
            guard
                let sealed = try run(
                    "SELECT sealed FROM keepsake_escrow_sessions WHERE id = $1", [.bytes(id)]
                ).first?[0] ?? nil
            else { return SlotSession() }
            return SlotSession.parse(try open(sealed, table: "sessions", id: id)) ?? SlotSession()
        }

        func setSession(_ id: Data, _ session: SlotSession) throws(EscrowError) {
            guard !session.isEmpty else {
                try run("DELETE FROM keepsake_escrow_sessions WHERE id = $1", [.bytes(id)])
                return
            }
            let pending = session.pendingRegistration
            try run(
                """
                INSERT INTO keepsake_escrow_sessions
                    (id, sealed, expires, pending_expires, pending_budget)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed,
                    expires = excluded.expires, pending_expires = excluded.pending_expires,
                    pending_budget = excluded.pending_budget
                """,
                [
                    .bytes(id), .bytes(seal(session.encoded(), table: "sessions", id: id)),
                    .integer(session.expiry.milliseconds),
                    pending.map { .integer($0.expires.milliseconds) } ?? .null,
                    pending?.budget.map { .bytes($0) } ?? .null,
                ])
        }

        func registrations(of budget: Data?, at now: Date) throws(EscrowError) -> [(
            slot: Data, expires: Date
        )] {
            // Sessions a day past their expiry go (what a node that died left), now and then.
            if Int.random(in: 0..<64) == 0 {
                try run(
                    "DELETE FROM keepsake_escrow_sessions WHERE expires < $1",
                    [.integer(now.milliseconds - 86_400_000)])
            }
            let rows =
                if let budget {
                    try run(
                        """
                        SELECT id, pending_expires FROM keepsake_escrow_sessions
                        WHERE pending_expires > $1 AND pending_budget = $2 ORDER BY pending_expires
                        """, [.integer(now.milliseconds), .bytes(budget)])
                } else {
                    try run(
                        """
                        SELECT id, pending_expires FROM keepsake_escrow_sessions
                        WHERE pending_expires > $1 ORDER BY pending_expires LIMIT 2048
                        """, [.integer(now.milliseconds)])
                }
            return rows.compactMap { row in
                guard let id = row[0], let expires = PostgresConnection.integer(row[1]) else {
                    return nil
                }
                return (id, Date(timeIntervalSince1970: Double(expires) / 1000))
            }
        }
    }
}
