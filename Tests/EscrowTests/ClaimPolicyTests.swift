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

/// The wall clock and the boot clock, as the test sets them.
private final class Clock: Sendable {
    let wall = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    let boot = Mutex(BootInstant(boot: Data("boot-1".utf8), milliseconds: 1000))

    var escrowClock: EscrowClock {
        EscrowClock(wall: { self.wall.withLock { $0 } }, boot: { self.boot.withLock { $0 } })
    }

    /// Time passes: both clocks move.
    func advance(_ seconds: TimeInterval) {
        wall.withLock { $0 += seconds }
        boot.withLock { $0.milliseconds += Int64(seconds * 1000) }
    }

    /// Root moves the wall clock; the boot clock does not move.
    func moveWallClock(_ seconds: TimeInterval) { wall.withLock { $0 += seconds } }

    func reboot() {
        boot.withLock { $0 = BootInstant(boot: Data(UUID().uuidString.utf8), milliseconds: 500) }
    }
}

/// An escrow service on a clock the test sets, and clients that talk to it as local users.
private final class Counter: Sendable {
    let clock: Clock
    let service: EscrowService
    let storage = MemorySlots()
    let passcodeKey = SecureBytes(randomCount: 32)
    let reader = Signature.keyPair(seed: SecureBytes(randomCount: 32))
    let registered: EscrowClient.Registered
    /// The uid the counter's socket would give for this test's device.
    static let owner = EscrowCaller.user(1000)

    init(policy: ClaimPolicy = .real, caller: EscrowCaller = Counter.owner) throws {
        let clock = Clock()
        service = EscrowService(
            storage: storage, counter: "memory", policy: policy, clock: clock.escrowClock)
        self.clock = clock
        registered = try Self.client(service, caller).register(
            SecureBytes(randomCount: 32), passcodeKey: passcodeKey,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: reader.publicKey)
    }

    static func client(_ service: EscrowService, _ caller: EscrowCaller = owner) -> EscrowClient {
        EscrowClient { method, path, body throws(EscrowError) in
            service.answer(method: method, path: path, body: body, caller: caller)
        }
    }

    func client(as caller: EscrowCaller = owner) -> EscrowClient { Self.client(service, caller) }

    func advance(_ seconds: TimeInterval) { clock.advance(seconds) }

    /// One wrong claim on `slot` (the first slot by default): its error code.
    func wrong(_ slot: EscrowClient.Registered? = nil, as caller: EscrowCaller = owner)
        -> EscrowError.Code?
    {
        let slot = slot ?? registered
        do throws(EscrowError) {
            _ = try client(as: caller).claim(
                slot.slot, passcodeKey: SecureBytes(randomCount: 32), publicKey: slot.publicKey)
            return nil
        } catch { return error.code }
    }

    /// A right claim, its report not acknowledged.
    func right() throws(EscrowError) -> EscrowClient.Released {
        try client().claim(
            registered.slot, passcodeKey: passcodeKey, publicKey: registered.publicKey)
    }

    /// A right claim whose report is shown and acknowledged.
    func rightAndAcknowledged() throws(EscrowError) -> EscrowClient.Released {
        let released = try right()
        try client().acknowledge(registered.slot, released)
        return released
    }

    /// Another slot of the same caller (a new registration, a passcode change, a pin-less record).
    func register(as caller: EscrowCaller = owner) throws(EscrowError) -> EscrowClient.Registered {
        try client(as: caller).register(
            SecureBytes(randomCount: 32), passcodeKey: passcodeKey,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: reader.publicKey)
    }

