import Foundation
import Sealing
import Platform

/// The escrow's wire protocol: every request and answer is one TLV record (`TLV`, magic `KEP1`)
/// in an HTTP POST body, at most `maximumMessage` bytes. What crosses it, and why none of it lets
/// anyone test a passcode guess without the escrow counting it:
///
/// 1. **Register** (`/v1/register`, then `/v1/register/finish`): the device blinds its passcode
///    key `x` (Argon2id of the passcode, salted) and the escrow evaluates it under a new slot's key
///    `k`, with its public key `K = k·G` and a proof that `K` evaluated it (`OPRF`, verifiable
///    mode); the device derives `rwd = F(k, x)` and sends a verifier (an Ed25519 public key
///    whose seed derives from `rwd`), the secret sealed under another key derived from `rwd` (the
///    envelope), the owner's public key (derived from the secret itself: only whoever holds the
///    secret may remove the slot), the salt and cost, the limit, and optionally a reader key
///    (the only key the count is told to). A device keeps `K`, the salt and the cost: a later
///    answer under another key, salt or a cheaper cost is not its service.
/// 2. **Claim** (`/v1/claim`, then `/v1/claim/finish`): the escrow applies its delay (a claim
///    too soon after wrong ones is refused, not counted), **counts the claim durably against the
///    caller's budget, then** evaluates the blinded guess with its proof and hands out a
///    one-time challenge; the device checks the proof under the key it pinned before it derives
///    anything, then signs the challenge and its fresh X25519 key with the verifier's key
///    derived from its `rwd`. A valid signature takes back this claim's own count and releases
///    the envelope sealed to that X25519 key, with a report: the wrong claims still spent, when
///    the first and the last were, and a one-time token. Only `/v1/claim/acknowledge` with that
///    token — sent once the owner was shown the report — gives those tries back, and only
///    those (`ClaimPolicy`). An invalid signature (a wrong passcode) leaves the count where it
///    is. Once `limit` tries of the caller's are spent, every slot of its budget is destroyed.
///    The budget is the caller's, not the slot's (`CallerBudget`): a local user's by its uid,
///    an account's by the budget its first slot started — a registration names an earlier
///    slot (`inherit`, signed by that slot's reader key) to join it.
/// 3. **Remove** (`/v1/challenge`, then `/v1/remove`): a signature of the owner key over a fresh
///    challenge.
/// 4. **Witness** (`/v1/witness`, `/v1/witness/read`): an account's latest state (a statement
///    whose first 16 bytes order it), signed by the witness key of the account. The first
///    statement under an ID names its key; every later one must be signed by it and order no lower
///    than the one kept, so whoever serves the account's objects cannot wind it back. Anyone may
///    read it: a joining device checks the signature with the key it derived itself.
///
/// The escrow never sees `x`, the passcode or the secret; a recording of every byte holds blinded
/// elements (uniformly random), the escrow's evaluations of them (useless without the blind),
/// signatures, and the envelope sealed to a key that exists only in the claiming process.
package enum EscrowProtocol {
    package static let magic = Data("KEP1".utf8)
    /// Every request and answer body is at most this long.
    package static let maximumMessage = 4096
    /// The largest envelope (a 64-byte secret sealed, with room).
    package static let maximumEnvelope = 256
    /// The most claims an escrow counts for a slot before it destroys it.
    package static let maximumLimit: Int64 = 10
    package static let slotIDLength = 16
    package static let challengeLength = 32
    /// How long a challenge or a half-done registration stays valid.
    package static let challengeLifetime: TimeInterval = 120

    /// OPRF context (domain separation of every derivation).
    static let context = "keepsake-escrow v1"

    /// The fields of a message.
    package enum Tag: UInt8 {
        case slot = 1, blinded, evaluated, challenge, verifier, owner, envelope, limit, failures
        case boxKey, signature, sealed, message, counter, salt, operations, memory, slots
        case statement
        case publicKey, proof, reader, sinceRight, lastWrong, notBefore
        case firstWrong, report, inherit, inheritSignature
    }
    static let knownTags: ClosedRange<UInt8> = 1...29
    /// The longest witness statement.
    package static let maximumStatement = 96

    /// The paths of the protocol's requests.
    package enum Path: String, CaseIterable, Sendable {
        case register = "/v1/register"
        case finishRegistration = "/v1/register/finish"
        case claim = "/v1/claim"
        case finishClaim = "/v1/claim/finish"
        case acknowledge = "/v1/claim/acknowledge"
        case challenge = "/v1/challenge"
        case remove = "/v1/remove"
        case slot = "/v1/slot"
        case status = "/v1/status"
        case witness = "/v1/witness"
        case readWitness = "/v1/witness/read"

        /// What a device's guess counter answers: its slots, never an account's witness.
        package static let slots: Set<Path> = Set(allCases).subtracting([.witness, .readWitness])
    }

    /// What a proof of the passcode signs: the slot, the escrow's challenge and the key the
    /// secret is to be sealed to (so a relay cannot swap in its own).
    static func claimProof(slot: Data, challenge: Data, boxKey: Data) -> Data {
        Data("keepsake-escrow claim v1\0".utf8) + slot + challenge + boxKey
    }

    /// What a slot's reader (the device that registered it) signs to be told the slot's count.
    static func readProof(slot: Data, challenge: Data) -> Data {
        Data("keepsake-escrow read v1\0".utf8) + slot + challenge
    }

    /// The reader key of a slot: derived from a secret its registrant keeps (a device's device
    /// secret, the account key), so it needs no storage of its own.
    package static func reader(secret: SecureBytes) -> (
        publicKey: Data, secretKey: SecureBytes
    ) {
        Signature.keyPair(
            seed: KeyDerivation.keyedHash(key: secret, context: "keepsake-escrow reader"))
    }

    /// What the owner signs to remove a slot.
    /// What a registration that joins an earlier slot's budget carries, signed by that slot's
    /// reader key: the new slot and the earlier one.
    static func inheritProof(slot: Data, from earlier: Data) -> Data {
        Data("keepsake-escrow inherit v1\0".utf8) + slot + earlier
    }

    /// A time as the escrow's answers say it: ISO 8601, UTC, to the second.
    static func time(_ date: Date) -> String {
        date.formatted(
            .iso8601.year().month().day().time(includingFractionalSeconds: false)
                .timeZone(separator: .omitted))
    }

    static func removalProof(slot: Data, challenge: Data) -> Data {
        Data("keepsake-escrow remove v1\0".utf8) + slot + challenge
    }

    /// What a witness key signs: the witness's ID and the statement.
    package static func witnessProof(id: Data, statement: Data) -> Data {
        Data("keepsake-escrow witness v1\0".utf8) + id + statement
    }

    /// Where a statement stands: its first 16 bytes, two big-endian numbers compared in turn
    /// (an account's epoch, then its manifest version). nil for one shorter than that.
    package static func order(of statement: Data) -> (UInt64, UInt64)? {
        guard statement.count >= 16 else { return nil }
        let bytes = [UInt8](statement.prefix(16))
        let number = { (range: Range<Int>) in
            range.reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[$1]) }
        }
        return (number(0..<8), number(8..<16))
    }

    /// The envelope's associated data: it opens only as this slot's.
    static func envelopeBinding(slot: Data) -> Data {
        Data("keepsake-escrow envelope v1\0".utf8) + slot
    }

    static func message(_ fields: [(Tag, Data)]) -> Data {
        var record = TLV(magic: magic)
        for (tag, value) in fields { record.append(tag.rawValue, value) }
        return record.bytes
    }

    static func integer(_ value: Int64) -> Data {
        withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }

    /// Parses a message, refusing anything over the size bound or with unknown fields.
    static func fields(_ body: Data) throws(EscrowError) -> TLV.Fields {
        guard body.count <= maximumMessage else {
            throw EscrowError(.malformed, "a message is at most \(maximumMessage) bytes")
        }
        do { return try TLV.fields(body, magic: magic, known: knownTags) } catch {
            throw EscrowError(.malformed, "not an escrow message: \(error)")
        }
    }
}

