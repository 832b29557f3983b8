import Escrow
import Foundation
import Platform
import Sealing
import Synchronization
import TPM

/// The escrow's slots kept under a TPM only the escrow reaches (`--tpm`): each slot's record
/// sealed (XChaCha20-Poly1305) under a state key that lives in the TPM, and a table of every
/// slot's current record (its digest) stamped with the TPM's counter, which goes up by one with
/// every change. The state directory alone opens nothing; an older copy of it (a backup put
/// back, one slot's file swapped for an earlier one) is refused, so a count is never rolled back.
///
/// A change: the slot's new record file, then the table with the counter's next value, then the
/// increment — the answer waits for all three. A crash between the last two leaves the table one
/// ahead of the counter: taken as it is (that change was never answered) and the counter brought
/// up to it. Anything else that disagrees with the counter is refused.
final class SealedSlots: SlotStorage {
    private let directory: URL
    private let tpm: TPMServiceState
    private let key: SecureBytes
    private let maximumSlots: Int
    private let state: Mutex<Table>
    private let lock: Int32

    /// Every slot's current record file (by the digest of its sealed bytes), as of `version`.
    private struct Table {
        var version: UInt64
        var slots: [Data: Data]
    }

    static func handlesFile(_ directory: URL) -> URL { directory.appendingPathComponent(".tpm") }
    private static func tableFile(_ directory: URL) -> URL {
        directory.appendingPathComponent(".table")
    }

    /// What `status` reports: "software TPM (IBM SW)", "hardware TPM (…)".
    var counter: String { tpm.kind }

    init(_ directory: URL, tcti: String, maximumSlots: Int) throws {
        lock = try lockStateDirectory(directory)
        self.directory = directory
        self.maximumSlots = maximumSlots
        let handlesFile = Self.handlesFile(directory)
        let handles: TPMServiceState.Handles?
        if let bytes = try Files.read(handlesFile, limit: 4096) {
            handles = try JSONDecoder().decode(TPMServiceState.Handles.self, from: bytes)
        } else {
            guard Files.list(directory).isEmpty else {
                throw ListenerError(
                    "\(directory.path) was made without a TPM: start keepsake-escrow without --tpm, or on a new state directory"
                )
            }
            handles = nil
        }
        tpm = try TPMServiceState(tcti: tcti, handles: handles)
        if handles == nil {
            try Files.writeAtomically(try JSONEncoder().encode(tpm.handles), to: handlesFile)
        }
        key = try tpm.stateKey()
        let count = try tpm.count()
        var table: Table
        if let sealed = try Files.read(Self.tableFile(directory), limit: 64 + maximumSlots * 64) {
            table = try Self.open(sealed, key: key)
        } else if count == tpm.handles.initialCount {
            table = Table(version: count, slots: [:])  // a new state: nothing changed yet
        } else {
            throw ListenerError(
                "\(directory.path) has no slot table but its TPM counter moved on: the state directory was emptied or replaced"
            )
        }
        if table.version == count + 1 {
            try tpm.increment()  // the last change's increment was lost (a crash)
        } else if table.version != count {
            throw ListenerError(
                "\(directory.path) is not the escrow's latest state (its table is at \(table.version), the TPM's counter at \(count)): a copy put back, or state from elsewhere — refused, so no count goes back"
            )
        }
        state = Mutex(table)
        // Record files no table names (a change that crashed before its table was written).
        let named = Set(table.slots.map { Self.fileName($0.key, $0.value) })
        for name in Files.list(directory) where name.hasPrefix("s-") && !named.contains(name) {
            try? Files.remove(directory.appendingPathComponent(name))
        }
    }

    func load(_ slot: Data) throws -> Data? {
        guard let digest = state.withLock({ $0.slots[slot] }) else { return nil }
        guard
            let sealed = try Files.read(
                directory.appendingPathComponent(Self.fileName(slot, digest)), limit: 8192),
            constantTimeEquals(Self.digest(sealed, key: key), digest)
        else {
            throw ListenerError("the slot's record is missing or is not the one the table names")
        }
        return try Envelope.open(sealed, key: key, associatedData: Self.context(slot)) {
            Data($0)
        }
    }

