import Foundation
import KeepsakeTestSupport
import Sealing
import Synchronization
import Testing

@testable import Escrow

/// Slots in memory: the service's own code on a clock the test moves.
private final class MemorySlots: SlotStorage, @unchecked Sendable {
    // @unchecked Sendable: `records` is guarded by `lock`.
    private let lock = NSLock()
    private var records: [Data: Data] = [:]
    func load(_ slot: Data) throws -> Data? { lock.withLock { records[slot] } }
    func save(_ slot: Data, _ record: Data) throws { lock.withLock { records[slot] = record } }
    func delete(_ slot: Data) throws { _ = lock.withLock { records.removeValue(forKey: slot) } }
    func count() -> Int { lock.withLock { records.count } }
}

/// An escrow service on a clock the test sets, and a client that talks to it.
private final class Clock: Sendable {
    let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
}

private final class Counter: Sendable {
    let clock: Clock
    let service: EscrowService
    let passcodeKey = SecureBytes(randomCount: 32)
    let reader = Signature.keyPair(seed: SecureBytes(randomCount: 32))
    let registered: EscrowClient.Registered

    init(policy: ClaimPolicy = .real) throws {
        let clock = Clock()
        service = EscrowService(
            storage: MemorySlots(), counter: "memory", policy: policy,
            now: { clock.now.withLock { $0 } })
        self.clock = clock
        registered = try Self.client(service).register(
            SecureBytes(randomCount: 32), passcodeKey: passcodeKey,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: reader.publicKey)
    }

    static func client(_ service: EscrowService) -> EscrowClient {
        EscrowClient { method, path, body throws(EscrowError) in
            service.answer(method: method, path: path, body: body)
        }
    }

    var client: EscrowClient { Self.client(service) }

    func advance(_ seconds: TimeInterval) { clock.now.withLock { $0 += seconds } }

    /// One wrong claim: its error code.
    func wrong() -> EscrowError.Code? {
        do throws(EscrowError) {
            _ = try client.claim(
                registered.slot, passcodeKey: SecureBytes(randomCount: 32),
                publicKey: registered.publicKey)
            return nil
        } catch { return error.code }
    }

    func right() throws(EscrowError) -> EscrowClient.Released {
        try client.claim(registered.slot, passcodeKey: passcodeKey, publicKey: registered.publicKey)
    }

