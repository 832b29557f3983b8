import Foundation
import Platform
import Sealing

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
    /// Tries spent on this slot alone, from before budgets (joined into its budget at first use).
    var failures: Int64
    /// Who may read the count (a device's reader key); nil: nobody.
    var reader: Data?
    /// The budget its claims are counted against (`CallerBudget`); nil in a record from before
    /// budgets, until its first use.
    var budget: Data?

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
        if let budget { record.append(14, budget) }
        return record.bytes
    }

    static func parse(_ bytes: Data) -> SlotRecord? {
        // 11–13: a per-slot count's times, from before budgets (read past).
        guard let fields = try? TLV.fields(bytes, magic: magic, known: 1...14),
            let key = fields[1], key.count == OPRF.scalarLength,
            let verifier = fields[2], let owner = fields[3], let envelope = fields[4],
            let salt = fields[5], let operations = try? fields.int64(6),
            let memory = try? fields.int64(7),
            let limit = try? fields.int64(8),
            let failures = try? fields.int64(9),
            fields[10].map({ $0.count == Signature.publicKeyLength }) ?? true,
            fields[14].map({ $0.count == EscrowProtocol.slotIDLength }) ?? true
        else { return nil }
        return SlotRecord(
            key: SecureBytes(copying: key), verifier: Data(verifier), owner: Data(owner),
            envelope: Data(envelope), salt: Data(salt), operations: operations, memory: memory,
            limit: limit, failures: failures, reader: fields[10].map { Data($0) },
            budget: fields[14].map { Data($0) })
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
    package var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
}
