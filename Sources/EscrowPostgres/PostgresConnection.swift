import CLibPQ
import Foundation

/// One libpq connection: statements with parameters (bytea in binary, integers as text), results
/// in binary. Not thread-safe: a store hands each to one transaction at a time.
final class PostgresConnection: @unchecked Sendable {
    // Sendable: a store's pool hands each connection to one transaction at a time.
    private var connection: OpaquePointer?

    /// A connection to `conninfo` (a `postgresql://` URI: several hosts with
    /// `target_session_attrs=read-write` find the primary among them).
    init(_ conninfo: String) throws(PostgresError) {
        connection = PQconnectdb(conninfo)
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let message = connection.map { Self.message(PQerrorMessage($0)) } ?? "out of memory"
            if let connection { PQfinish(connection) }
            self.connection = nil
            throw PostgresError(.connection, "could not connect: \(message)")
        }
        // The server's notices are kept here, not printed (libpq would write "relation …
        // already exists, skipping" to standard error): a COMMIT's is read (`commit`).
        PQsetNoticeProcessor(
            connection,
            { context, message in
                guard let context, let message else { return }
                Unmanaged<Notices>.fromOpaque(context).takeUnretainedValue().text.append(
                    String(cString: message))
            }, Unmanaged.passUnretained(notices).toOpaque())
        // No limit of the server's or the role's cuts a statement short — a COMMIT cancelled
        // while it waits for the standby is answered as done, "committed locally" — and a
        // weaker synchronous_commit set for the role or the database is raised.
        do {
            try execute("SET statement_timeout = 0")
            try execute("SET lock_timeout = 0")
            let level = try execute("SHOW synchronous_commit").first?[0] ?? nil
            if let level, ["off", "local"].contains(String(decoding: level, as: UTF8.self)) {
                try execute("SET synchronous_commit = on")
            }
        } catch {
            PQfinish(connection)
            self.connection = nil
            throw error
        }
    }

    /// The notices of this connection's last statement.
    private final class Notices { var text: [String] = [] }
    private let notices = Notices()

    /// COMMIT: throws when the server says the commit was not confirmed by the synchronous
    /// standby ("canceling wait for synchronous replication"): committed on the primary alone, a
    /// failover could lose it — the request is answered as failed (it may be counted).
    func commit() throws(PostgresError) {
        notices.text = []
        try execute("COMMIT")
        if notices.text.contains(where: { $0.contains("synchronous replication") }) {
            throw PostgresError(.unconfirmed, "the commit was not confirmed by the standby")
        }
    }

    deinit { if let connection { PQfinish(connection) } }

    /// Whether the connection is still usable (a server gone leaves it bad).
    var isUsable: Bool { connection.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// A statement's parameter: bytes (bytea, sent in binary), or an integer (sent as text).
    enum Parameter {
        case bytes(Data)
        case integer(Int64)
        case null
    }

    /// Runs `sql` with `parameters` ($1, $2, …): the rows, each a list of values (nil: NULL),
    /// in binary.
    @discardableResult
    func execute(_ sql: String, _ parameters: [Parameter] = []) throws(PostgresError) -> [[Data?]] {
        guard let connection else { throw PostgresError(.connection, "not connected") }
        let texts: [Data] = parameters.map {
            switch $0 {
            case .bytes(let bytes): bytes
            case .integer(let value): Data(String(value).utf8) + [0]
            case .null: Data()
            }
        }
        let formats: [Int32] = parameters.map {
            if case .bytes = $0 { 1 } else { 0 }
        }
        let lengths: [Int32] = texts.map { Int32($0.count) }
        let result: OpaquePointer? = withParameterPointers(texts, parameters) { values in
            PQexecParams(
                connection, sql, Int32(parameters.count), nil, values, lengths, formats, 1)
        }
        guard let result else {
            throw PostgresError(.connection, Self.message(PQerrorMessage(connection)))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map {
                String(cString: $0)
            }
            let message = Self.message(PQresultErrorMessage(result))
            if PQstatus(connection) != CONNECTION_OK {
                throw PostgresError(.connection, message)
            }
            // 40001 serialization failure, 40P01 deadlock: the transaction is run again.
            if state == "40001" || state == "40P01" { throw PostgresError(.conflict, message) }
            // 25006 (read-only transaction): a standby, or a primary demoted meanwhile.
            if state == "25006" { throw PostgresError(.connection, message) }
            throw PostgresError(.statement, message)
        }
        var rows: [[Data?]] = []
        for row in 0..<PQntuples(result) {
            rows.append(
                (0..<PQnfields(result)).map { column in
                    guard PQgetisnull(result, row, column) == 0 else { return nil }
                    let length = Int(PQgetlength(result, row, column))
                    guard let value = PQgetvalue(result, row, column) else { return Data() }
                    return Data(bytes: value, count: length)
                })
        }
        return rows
    }

    /// Calls `body` with a pointer to each parameter's bytes (NULL for a NULL).
    private func withParameterPointers<R>(
        _ texts: [Data], _ parameters: [Parameter],
        _ body: ([UnsafePointer<CChar>?]) -> R
    ) -> R {
        var pointers: [UnsafePointer<CChar>?] = []
        func next(_ index: Int) -> R {
            guard index < texts.count else { return body(pointers) }
            if case .null = parameters[index] {
                pointers.append(nil)
                return next(index + 1)
            }
            return texts[index].withUnsafeBytes { raw in
                // An empty bytea still needs a pointer that is not NULL.
                pointers.append(
                    raw.baseAddress.map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) }
                        ?? UnsafePointer(Self.empty))
                return next(index + 1)
            }
        }
        return next(0)
    }

    /// What an empty value points at.
    private nonisolated(unsafe) static let empty: UnsafeMutablePointer<CChar> = {
        let byte = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        byte.initialize(to: 0)
        return byte
    }()

    private static func message(_ text: UnsafePointer<CChar>?) -> String {
        text.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
    }

    /// A big-endian 8-byte integer as a result in binary gives it (bigint).
    static func integer(_ value: Data?) -> Int64? {
        guard let value, value.count == 8 else { return nil }
        return value.reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}

/// What went wrong with the database: the connection (another try may reach the primary), a
/// conflict with another transaction (run again), the statement itself, or a commit the
/// synchronous standby did not confirm.
struct PostgresError: Error, CustomStringConvertible {
    enum Kind { case connection, conflict, statement, unconfirmed }
    let kind: Kind
    let description: String
    init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}
