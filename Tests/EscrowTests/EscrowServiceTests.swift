import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Synchronization
import Testing

@testable import CloudAccount
@testable import Device
@testable import Escrow

/// An account with a phone that set a pin: its escrow (a real `keepsake-escrow` on loopback), the
/// slot the cloud names, and the phone's account key.
private struct Account {
    let cloud: URL
    let service: PrivateSecretService
    let phone: CloudAccount
    let escrow: PrivateEscrow
    let slot: Data
    let accountKey: SecureBytes

    init(pin: SecureBytes = "4711") throws {
        cloud = Throwaway.untrusted("cloud")
        service = try PrivateSecretService.start()
        phone = service.account("phone", cloud: cloud)
        try phone.setLockScreen(.pin, passcode: pin, currentPasscode: nil)
        escrow = try PrivateEscrow.of(cloud)
        let bytes = try #require(try CloudDirectory(cloud).read("account-escrow"))
        let record = try #require(EscrowRecord.parse(bytes))
        slot = record.slot
        accountKey = try #require(try phone.keys.cloudKey(forUpload: false))
    }

    /// A new device of its own, signed in to the same account.
    func newcomer(escrow configuration: EscrowConfiguration? = nil) throws -> (
        PrivateSecretService, CloudAccount
    ) {
        let other = try PrivateSecretService.start()
        let device = other.account(
            "newcomer", cloud: CloudDirectory(cloud), escrow: configuration ?? escrow.configuration,
            tuning: .fast)
        return (other, device)
    }

    /// One raw request, as any client of the escrow may send it.
    func send(_ path: EscrowProtocol.Path, _ fields: [(EscrowProtocol.Tag, Data)]) throws -> (
        status: Int, fields: TLV.Fields?
    ) {
        let (status, body) = try escrow.configuration.transport()(
            "POST", path.rawValue, EscrowProtocol.message(fields))
        return (status, try? EscrowProtocol.fields(body))
    }

    /// The slot's count, read as its reader (the account key's reader key).
    var failures: Int {
        get throws {
            try #require(
                try escrow.configuration.client().count(
                    of: slot, reader: EscrowProtocol.reader(secret: accountKey)
                ).count
            ).spent
        }
    }
}

/// A random valid group element: what a claim of an unknown guess looks like.
private func randomElement() -> Data {
    OPRF.blind(SecureBytes(randomCount: 32), context: "attacker").blinded
}

@Suite("The escrow service, attacked from outside: a client, a relay, the cloud")
struct EscrowServiceTests {
    @Test(
        "a plain-HTTP address is taken at 127.0.0.1 only: localhost (which may resolve to ::1 first) and ::1, where the service does not listen and any other process may, are refused, as is any other host"
    )
    func plainHTTPAddresses() {
        for refused in [
            "http://localhost:8443/", "http://[::1]:8443/", "http://LOCALHOST:8443/",
            "http://127.0.0.2:8443/", "http://escrow.example/", "ftp://127.0.0.1/",
        ] {
            #expect(EscrowConfiguration(url: URL(string: refused)!) == nil, "\(refused)")
        }
        #expect(EscrowConfiguration(url: URL(string: "http://127.0.0.1:8443/")!) != nil)
        #expect(EscrowConfiguration(url: URL(string: "https://escrow.example/")!) != nil)
    }

    @Test(
        "every claim is counted before it is answered: 10 claims that never prove anything destroy the slot, and the right passcode then gets nothing"
    )
    func claimsWithoutProofAreCounted() throws {
        let account = try Account()
        for n in 1...10 {
            let (status, fields) = try account.send(
                .claim, [(.slot, account.slot), (.blinded, randomElement())])
            #expect(status == 200)
            // The answer tells the claimer nothing of the count; the slot's reader is told.
            #expect(fields?[EscrowProtocol.Tag.failures.rawValue] == nil)
            #expect(try account.failures == n)
        }
        let (status, _) = try account.send(
            .claim, [(.slot, account.slot), (.blinded, randomElement())])
        #expect(status == 410)
        let (otherService, newcomer) = try account.newcomer()
        defer { withExtendedLifetime(otherService) {} }
        #expect(throws: DeviceError.self) { try newcomer.join(passcode: "4711") }
        #expect(try CloudDirectory(account.cloud).read("account-escrow") == nil)
    }