extension TLV.Fields {
    /// A field of exactly `length` bytes.
    func exactly(_ tag: EscrowProtocol.Tag, _ length: Int) throws(EscrowError) -> Data {
        guard let value = self[tag.rawValue], value.count == length else {
            throw EscrowError(.malformed, "field \(tag) missing or not \(length) bytes")
        }
        return Data(value)
    }

    /// A field of at most `length` bytes.
    func atMost(_ tag: EscrowProtocol.Tag, _ length: Int) throws(EscrowError) -> Data {
        guard let value = self[tag.rawValue], value.count <= length else {
            throw EscrowError(.malformed, "field \(tag) missing or over \(length) bytes")
        }
        return Data(value)
    }

    /// An integer field within `range`.
    func integer(_ tag: EscrowProtocol.Tag, in range: ClosedRange<Int64>) throws(EscrowError)
        -> Int64
    {
        guard let value = try? int64(tag.rawValue), range.contains(value) else {
            throw EscrowError(.malformed, "field \(tag) missing or out of \(range)")
        }
        return value
    }

    /// A string field (at most 256 bytes).
    func text(_ tag: EscrowProtocol.Tag) -> String? {
        guard let value = try? string(tag.rawValue), value.utf8.count <= 256 else {
            return nil
        }
        return value
    }
}

/// Whose codes `EscrowError`'s are.
package enum EscrowErrorDomain {}

/// The one error type of the Escrow module. Compares by code.
package typealias EscrowError = CodedError<EscrowErrorDomain>

extension ErrorCode<EscrowErrorDomain> {
    /// A message (request or answer) that does not parse or is out of bounds.
    package static var malformed: Self { Self("malformed") }
    /// The proof did not verify: a wrong passcode (or owner key). The claim stays counted.
    package static var authFailed: Self { Self("proof refused") }
    /// The slot was destroyed: `limit` claims were counted without a right one.
    package static var destroyed: Self { Self("slot destroyed") }
    /// No such slot.
    package static var notFound: Self { Self("no such slot") }
    /// The escrow did not answer, or answered with a failure of its own.
    package static var unavailable: Self { Self("escrow unavailable") }
    /// Too many half-done registrations: try again later.
    package static var busy: Self { Self("escrow busy") }
    /// The challenge was used, replaced or expired.
    package static var stale: Self { Self("stale challenge") }
    /// Too many wrong claims lately: the slot takes the next one only later (not counted).
    package static var wait: Self { Self("wait") }
    /// The answer is not the service the device registered with: another key than the pinned
    /// one, a proof that does not verify, another salt, a cheaper cost, another user on the
    /// socket. Nothing derived from the passcode was sent.
    package static var notTheService: Self { Self("not the registered service") }
}

extension EscrowError {
    /// The HTTP status an escrow answers with for this error.
    var status: Int {
        switch code {
        case .malformed: 400
        case .authFailed: 403
        case .notFound: 404
        case .stale: 409
        case .destroyed: 410
        case .wait: 429
        case .busy: 503
        default: 500
        }
    }

    /// The error an HTTP status stands for (the client's side of `status`).
    init(status: Int, message: String) {
        let code: Code =
            switch status {
            case 400: .malformed
            case 403: .authFailed
            case 404: .notFound
            case 409: .stale
            case 410: .destroyed
            case 429: .wait
            case 503: .busy
            default: .unavailable
            }
        self.init(code, message)
    }
}
