import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Synchronization
import TPM
import Testing

@testable import CloudAccount
@testable import Device
@testable import Escrow

/// A slot registered the way any client of the escrow may register one, with values the test
/// knows (what the escrow must never keep in clear).
private struct RawSlot {
    let slot: Data
    let verifier = KeyDerivation.randomBytes(Signature.publicKeyLength)
    let owner = KeyDerivation.randomBytes(Signature.publicKeyLength)
    let envelope = KeyDerivation.randomBytes(200)
    let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
    /// The key the slot tells its count to.
    let reader = Signature.keyPair(seed: SecureBytes(randomCount: 32))

    init(_ escrow: PrivateEscrow) throws {
        let blinded = OPRF.blind(SecureBytes(randomCount: 32), context: "test").blinded
        let started = try send(escrow, .register, [(.blinded, blinded)])
        #expect(started.status == 200)
        slot = try #require(started.fields?[EscrowProtocol.Tag.slot.rawValue].map { Data($0) })
        let finished = try send(
            escrow, .finishRegistration,
            [
                (.slot, slot), (.verifier, verifier), (.owner, owner), (.envelope, envelope),
                (.salt, salt), (.operations, EscrowProtocol.integer(2)),
                (.memory, EscrowProtocol.integer(8192)), (.limit, EscrowProtocol.integer(10)),
                (.reader, reader.publicKey),
            ])
        #expect(finished.status == 200)
    }

    /// One claim with a random guess: counted, never proved. Its HTTP status.
    func claim(_ escrow: PrivateEscrow) throws -> Int { try claimAnswer(escrow).status }

    /// One claim with a random guess, and what the escrow answered (its HTTP status and body).
    func claimAnswer(_ escrow: PrivateEscrow) throws -> (status: Int, body: String) {
        let (status, body) = try escrow.configuration.transport()(
            "POST", EscrowProtocol.Path.claim.rawValue,
            EscrowProtocol.message([
                (.slot, slot),
                (.blinded, OPRF.blind(SecureBytes(randomCount: 32), context: "guess").blinded),
            ]))
        return (status, String(decoding: body, as: UTF8.self))
    }

    func failures(_ escrow: PrivateEscrow) throws -> Int {
        try #require(try escrow.configuration.client().count(of: slot, reader: reader).count).spent
    }
}

private func send(
    _ escrow: PrivateEscrow, _ path: EscrowProtocol.Path, _ fields: [(EscrowProtocol.Tag, Data)]
) throws -> (status: Int, fields: TLV.Fields?) {
    let (status, body) = try escrow.configuration.transport()(
        "POST", path.rawValue, EscrowProtocol.message(fields))
    return (status, try? EscrowProtocol.fields(body))
}

/// Every file under `directory`, read whole.
private func everyFile(_ directory: URL) -> [(String, Data)] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    return names.compactMap { name in
        (try? Data(contentsOf: directory.appendingPathComponent(name))).map { (name, $0) }
    }
}

/// Whether any 8-byte window of `value` occurs in `haystack`.
private func holds(_ haystack: Data, _ value: Data) -> Bool {
    stride(from: 0, through: value.count - 8, by: 1).contains {
        haystack.range(of: value[$0..<($0 + 8)]) != nil
    }
}