    @Test(
        "a right claim takes back only its own count (wrong ones stay spent); a replayed proof, a replayed claim or a proof for another key gets nothing"
    )
    func replays() throws {
        let account = try Account()
        let status = try account.escrow.configuration.client().status(of: account.slot)
        let passcodeKey = try PasscodeKeys.passcodeKey("4711", salt: status.salt, cost: status.cost)
        // Two wrong claims first (counted), then the right one speaks the protocol by hand.
        for _ in 0..<2 {
            _ = try account.send(.claim, [(.slot, account.slot), (.blinded, randomElement())])
        }
        #expect(try account.failures == 2)
        let (blind, blinded) = OPRF.blind(passcodeKey, context: EscrowProtocol.context)
        let claim = try #require(
            try account.send(.claim, [(.slot, account.slot), (.blinded, blinded)]).fields)
        let challenge = try claim.exactly(.challenge, 32)
        let output = try OPRF.finalize(
            passcodeKey, blind: blind, evaluated: try claim.exactly(.evaluated, 32),
            context: EscrowProtocol.context)
        let signer = Signature.keyPair(
            seed: KeyDerivation.keyedHash(
                key: output, context: "keepsake-escrow verifier", account.slot))
        let box = SealedBox.keyPair()
        let proof = EscrowProtocol.claimProof(
            slot: account.slot, challenge: challenge, boxKey: box.publicKey)
        let finish: [(EscrowProtocol.Tag, Data)] = [
            (.slot, account.slot), (.challenge, challenge), (.boxKey, box.publicKey),
            (.signature, Signature.sign(proof, secretKey: signer.secretKey)),
        ]
        // A relay that swaps in its own key to have the secret sealed to it: the signature covers
        // the key, so the proof no longer verifies — and the challenge is spent.
        var swapped = finish
        swapped[2] = (.boxKey, SealedBox.keyPair().publicKey)
        #expect(try account.send(.finishClaim, swapped).status == 403)
        #expect(try account.send(.finishClaim, finish).status == 409)
        // A fresh claim with the right proof: released; it takes back its own count only (the
        // two wrong claims and the claim whose proof a relay spoilt stay spent).
        let again = try #require(
            try account.send(.claim, [(.slot, account.slot), (.blinded, blinded)]).fields)
        let challenge2 = try again.exactly(.challenge, 32)
        let proof2 = EscrowProtocol.claimProof(
            slot: account.slot, challenge: challenge2, boxKey: box.publicKey)
        let finish2: [(EscrowProtocol.Tag, Data)] = [
            (.slot, account.slot), (.challenge, challenge2), (.boxKey, box.publicKey),
            (.signature, Signature.sign(proof2, secretKey: signer.secretKey)),
        ]
        let released = try account.send(.finishClaim, finish2)
        #expect(released.status == 200)
        #expect(try account.failures == 3)
        // Replaying the same proof: the challenge is spent.
        #expect(try account.send(.finishClaim, finish2).status == 409)
        // Replaying the claim itself: a new claim, counted, and its answer is useless without the
        // blind's owner proving again.
        #expect(
            try account.send(.claim, [(.slot, account.slot), (.blinded, blinded)]).status == 200)
        #expect(try account.failures == 4)
    }

    @Test(
        "removing a slot needs the owner's signature (a key derived from the secret it holds, here the account key): the cloud, a client or a replayed removal cannot"
    )
    func removal() throws {
        let account = try Account()
        let challenge = try #require(
            try account.send(.challenge, [(.slot, account.slot)]).fields?.exactly(.challenge, 32))
        let stranger = Signature.keyPair(seed: SecureBytes(randomCount: 32))
        let forged = Signature.sign(
            EscrowProtocol.removalProof(slot: account.slot, challenge: challenge),
            secretKey: stranger.secretKey)
        #expect(
            try account.send(
                .remove, [(.slot, account.slot), (.challenge, challenge), (.signature, forged)]
            ).status == 403)
        // A removal without a fresh challenge.
        #expect(
            try account.send(
                .remove,
                [
                    (.slot, account.slot), (.challenge, Data(count: 32)),
                    (.signature, Data(count: 64)),
                ]
            ).status == 409)
        // The slot stands: the right passcode still joins.
        let (otherService, newcomer) = try account.newcomer()
        defer { withExtendedLifetime(otherService) {} }
        try newcomer.join(passcode: "4711")
        #expect(try newcomer.keys.cloudKey(forUpload: false) == account.accountKey)
        // The owner removes it.
        try account.escrow.configuration.client().remove(account.slot, secret: account.accountKey)
        #expect(throws: EscrowError.self) { try account.failures }
    }

    @Test(
        "bad input is refused before anything is counted: not a group element, the identity, wrong lengths, unknown fields, oversized or chunked bodies, unknown paths"
    )
    func malformedInput() throws {
        let account = try Account()
        let bad: [Data] = [
            Data(count: 32),  // the identity
            Data(repeating: 0xFF, count: 32),  // not canonical
            Data(repeating: 1, count: 31), Data(repeating: 1, count: 33),
        ]
        for element in bad {
            #expect(
                try account.send(.claim, [(.slot, account.slot), (.blinded, element)]).status
                    == 400)
        }
        // An unknown field, a message that is not one.
        var unknown = TLV(magic: EscrowProtocol.magic)
        unknown.append(1, account.slot)
        unknown.append(30, Data([1]))
        let transport = account.escrow.configuration.transport()
        #expect(try transport("POST", "/v1/claim", unknown.bytes).status == 400)
        #expect(try transport("POST", "/v1/claim", Data("{\"slot\":1}".utf8)).status == 400)
        #expect(try transport("POST", "/v1/nothing", Data()).status == 404)
        #expect(try transport("GET", "/v1/claim", Data()).status == 400)
        // Over the HTTP bounds: a body over 4 KiB, a chunked body, a head over 8 KiB.
        let port = try #require(account.escrow.url.port)
        #expect(
            try rawHTTP(port, "POST /v1/claim HTTP/1.1\r\nContent-Length: 5000\r\n\r\n").hasPrefix(
                "HTTP/1.1 413"))
        #expect(
            try rawHTTP(port, "POST /v1/claim HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
                .hasPrefix("HTTP/1.1 411"))
        #expect(
            try rawHTTP(
                port, "POST /v1/claim HTTP/1.1\r\nX: \(String(repeating: "a", count: 9000))\r\n\r\n"
            ).hasPrefix("HTTP/1.1 400"))
        #expect(try account.failures == 0)
    }

    @Test(
        "a claim's count is on disk before its answer leaves: the escrow killed (SIGKILL) right after answering, or while a claim is in flight, never forgets an answered claim"
    )
    func countsSurviveKills() throws {
        let account = try Account()
        var answered = 0
        var escrow = account.escrow
        let state = escrow.stateDirectory
        for round in 0..<12 {
            let configuration = escrow.configuration
            // Half the rounds kill at once after the answer; half while the claim is in flight.
            if round.isMultiple(of: 2) {
                let (status, _) = try configuration.transport()(
                    "POST", "/v1/claim",
                    EscrowProtocol.message([(.slot, account.slot), (.blinded, randomElement())]))
                if status == 200 { answered += 1 }
                escrow.stop()
            } else {
                let result = Mutex<Int?>(nil)
                let thread = Thread {
                    let status = try? configuration.transport()(
                        "POST", "/v1/claim",
                        EscrowProtocol.message([(.slot, account.slot), (.blinded, randomElement())])
                    ).status
                    result.withLock { $0 = status ?? -1 }
                }
                thread.start()
                usleep(UInt32.random(in: 0...3000))
                escrow.stop()
                while result.withLock({ $0 }) == nil { usleep(1000) }
                if result.withLock({ $0 }) == 200 { answered += 1 }
            }
            escrow = try PrivateEscrow(stateDirectory: state, tpm: escrow.tpm)
            let failures = try #require(
                try escrow.configuration.client().count(
                    of: account.slot, reader: EscrowProtocol.reader(secret: account.accountKey)
                ).count
            ).spent
            #expect(failures >= answered, "round \(round)")
            #expect(failures <= round + 1)
            if answered >= 9 { break }
        }
        print(
            "escrow killed \(12) times around claims: every answered claim stayed counted (\(answered) answered)"
        )
    }

    @Test(
        "a recording of every byte between a device and the escrow — registration and a join — holds no account key, passcode or passcode key"
    )
    func captureHoldsNothing() throws {
        let cloud = Throwaway.untrusted("cloud")
        let escrow = try PrivateEscrow.of(cloud)
        let relay = try RecordingRelay(to: UInt16(try #require(escrow.url.port)))
        let through = try #require(
            EscrowConfiguration(url: URL(string: "http://127.0.0.1:\(relay.port)/")!))
        let service = try PrivateSecretService.start()
        let phone = service.account(
            "phone", cloud: CloudDirectory(cloud), escrow: through, tuning: .fast)
        defer { try? phone.device.reboot() }  // its runtime keyring goes with the test
        // Pins of 20 digits: the capture holds none of their 8-byte windows by chance
        // (docs/testing.md, "Checks that could pass or fail by chance").
        try phone.setLockScreen(.pin, passcode: "27182818284590452353", currentPasscode: nil)
        let accountKey = try #require(try phone.keys.cloudKey(forUpload: false))
        let other = try PrivateSecretService.start()
        let laptop = other.account(
            "laptop", cloud: CloudDirectory(cloud), escrow: through, tuning: .fast)
        defer { try? laptop.device.reboot() }
        #expect(throws: DeviceError.self) {
            try laptop.join(passcode: "31415926535897932384")
        }
        try laptop.join(passcode: "27182818284590452353")
        #expect(try laptop.keys.cloudKey(forUpload: false) == accountKey)
        let capture = relay.capture
        #expect(capture.count > 1000)
        let bytes = try #require(try CloudDirectory(cloud).read("account-escrow"))
        let slot = try #require(EscrowRecord.parse(bytes))
        let status = try escrow.configuration.client().status(of: slot.slot)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "27182818284590452353", salt: status.salt, cost: status.cost)
        let secrets: [(String, Data)] = [
            ("account key", accountKey.unsafeData()), ("passcode key", passcodeKey.unsafeData()),
            ("passcode", Data("27182818284590452353".utf8)),
            ("wrong passcode", Data("31415926535897932384".utf8)),
            (
                "owner key (its seed half)",
                EscrowClient.owner(accountKey).secretKey.unsafeData().prefix(32)
            ),
        ]
        for (name, value) in secrets {
            let window = min(8, value.count)
            for start in stride(from: 0, through: value.count - window, by: 1) {
                #expect(capture.range(of: value[start..<(start + window)]) == nil, "\(name)")
            }
        }
    }

    @Test(
        "the escrow's state directory is its own: a directory writable by others, or one already in use by another escrow, is refused at start"
    )
    func stateDirectory() throws {
        let shared = Throwaway.directory("escrow-state")
        chmod(shared.path, 0o777)
        #expect(throws: (any Error).self) { try PrivateEscrow(stateDirectory: shared) }
        chmod(shared.path, 0o700)
        let first = try PrivateEscrow(stateDirectory: shared)
        #expect(throws: (any Error).self) {
            try PrivateEscrow(stateDirectory: shared, tpm: first.tpm)
        }
        first.stop()
    }
}

/// Sends `request` on a new connection to the loopback `port`; returns what came back.
private func rawHTTP(_ port: Int, _ request: String) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(fd) }
    var address = Loopback.address(UInt16(port))
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { throw HarnessError("no connection") }
    _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var answer = [UInt8](repeating: 0, count: 4096)
    let got = recv(fd, &answer, answer.count, 0)
    return String(decoding: answer.prefix(max(got, 0)), as: UTF8.self)
}