    var count: EscrowClient.Count {
        get throws { try #require(try client().count(of: registered.slot, reader: reader).count) }
    }
}

@Suite(
    "How wrong claims are spent: the caller's budget, never refunded by time, back only through an acknowledged report; delays on the boot clock"
)
struct ClaimPolicyTests {
    @Test(
        "the first 5 wrong claims come at once; the 6th waits a minute (refused with the time, not counted), then 5 min, 15 min, 15 min, 1 hour; a right claim reports 9, and only its acknowledgement gives them back"
    )
    func delays() throws {
        let counter = try Counter()
        for _ in 0..<5 { #expect(counter.wrong() == .authFailed) }
        #expect(try counter.count.spent == 5)
        // Too soon: refused with the time it is taken again, and not counted.
        do throws(EscrowError) {
            _ = try counter.client().claim(
                counter.registered.slot, passcodeKey: SecureBytes(randomCount: 32),
                publicKey: counter.registered.publicKey)
            Issue.record("a claim too soon was taken")
        } catch {
            #expect(error.code == .wait)
            #expect(error.message.contains("the next claim is taken after 20"))
        }
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
        // The owner too waits the hour; then the right claim reports 9, first and last.
        #expect(throws: EscrowError.self) { try counter.right() }
        counter.advance(3600)
        let released = try counter.right()
        #expect(released.wrongSinceRight == 9 && released.lastWrong != nil)
        #expect(released.firstWrong != nil && released.firstWrong! < released.lastWrong!)
        // Not acknowledged (the process died before it showed it): still spent, reported again.
        #expect(try counter.count.spent == 9)
        let again = try counter.rightAndAcknowledged()
        #expect(again.wrongSinceRight == 9)
        #expect(try counter.count.spent == 0 && counter.count.wrongSinceRight == 0)
        print(
            "claims: waits of \(waited) s after the 5th wrong claim; 9 reported twice until acknowledged"
        )
    }

    @Test(
        "no refund by time: 9 wrong claims stay 9 after a year on both clocks, and the 10th destroys the slot; a wrong claim made with the wall clock a year ahead does not lock the owner out past its delay"
    )
    func noRefundByTime() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        for _ in 0..<9 { #expect(counter.wrong() == .authFailed) }
        counter.advance(365 * 86_400)
        #expect(try counter.count.spent == 9)
        counter.clock.moveWallClock(5 * 365 * 86_400)
        counter.clock.reboot()
        #expect(try counter.count.spent == 9)
        #expect(counter.wrong() == .destroyed)
        #expect(throws: EscrowError.self) { try counter.right() }

        // Root moves the clock a year ahead, makes 5 wrong claims (the 6th would wait a minute),
        // then sets it right and reboots: the owner waits at most the minute, never a year.
        let owner = try Counter()
        owner.clock.moveWallClock(365 * 86_400)
        for _ in 0..<5 { #expect(owner.wrong() == .authFailed) }
        owner.clock.moveWallClock(-365 * 86_400)
        owner.clock.reboot()
        let notBefore = try #require(try owner.count.notBefore)
        #expect(notBefore.timeIntervalSince(owner.clock.wall.withLock { $0 }) <= 60)
        owner.advance(60)
        #expect(try owner.rightAndAcknowledged().wrongSinceRight == 5)
    }

    @Test(
        "delays run on the boot clock: moving the wall clock a day ahead within a boot skips no delay"
    )
    func delaysOnTheBootClock() throws {
        let counter = try Counter()
        for _ in 0..<5 { #expect(counter.wrong() == .authFailed) }
        counter.clock.moveWallClock(86_400)
        #expect(counter.wrong() == .wait)
        counter.advance(60)
        #expect(counter.wrong() == .authFailed)
    }

    @Test(
        "the budget is the caller's: a new slot (a re-registration, a passcode change, a pin-less record) and a removed one give nothing back; at 10 every slot of the caller is destroyed; another user neither sees the slot nor shares the count"
    )
    func budgetPerCaller() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        for _ in 0..<4 { #expect(counter.wrong() == .authFailed) }
        // A new slot of the same user starts where the user stands.
        let second = try counter.register()
        for _ in 0..<3 { #expect(counter.wrong(second) == .authFailed) }
        #expect(try counter.count.spent == 7)
        // Removing the first slot (as its reader) gives nothing back.
        try counter.client().remove(counter.registered.slot, reader: counter.reader)
        let third = try counter.register()
        #expect(
            try counter.client().count(of: third.slot, reader: counter.reader).count?.spent == 7)
        // Another local user: no such slot, and a budget of its own.
        let stranger = EscrowCaller.user(12345)
        #expect(counter.wrong(third, as: stranger) == .notFound)
        #expect(throws: EscrowError.self) {
            try counter.client(as: stranger).count(of: third.slot, reader: counter.reader)
        }
        let strangers = try counter.register(as: stranger)
        #expect(
            try counter.client(as: stranger).count(of: strangers.slot, reader: counter.reader)
                .count?.spent == 0)
        // Three more on the third slot: the 10th destroys every slot of the user's.
        #expect(counter.wrong(third) == .authFailed)
        #expect(counter.wrong(third) == .authFailed)
        #expect(counter.wrong(third) == .destroyed)
        #expect(counter.wrong(second) == .destroyed)
        // The stranger's slot lives on.
        #expect(counter.wrong(strangers, as: stranger) == .authFailed)
        print("budget per caller: 4 + 3 + 3 wrong claims on three slots of one user, then all gone")
    }

    @Test(
        "a report clears only what it showed: a wrong claim made between a right claim and its acknowledgement stays spent and is reported next"
    )
    func reportClearsWhatItShowed() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        for _ in 0..<3 { #expect(counter.wrong() == .authFailed) }
        let released = try counter.right()
        #expect(released.wrongSinceRight == 3)
        #expect(counter.wrong() == .authFailed)
        try counter.client().acknowledge(counter.registered.slot, released)
        #expect(try counter.count.spent == 1)
        // A token is taken once, and only by its own slot's claimer.
        #expect(throws: EscrowError.self) {
            try counter.client().acknowledge(counter.registered.slot, released)
        }
        #expect(try counter.count.spent == 1)
        #expect(try counter.rightAndAcknowledged().wrongSinceRight == 1)
        #expect(try counter.count.spent == 0)
    }

