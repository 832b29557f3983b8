import Escrow
import EscrowPostgres
import Foundation

/// `keepsake-escrow migrate`: every record of a stopped escrow's state directory (slots with
/// their budgets' counts, witnesses) into a PostgreSQL store, in one transaction, each read back
/// and compared before it commits. Sessions (registrations and claims under way) are not moved:
/// a stopped escrow has none that count. The directory is left as it was (its lock is taken: an
/// escrow still running on it is refused).
enum Migration {
    static func run(from directory: URL, tpm: String?, to store: PostgresEscrowStore) throws
        -> Int
    {
        let source: any SlotStorage
        let ids: [Data]
        if let tpm {
            let sealed = try SealedSlots(directory, tcti: tpm, maximumSlots: 20_000)
            (source, ids) = (sealed, sealed.ids())
        } else {
            let files = try SlotFiles(directory)
            (source, ids) = (files, files.ids())
        }
        var records: [(Data, Data)] = []
        for id in ids {
            guard let bytes = try source.load(id) else { continue }
            records.append((id, bytes))
        }
        try store.transaction { (state) throws(EscrowError) in
            // A store that holds an ID already with other bytes is another escrow's: refused
            // before anything is written (a refusal commits what came before it), so no count is
            // written over.
            for (id, bytes) in records {
                if let held = try state.load(id), held != bytes {
                    throw EscrowError(
                        .stale,
                        "the store holds \(id.hexString) already, with another record: nothing migrated"
                    )
                }
            }
            for (id, bytes) in records { try state.save(id, bytes) }
        }
        // Read back, after the commit, as any node reads them.
        try store.transaction { (state) throws(EscrowError) in
            for (id, bytes) in records where try state.load(id) != bytes {
                throw EscrowError(.unavailable, "\(id.hexString) did not read back as it was")
            }
        }
        return records.count
    }
}