    func save(_ slot: Data, _ record: Data) throws {
        let sealed = Envelope.seal(record, key: key, associatedData: Self.context(slot))
        let digest = Self.digest(sealed, key: key)
        let file = directory.appendingPathComponent(Self.fileName(slot, digest))
        try state.withLock { table in
            if table.slots[slot] == nil && table.slots.count >= maximumSlots {
                throw ListenerError("the escrow holds its most slots (\(maximumSlots))")
            }
            try catchUp(table)
            try Files.writeAtomically(sealed, to: file)
            var next = table
            let previous = next.slots.updateValue(digest, forKey: slot)
            next.version += 1
            do {
                try Files.writeAtomically(Self.seal(next, key: key), to: Self.tableFile(directory))
            } catch {
                try? Files.remove(file)
                throw error
            }
            table = next
            if let previous, previous != digest {
                try? Files.remove(directory.appendingPathComponent(Self.fileName(slot, previous)))
            }
            // The change is on disk; it counts once the TPM says so (else the next change, or
            // the next start, brings the counter up to it).
            try tpm.increment()
        }
    }

    /// Drops a slot from the table (a change stamped like any other), then its file.
    func delete(_ slot: Data) throws {
        try state.withLock { table in
            guard let previous = table.slots[slot] else { return }
            try catchUp(table)
            var next = table
            next.slots[slot] = nil
            next.version += 1
            try Files.writeAtomically(Self.seal(next, key: key), to: Self.tableFile(directory))
            table = next
            try? Files.remove(directory.appendingPathComponent(Self.fileName(slot, previous)))
            try tpm.increment()
        }
    }

    /// The counter first agrees with the table: a change whose increment was lost (the TPM
    /// restarted, say) is brought up; anything else is refused.
    private func catchUp(_ table: Table) throws {
        let count = try tpm.count()
        if count + 1 == table.version {
            try tpm.increment()
        } else if count != table.version {
            throw ListenerError(
                "the TPM's counter (\(count)) no longer matches the escrow's state (\(table.version))"
            )
        }
    }

    func count() -> Int { state.withLock { $0.slots.count } }

    /// Every record's ID, as the table names them.
    func ids() -> [Data] { state.withLock { Array($0.slots.keys) } }

    // MARK: - Files

    private static func fileName(_ slot: Data, _ digest: Data) -> String {
        "s-\(slot.hexString)-\(Data(digest.prefix(8)).hexString)"
    }

    private static func context(_ slot: Data) -> Data { Data("keepsake-escrow slot".utf8) + slot }

    private static func digest(_ sealed: Data, key: SecureBytes) -> Data {
        KeyDerivation.keyedHash(key: key, context: "keepsake-escrow record", sealed)
            .withUnsafeBytes { Data($0) }
    }

    private static let tableContext = Data("keepsake-escrow table".utf8)

    /// version (8) · count (4) · count × (slot 16 · digest 32), sealed.
    private static func seal(_ table: Table, key: SecureBytes) -> Data {
        var bytes = Data()
        bytes.reserveCapacity(12 + table.slots.count * 48)
        withUnsafeBytes(of: table.version.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(table.slots.count).bigEndian) { bytes.append(contentsOf: $0) }
        for (slot, digest) in table.slots.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            bytes.append(slot)
            bytes.append(digest)
        }
        return Envelope.seal(bytes, key: key, associatedData: tableContext)
    }

    private static func open(_ sealed: Data, key: SecureBytes) throws -> Table {
        let bytes = try Envelope.open(sealed, key: key, associatedData: tableContext) { Data($0) }
        let slotLength = EscrowProtocol.slotIDLength
        guard bytes.count >= 12 else { throw ListenerError("the slot table does not decode") }
        let version = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let count = Int(bytes.dropFirst(8).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard bytes.count == 12 + count * (slotLength + 32) else {
            throw ListenerError("the slot table does not decode")
        }
        var slots: [Data: Data] = [:]
        var offset = bytes.startIndex + 12
        for _ in 0..<count {
            let slot = Data(bytes[offset..<offset + slotLength])
            let digest = Data(bytes[offset + slotLength..<offset + slotLength + 32])
            slots[slot] = digest
            offset += slotLength + 32
        }
        return Table(version: version, slots: slots)
    }
}