@Suite("The escrow's state under a TPM only it reaches: sealed at rest, never rolled back")
struct EscrowTPMTests {
    @Test(
        "the escrow's state directory alone opens nothing: every slot's record and the slot table are sealed under a key that lives in the escrow's TPM (a file-backed escrow's directory, by contrast, holds them in clear)"
    )
    func sealedAtRest() throws {
        let escrow = try PrivateEscrow()
        defer { escrow.stop() }
        let registered = try RawSlot(escrow)
        #expect(try registered.claim(escrow) == 200)
        let files = everyFile(escrow.stateDirectory)
        #expect(files.contains { $0.0 == ".table" } && files.contains { $0.0.hasPrefix("s-") })
        for (name, bytes) in files {
            for value in [registered.verifier, registered.owner, registered.envelope] {
                #expect(!holds(bytes, value), "\(name)")
            }
        }
        // The same slot at a file-backed escrow: there the directory is the whole secret.
        let plain = try PrivateEscrow(files: true)
        defer { plain.stop() }
        let inClear = try RawSlot(plain)
        #expect(
            everyFile(plain.stateDirectory).contains { holds($0.1, inClear.envelope) },
            "the check finds what it looks for")
        #expect(try escrow.configuration.client().counter() == "software TPM (IBM SW)")
    }

    @Test(
        "an older copy of the escrow's state (a backup put back after more wrong claims) is refused at start, and one slot's record swapped for another is refused when read: no count ever goes back"
    )
    func rollbackRefused() throws {
        var escrow = try PrivateEscrow()
        let tpm = try #require(escrow.tpm)
        let state = escrow.stateDirectory
        let registered = try RawSlot(escrow)
        for _ in 0..<2 { #expect(try registered.claim(escrow) == 200) }
        let backup = Throwaway.directory("escrow-backup")
        try copyContents(of: state, to: backup)
        for _ in 0..<3 { #expect(try registered.claim(escrow) == 200) }
        #expect(try registered.failures(escrow) == 5)
        escrow.stop()
        let latest = Throwaway.directory("escrow-latest")
        try copyContents(of: state, to: latest)

        // The backup put back: refused, naming why.
        try copyContents(of: backup, to: state)
        do {
            _ = try PrivateEscrow(stateDirectory: state, tpm: tpm)
            Issue.record("an escrow started on an older copy of its state")
        } catch {
            #expect("\(error)".contains("not the escrow's latest state"), "\(error)")
        }
        // The latest state back: it starts, and every claim is still counted.
        try copyContents(of: latest, to: state)
        escrow = try PrivateEscrow(stateDirectory: state, tpm: tpm)
        defer { escrow.stop() }
        #expect(try registered.failures(escrow) == 5)

        // A second slot's record put in place of the first's: refused, not a fresh count.
        let other = try RawSlot(escrow)
        let records = try FileManager.default.contentsOfDirectory(atPath: state.path)
            .filter { $0.hasPrefix("s-") }
        let first = try #require(records.first { $0.hasPrefix("s-\(registered.slot.hexString)") })
        let second = try #require(records.first { $0.hasPrefix("s-\(other.slot.hexString)") })
        try FileManager.default.removeItem(at: state.appendingPathComponent(first))
        try FileManager.default.copyItem(
            at: state.appendingPathComponent(second), to: state.appendingPathComponent(first))
        #expect(try registered.claim(escrow) != 200)
        #expect(throws: EscrowError.self) { try registered.failures(escrow) }
        #expect(try other.failures(escrow) == 0)
    }

    @Test(
        "a TPM state record whose storage key name is empty or oversized is refused at start, never taken as any key"
    )
    func tamperedHandlesRefused() throws {
        let escrow = try PrivateEscrow()
        let tpm = try #require(escrow.tpm)
        escrow.stop()
        let file = escrow.stateDirectory.appendingPathComponent(".tpm")
        var handles = try JSONDecoder().decode(
            TPMServiceState.Handles.self, from: Data(contentsOf: file))
        for name in [Data(), Data(repeating: 7, count: 100)] {
            handles.storageKeyName = name
            try JSONEncoder().encode(handles).write(to: file)
            do {
                _ = try PrivateEscrow(stateDirectory: escrow.stateDirectory, tpm: tpm)
                Issue.record("an escrow started on a storage key name of \(name.count) bytes")
            } catch {
                #expect("\(error)".contains("does not decode"), "\(error)")
            }
        }
    }

    @Test(
        "swtpm killed (SIGKILL) while claims are in flight, then started again: the escrow answers again without a restart, and every answered claim stayed counted"
    )
    func tpmKilledBetweenGuessAndCount() throws {
        let escrow = try PrivateEscrow()
        defer { escrow.stop() }
        let tpm = try #require(escrow.tpm)
        let registered = try RawSlot(escrow)
        // Kill points drawn from the measured time of a claim after a restart (the escrow's
        // reconnection included), so rounds land on both sides of the count.
        tpm.kill()
        try tpm.restart()
        let claimTime = ContinuousClock().measure { _ = try? registered.claim(escrow) }
        let micros =
            claimTime.components.seconds * 1_000_000
            + claimTime.components.attoseconds / 1_000_000_000_000
        let span = UInt32(min(micros * 3, 2_000_000))
        var answered = 0
        var refused = 0
        for round in 1...8 {
            let result = Mutex<Int?>(nil)
            let thread = Thread {
                let status = try? registered.claim(escrow)
                result.withLock { $0 = status ?? -1 }
            }
            thread.start()
            usleep(UInt32.random(in: 0...span))
            tpm.kill()
            while result.withLock({ $0 }) == nil { usleep(1000) }
            if result.withLock({ $0 }) == 200 { answered += 1 } else { refused += 1 }
            try tpm.restart()
            // The escrow reconnects on its own; the count covers every answered claim.
            let failures = try registered.failures(escrow)
            #expect(failures >= answered, "round \(round)")
            #expect(failures <= round + 1)  // the measuring claim, and at most one a round
        }
        print("swtpm killed 8 times around claims: \(answered) answered, \(refused) refused")
    }

    @Test(
        "a recording of every byte between the escrow and its TPM — the state made, a pin set, a wrong and a right passcode join — holds neither the state key nor its authorization nor the account key"
    )
    func tpmCaptureHoldsNothing() throws {
        let tpm = try PrivateTPM()
        let (relay, tcti) = try tpm.recordingRelay()
        let escrow = try PrivateEscrow(tpm: tpm, tcti: tcti)
        let cloud = Throwaway.untrusted("cloud")
        let service = try PrivateSecretService.start()
        let phone = service.account(
            "phone", cloud: CloudDirectory(cloud), escrow: escrow.configuration, tuning: .fast)
        defer { try? phone.device.reboot() }
        try phone.setLockScreen(.pin, passcode: "271828", currentPasscode: nil)
        let accountKey = try #require(try phone.keys.cloudKey(forUpload: false))
        let other = try PrivateSecretService.start()
        let laptop = other.account(
            "laptop", cloud: CloudDirectory(cloud), escrow: escrow.configuration, tuning: .fast)
        defer { try? laptop.device.reboot() }
        #expect(throws: DeviceError.self) { try laptop.join(passcode: "314159") }
        try laptop.join(passcode: "271828")
        escrow.stop()
        let capture = relay.capture
        #expect(capture.count > 1000)
        // The state key, read as the escrow reads it (the test holds the escrow's files).
        let handles = try JSONDecoder().decode(
            TPMServiceState.Handles.self,
            from: Data(contentsOf: escrow.stateDirectory.appendingPathComponent(".tpm")))
        let stateKey = try TPMServiceState(tcti: tpm.tcti, handles: handles).stateKey()
        for (name, value) in [
            ("state key", stateKey.unsafeData()), ("its authorization", handles.authorization),
            ("account key", accountKey.unsafeData()),
        ] {
            #expect(!holds(capture, value), "\(name)")
        }
    }
}

extension EscrowTPMTests {
    @Test(
        "earlier TPM responses replayed on the escrow's TPM connection — a counter read, an increment answered without reaching the TPM — fail the session's check of the response: the claim is refused, the count never goes back, and the escrow answers again once the connection is honest"
    )
    func replayedResponsesRefused() throws {
        let tpm = try PrivateTPM()
        let (relay, tcti) = try tpm.recordingRelay()
        let escrow = try PrivateEscrow(tpm: tpm, tcti: tcti)
        defer { escrow.stop() }
        let registered = try RawSlot(escrow)
        #expect(try registered.claim(escrow) == 200)  // the relay has seen a read and an increment
        var counted = try registered.failures(escrow)
        #expect(counted == 1)
        let codes: [(String, UInt32)] = [("NV_Read", 0x14E), ("NV_Increment", 0x134)]
        for (name, code) in codes {
            relay.answerFromEarlier(code)
            let (status, body) = try registered.claimAnswer(escrow)
            relay.answerFromEarlier(nil)
            #expect(relay.replays(of: code) > 0, "\(name): nothing was replayed")
            #expect(status != 200, "\(name): a claim was answered on a replayed response")
            // Refused by the session's check of the response's HMAC (ESAPI's
            // TSS2_ESYS_RC_RSP_AUTH_FAILED), not by anything the escrow checks after.
            #expect(body.contains("TSS2 0x7001b"), "\(name): refused otherwise: \(body)")
            let now = try registered.failures(escrow)
            #expect(now >= counted, "\(name): the count went back (\(now) < \(counted))")
            counted = now
        }
        // Honest again: the escrow answers without a restart, and counts every claim.
        #expect(try registered.claim(escrow) == 200)
        #expect(try registered.failures(escrow) > counted)
    }

    @Test(
        "over loopback TLS, through Apache as the reverse proxy docs/running.md describes: a pin set and a passcode join (a wrong one counted, the right one joining) reach the TPM-backed escrow; a plain-HTTP escrow address off loopback is refused"
    )
    func overTLS() throws {
        let escrow = try PrivateEscrow()
        defer { escrow.stop() }
        let proxy = try PrivateWebDAV.start(
            .apache, tls: true, swept: false, passwordHash: .md5, proxy: escrow.url)
        defer { proxy.stop() }
        let configuration = try #require(
            EscrowConfiguration(url: proxy.proxied, caFile: proxy.caFile.path))
        #expect(configuration.url.scheme == "https")
        #expect(try configuration.client().counter() == "software TPM (IBM SW)")
        #expect(EscrowConfiguration(url: URL(string: "http://escrow.example/")!) == nil)

        let cloud = Throwaway.untrusted("cloud")
        let service = try PrivateSecretService.start()
        let phone = service.account(
            "phone", cloud: CloudDirectory(cloud), escrow: configuration, tuning: .fast)
        defer { try? phone.device.reboot() }
        try phone.setLockScreen(.pin, passcode: "161803", currentPasscode: nil)
        let accountKey = try #require(try phone.keys.cloudKey(forUpload: false))
        let other = try PrivateSecretService.start()
        let laptop = other.account(
            "laptop", cloud: CloudDirectory(cloud), escrow: configuration, tuning: .fast)
        defer { try? laptop.device.reboot() }
        #expect(throws: DeviceError.self) { try laptop.join(passcode: "141421") }
        try laptop.join(passcode: "161803")
        #expect(try laptop.keys.cloudKey(forUpload: false) == accountKey)
    }
}

