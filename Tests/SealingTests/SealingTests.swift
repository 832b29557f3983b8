import Foundation
import KeepsakeTestSupport
import Synchronization
import Testing

@testable import Sealing

struct EnvelopeVector: Decodable, Sendable, CustomTestStringConvertible {
    var name: String
    var key: String
    var nonce: String
    var associatedData: String
    var plaintext: String
    var envelope: String
    var testDescription: String { name }
}
struct MalformedCase: Decodable, Sendable, CustomTestStringConvertible {
    var name: String
    var envelope: String
    var error: String
    var testDescription: String { name }
}
struct EnvelopeFile: Decodable {
    struct Malformed: Decodable {
        var key: String
        var associatedData: String
        var cases: [MalformedCase]
    }
    var vectors: [EnvelopeVector]
    var malformed: Malformed
}
struct Argon2Vector: Decodable, Sendable {
    var passcode: String
    var salt: String
    var operations: UInt64
    var memoryBytes: Int
    var key: String
}
struct Argon2File: Decodable { var vectors: [Argon2Vector] }

let envelopes = try! loadFixture(EnvelopeFile.self, "sealing/envelopes.json")
let argon2 = try! loadFixture(Argon2File.self, "sealing/argon2id.json")

@Suite("Sealing: envelopes, Argon2id, owned key memory")
struct SealingTests {
    @Test(
        "sealing a vector with its nonce gives its envelope byte for byte",
        arguments: envelopes.vectors)
    func sealVector(_ v: EnvelopeVector) {
        let sealed = Envelope.seal(
            fromHex(v.plaintext), key: SecureBytes(copying: fromHex(v.key)),
            associatedData: fromHex(v.associatedData), nonce: Array(fromHex(v.nonce)))
        #expect(hex(sealed) == v.envelope)
    }

    @Test("opening a vector's envelope gives its plaintext", arguments: envelopes.vectors)
    func openVector(_ v: EnvelopeVector) throws {
        let opened = try Envelope.open(
            fromHex(v.envelope), key: SecureBytes(copying: fromHex(v.key)),
            associatedData: fromHex(v.associatedData))
        #expect(opened.unsafeData() == fromHex(v.plaintext))
    }

    @Test("malformed envelopes fail with the matching error", arguments: envelopes.malformed.cases)
    func malformed(_ c: MalformedCase) {
        let key = SecureBytes(copying: fromHex(envelopes.malformed.key))
        let expected: SealingError.Code =
            switch c.error {
            case "malformed": .malformed
            case "unknownVersion": .unknownVersion
            default: .authentication
            }
        #expect(throws: SealingError(expected)) {
            try Envelope.open(
                fromHex(c.envelope), key: key,
                associatedData: fromHex(envelopes.malformed.associatedData))
        }
    }

    @Test(
        "every single-bit flip at every byte position of every vector is refused",
        arguments: envelopes.vectors)
    func everyBitFlip(_ v: EnvelopeVector) {
        let key = SecureBytes(copying: fromHex(v.key))
        let envelope = fromHex(v.envelope)
        let ad = fromHex(v.associatedData)
        var refused = 0
        for flipped in Tampered.singleBitFlips(of: envelope) {
            if (try? Envelope.open(flipped, key: key, associatedData: ad)) == nil { refused += 1 }
        }
        #expect(refused == envelope.count * 8)
        print(
            "tamper: envelope vector \"\(v.name)\", \(refused) of \(envelope.count * 8) single-bit flips refused"
        )
    }

    @Test("an envelope opens only with its own key and associated data")
    func bindings() throws {
        let key = SecureBytes(randomCount: Envelope.keyLength)
        let sealed = Envelope.seal(
            Data("secret".utf8), key: key, associatedData: Data("item A".utf8))
        #expect(throws: SealingError(.authentication)) {
            try Envelope.open(sealed, key: key, associatedData: Data("item B".utf8))
        }
        #expect(throws: SealingError(.authentication)) {
            try Envelope.open(
                sealed, key: SecureBytes(randomCount: Envelope.keyLength),
                associatedData: Data("item A".utf8))
        }
        #expect(
            try Envelope.open(sealed, key: key, associatedData: Data("item A".utf8)).unsafeData()
                == Data("secret".utf8))
        // Fresh nonces: sealing twice never gives the same bytes.
        #expect(
            Envelope.seal(Data("x".utf8), key: key, associatedData: Data())
                != Envelope.seal(Data("x".utf8), key: key, associatedData: Data()))
    }

    @Test("Argon2id matches an independent implementation", arguments: argon2.vectors.indices)
    func argon2id(_ index: Int) throws {
        let v = argon2.vectors[index]
        let key = try KeyDerivation.argon2id(
            passcode: SecureBytes(copying: fromHex(v.passcode)), salt: fromHex(v.salt),
            cost: Argon2Cost(operations: v.operations, memoryBytes: v.memoryBytes))
        #expect(hex(key.unsafeData()) == v.key)
    }

    @Test("a fixture table that is missing, undecodable or empty fails instead of running no case")
    func fixtureTablesFailLoudly() throws {
        struct Table: Decodable { var vectors: [String] }
        #expect(throws: (any Error).self) {
            try fixtureTable(Table.self, "no/such/fixture.json", \.vectors)
        }
        #expect(throws: (any Error).self) {  // decodes, but has no `vectors`
            try fixtureTable(Table.self, "hint/json.json", \.vectors)
        }
        struct Cases: Decodable { var cases: [HintCase] }
        struct HintCase: Decodable {}
        #expect(throws: FixtureError.self) {  // decodes, but fewer cases than the table needs
            try fixtureTable(Cases.self, "hint/json.json", \.cases, atLeast: 100_000)
        }
        #expect(try fixtureTable(Cases.self, "hint/json.json", \.cases).count > 0)
    }

    #if KEEPSAKE_TEST_HOOKS
        @Test("released key buffers are wiped before they are freed")
        func wipedOnRelease() {
            let seen = Mutex<[[UInt8]]>([])
            SecureBytes.releaseObserver.withLock {
                $0 = { buffer in seen.withLock { $0.append(Array(buffer)) } }
            }
            defer { SecureBytes.releaseObserver.withLock { $0 = nil } }
            do {
                let key = SecureBytes(copying: Data(repeating: 0xA5, count: 32))
                #expect(key.unsafeData() == Data(repeating: 0xA5, count: 32))
            }
            let released = seen.withLock { $0 }.filter { $0.count == 32 }
            #expect(!released.isEmpty)
            #expect(released.allSatisfy { $0.allSatisfy { $0 == 0 } })
        }
    #endif

    @Test("owned key memory compares in constant time by content")
    func secureBytes() {
        let a = SecureBytes(copying: Data([1, 2, 3]))
        #expect(a == SecureBytes(copying: Data([1, 2, 3])))
        #expect(a != SecureBytes(copying: Data([1, 2, 4])))
        #expect(a != SecureBytes(copying: Data([1, 2])))
        #expect(constantTimeEquals(Data([9, 9]), [UInt8(9), 9]))
        #expect(SecureBytes(randomCount: 32) != SecureBytes(randomCount: 32))
    }
}