    @Test(
        "one user's registrations in a loop retire only that user's least recently used slots: the table does not grow, another user's slot stays"
    )
    func registrationFlood() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        let stranger = EscrowCaller.user(4242)
        let before = counter.storage.count()
        var made: [EscrowClient.Registered] = []
        for _ in 0..<40 { made.append(try counter.register(as: stranger)) }
        #expect(counter.storage.count() <= before + CallerBudget.maximumSlots + 1)
        // The owner's slot answers; the stranger's first ones are gone, its last ones live.
        #expect(try counter.rightAndAcknowledged().wrongSinceRight == 0)
        #expect(counter.wrong(made[0], as: stranger) == .notFound)
        #expect(counter.wrong(made[39], as: stranger) == .authFailed)
    }

    @Test(
        "at the account's escrow a re-registration joins the earlier slot's budget only when signed by its reader key"
    )
    func networkInherit() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []), caller: .network)
        for _ in 0..<4 { #expect(counter.wrong(as: .network) == .authFailed) }
        let client = counter.client(as: .network)
        let joined = try client.register(
            SecureBytes(randomCount: 32), passcodeKey: counter.passcodeKey,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: counter.reader.publicKey,
            inherit: (counter.registered.slot, counter.reader.secretKey))
        #expect(try client.count(of: joined.slot, reader: counter.reader).count?.spent == 4)
        // Signed by another key: refused, nothing registered into the budget.
        let forger = Signature.keyPair(seed: SecureBytes(randomCount: 32))
        do throws(EscrowError) {
            _ = try client.register(
                SecureBytes(randomCount: 32), passcodeKey: counter.passcodeKey,
                salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
                reader: forger.publicKey, inherit: (counter.registered.slot, forger.secretKey))
            Issue.record("a forged inherit was taken")
        } catch { #expect(error.code == .authFailed) }
        // A registration naming no earlier slot has a budget of its own.
        let fresh = try client.register(
            SecureBytes(randomCount: 32), passcodeKey: counter.passcodeKey,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: counter.reader.publicKey)
        #expect(try client.count(of: fresh.slot, reader: counter.reader).count?.spent == 0)
    }

    @Test(
        "a slot the caller registered with a passcode of its own gives back only its own wrong claims: guesses at the owner's slot stay spent and are reported at the owner's right claim; 10 in all destroy"
    )
    func ownSlotRefundsOnlyItself() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        for _ in 0..<4 { #expect(counter.wrong() == .authFailed) }
        // Another process of the user: a slot with a passcode it knows, claimed right and
        // acknowledged, again and again.
        let mine = SecureBytes(randomCount: 32)
        let own = try counter.client().register(
            SecureBytes(randomCount: 32), passcodeKey: mine,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: counter.reader.publicKey)
        for _ in 0..<3 {
            let released = try counter.client().claim(
                own.slot, passcodeKey: mine, publicKey: own.publicKey)
            #expect(released.wrongSinceRight == 0)
            try counter.client().acknowledge(own.slot, released)
        }
        #expect(try counter.count.spent == 4)
        // Signed by the reader key (which any process of the user derives): no succession on
        // the socket, so removing the owner's slot would move nothing to its own.
        for _ in 0..<5 { #expect(counter.wrong() == .authFailed) }
        #expect(counter.wrong() == .destroyed)
        #expect(throws: EscrowError.self) { try counter.right() }
    }

    @Test(
        "a passcode change's new slot succeeds the old one with the right claim's report: wrong claims on the old slot after the report go to the new one when it is removed, and are reported there"
    )
    func succession() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        #expect(counter.wrong() == .authFailed)
        let released = try counter.right()
        #expect(released.wrongSinceRight == 1)
        let next = SecureBytes(randomCount: 32)
        let successor = try counter.client().register(
            SecureBytes(randomCount: 32), passcodeKey: next,
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: counter.reader.publicKey,
            succeeding: (counter.registered.slot, try #require(released.report)))
        try counter.client().acknowledge(counter.registered.slot, released)
        // A guess at the old slot between the change and its removal.
        #expect(counter.wrong() == .authFailed)
        try counter.client().remove(counter.registered.slot, reader: counter.reader)
        let report = try counter.client().claim(
            successor.slot, passcodeKey: next, publicKey: successor.publicKey)
        #expect(report.wrongSinceRight == 1)
        try counter.client().acknowledge(successor.slot, report)
        #expect(
            try counter.client().count(of: successor.slot, reader: counter.reader).count?.spent
                == 0)
    }

    @Test(
        "a local user's slots destroyed at the limit leave no record each: a loop of exhausted slots does not grow the table, and a destroyed slot still answers destroyed"
    )
    func exhaustionLeavesNoTombstones() throws {
        let counter = try Counter(policy: ClaimPolicy(delays: []))
        let stranger = EscrowCaller.user(4343)
        let before = counter.storage.count()
        var last: EscrowClient.Registered?
        for _ in 0..<20 {
            let slot = try counter.client(as: stranger).register(
                SecureBytes(randomCount: 32), passcodeKey: SecureBytes(randomCount: 32),
                salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 1,
                reader: counter.reader.publicKey)
            #expect(counter.wrong(slot, as: stranger) == .destroyed)
            last = slot
        }
        #expect(counter.storage.count() <= before + 2)
        #expect(counter.wrong(try #require(last), as: stranger) == .destroyed)
    }

    @Test(
        "where the boot ID cannot be read (a service that does not see /proc/sys), a boot clock that went back is a reboot: the delay runs at most its length"
    )
    func unknownBootID() throws {
        let counter = try Counter()
        counter.clock.boot.withLock {
            $0 = BootInstant(boot: Data("unknown boot".utf8), milliseconds: 30 * 86_400_000)
        }
        for _ in 0..<5 { #expect(counter.wrong() == .authFailed) }
        // Rebooted: the same unreadable ID, the boot clock near 0.
        counter.clock.boot.withLock {
            $0 = BootInstant(boot: Data("unknown boot".utf8), milliseconds: 1000)
        }
        let notBefore = try #require(try counter.count.notBefore)
        #expect(notBefore.timeIntervalSince(counter.clock.wall.withLock { $0 }) <= 60)
        counter.advance(60)
        #expect(try counter.rightAndAcknowledged().wrongSinceRight == 5)
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