extension EscrowTPMTests {
    /// Runs `arguments` as uid/gid 12345 (no groups): another user of the machine.
    private func asAnotherUser(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let run = try Spawn.capture(
            "/usr/bin/setpriv",
            ["--reuid=12345", "--regid=12345", "--clear-groups", "--"] + arguments,
            environment: ["PATH": "/usr/bin:/bin"])
        return (run.status, String(decoding: run.stdout + run.stderr, as: UTF8.self))
    }

    @Test(
        "a user other than the service's reaches its TPM and its state not at all — the swtpm socket and the state directory refuse it (permission denied) — only its address, where a claim is counted",
        .enabled(if: getuid() == 0, "needs root to run a process as another user"))
    func anotherUserReachesOnlyTheAddress() throws {
        let escrow = try PrivateEscrow()
        defer { escrow.stop() }
        let tpm = try #require(escrow.tpm)
        let socket = try #require(tpm.socket)
        let connect = try asAnotherUser([
            "/usr/bin/python3", "-c",
            "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", socket.path,
        ])
        #expect(connect.status != 0 && connect.output.contains("PermissionError"), "\(connect)")
        let read = try asAnotherUser([
            "/bin/cat", escrow.stateDirectory.appendingPathComponent(".tpm").path,
        ])
        #expect(read.status != 0 && read.output.contains("Permission denied"), "\(read)")
        // Its address answers anyone, and every claim there is counted.
        let registered = try RawSlot(escrow)
        let body = Throwaway.directory("claim").appendingPathComponent("claim")
        try EscrowProtocol.message([
            (.slot, registered.slot),
            (.blinded, OPRF.blind(SecureBytes(randomCount: 32), context: "guess").blinded),
        ]).write(to: body)
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keepsake-claim-\(UUID().uuidString.prefix(8))")
        try FileManager.default.copyItem(at: body, to: shared)
        defer { try? FileManager.default.removeItem(at: shared) }
        chmod(shared.path, 0o644)
        let claim = try asAnotherUser([
            "/usr/bin/python3", "-c",
            "import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=open(sys.argv[2], 'rb').read())).status, end='')",
            escrow.url.appendingPathComponent("v1/claim").absoluteString, shared.path,
        ])
        #expect(claim.output == "200", "\(claim)")
        #expect(try registered.failures(escrow) == 1)
    }
}

/// Makes `target`'s contents exactly `source`'s (the lock file aside).
private func copyContents(of source: URL, to target: URL) throws {
    let manager = FileManager.default
    for name in try manager.contentsOfDirectory(atPath: target.path) where name != ".lock" {
        try manager.removeItem(at: target.appendingPathComponent(name))
    }
    for name in try manager.contentsOfDirectory(atPath: source.path) where name != ".lock" {
        try manager.copyItem(
            at: source.appendingPathComponent(name), to: target.appendingPathComponent(name))
    }
}