    var count: EscrowClient.Count {
        get throws { try #require(try client.count(of: registered.slot, reader: reader).count) }
    }
}

@Suite("How wrong claims are spent: never refunded, one back a day, delays no unlock hides")
struct ClaimPolicyTests {
    @Test(
        "the first 5 wrong claims come at once; the 6th waits a minute (refused, not counted), then 5 min, 15 min, 15 min, 1 hour; a right claim waits the same and takes back only its own count"
    )
    func delays() throws {
        let counter = try Counter()
        for _ in 0..<5 { #expect(counter.wrong() == .authFailed) }
        #expect(try counter.count.spent == 5)
        // Too soon: refused with the time it is taken again, and not counted.
        #expect(counter.wrong() == .wait)
        #expect(try counter.count.spent == 5)
        #expect(try counter.count.notBefore != nil)
        #expect(throws: EscrowError.self) { try counter.right() }
        var waited: [TimeInterval] = []
        for _ in 5..<9 {
            var seconds: TimeInterval = 0
            while counter.wrong() == .wait {
                counter.advance(30)
                seconds += 30
            }
            waited.append(seconds)
        }
        #expect(waited == [60, 300, 900, 900])
        #expect(try counter.count.spent == 9)
        // The owner too waits the hour; then the right claim is told 9 and 9 stay spent.
        #expect(throws: EscrowError.self) { try counter.right() }
        counter.advance(3600)
        let released = try counter.right()
        #expect(released.wrongSinceRight == 9 && released.lastWrong != nil)
        #expect(try counter.count.spent == 9)
        #expect(try counter.count.wrongSinceRight == 0)
        print(
            "claims: waits of \(waited) s after the 5th wrong claim; 9 stayed spent after the right one"
        )
    }

    @Test(
        "one spent try comes back a day: an attacker who spent 9 gets one more guess a day, never a fresh allowance; a quiet slot goes back to 0"
    )
    func recovery() throws {
        let counter = try Counter(policy: ClaimPolicy(recovery: 86_400, delays: []))
        for _ in 0..<9 { #expect(counter.wrong() == .authFailed) }
        counter.advance(86_400 - 1)
        #expect(try counter.count.spent == 9)
        counter.advance(1)
        #expect(try counter.count.spent == 8)
        // A day's guess spent again: still one from the end, never more.
        #expect(counter.wrong() == .authFailed)
        #expect(try counter.count.spent == 9)
        counter.advance(9 * 86_400)
        #expect(try counter.count.spent == 0)
        // Ten in a row after all that: the slot is gone.
        for guess in 0..<10 {
            #expect(counter.wrong() == (guess < 9 ? .authFailed : .destroyed))
        }
        #expect(throws: EscrowError.self) { try counter.right() }
    }

    @Test(
        "a service that evaluates under another key than the pinned one — the scalar 1, its own slot's key — is refused on the proof before anything derived from the passcode is sent, and nothing it saw tests a guess"
    )
    func impostorKey() throws {
        let real = try Counter()
        let impostor = try Counter()  // another service: its own keys
        let sent = Mutex<[String]>([])
        for answer in ["scalar one", "another key", "no proof"] {
            let client = EscrowClient { method, path, body throws(EscrowError) in
                sent.withLock { $0.append(path) }
                let fields = try EscrowProtocol.fields(body)
                guard path == EscrowProtocol.Path.claim.rawValue,
                    let blinded = fields[EscrowProtocol.Tag.blinded.rawValue].map({ Data($0) })
                else { return impostor.service.answer(method: method, path: path, body: body) }
                let one = SecureBytes(copying: Data([1] + [UInt8](repeating: 0, count: 31)))
                let (evaluated, proof) =
                    switch answer {
                    case "scalar one":
                        try! OPRF.evaluateWithProof(
                            blinded, key: one, context: "keepsake-escrow v1")
                    case "another key":
                        try! OPRF.evaluateWithProof(
                            blinded, key: OPRF.newKey(), context: "keepsake-escrow v1")
                    default: (blinded, Data(count: OPRF.proofLength))
                    }
                return (
                    200,
                    EscrowProtocol.message([
                        (.evaluated, evaluated), (.proof, proof),
                        (.challenge, Data(count: EscrowProtocol.challengeLength)),
                    ])
                )
            }
            sent.withLock { $0 = [] }
            #expect(throws: EscrowError.self) {
                try client.claim(
                    real.registered.slot, passcodeKey: real.passcodeKey,
                    publicKey: real.registered.publicKey)
            }
            do throws(EscrowError) {
                _ = try client.claim(
                    real.registered.slot, passcodeKey: real.passcodeKey,
                    publicKey: real.registered.publicKey)
            } catch { #expect(error.code == .notTheService, "\(answer)") }
            // Only the blinded element went out: uniformly random, whatever the passcode.
            #expect(!sent.withLock { $0 }.contains(EscrowProtocol.Path.finishClaim.rawValue))
        }
        // The real service's answer verifies under the pinned key.
        #expect(try real.right().wrongSinceRight == 0)
    }

    @Test("a proof checks only for the evaluation it was made for, under its own key")
    func proofs() throws {
        let key = OPRF.newKey()
        let publicKey = OPRF.publicKey(key)
        let blinded = OPRF.blind(SecureBytes(randomCount: 32), context: "t").blinded
        let (evaluated, proof) = try OPRF.evaluateWithProof(blinded, key: key, context: "t")
        #expect(
            OPRF.verify(
                proof: proof, publicKey: publicKey, blinded: blinded, evaluated: evaluated,
                context: "t"))
        let other = OPRF.blind(SecureBytes(randomCount: 32), context: "t").blinded
        let cases: [(Data, Data, Data, Data, String)] = [
            (proof, OPRF.publicKey(OPRF.newKey()), blinded, evaluated, "t"),
            (proof, publicKey, other, evaluated, "t"),
            (proof, publicKey, blinded, other, "t"),
            (proof, publicKey, blinded, evaluated, "u"),
            (Data(proof.reversed()), publicKey, blinded, evaluated, "t"),
            (Data(count: OPRF.proofLength), publicKey, blinded, evaluated, "t"),
            (Data(repeating: 0xFF, count: OPRF.proofLength), publicKey, blinded, evaluated, "t"),
        ]
        for (proof, key, blinded, evaluated, context) in cases {
            #expect(
                !OPRF.verify(
                    proof: proof, publicKey: key, blinded: blinded, evaluated: evaluated,
                    context: context))
        }
        for index in 0..<proof.count {
            var flipped = proof
            flipped[index] ^= 0x01
            #expect(
                !OPRF.verify(
                    proof: flipped, publicKey: publicKey, blinded: blinded, evaluated: evaluated,
                    context: "t"))
        }
    }
}
