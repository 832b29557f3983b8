import Foundation
import KeepsakeTestSupport
import Sealing
import Synchronization
import Testing

@testable import Device
@testable import Escrow

/// A file of its own holding a random service key (32 bytes, this user's alone).
private func serviceKeyFile() throws -> URL {
    let file = Throwaway.directory("service-key").appendingPathComponent("key")
    try KeyDerivation.randomBytes(32).write(to: file)
    chmod(file.path, 0o600)
    return file
}

/// A private PostgreSQL (`database`), a service key of its own (`key`) and the escrow nodes
/// started on it; `stop` stops the nodes, then the database.
private final class EscrowCluster {
    let database: PrivatePostgres
    let key: URL
    private var started: [PrivateEscrow] = []

    init(_ database: PrivatePostgres? = nil) throws {
        self.database = try database ?? PrivatePostgres.start()
        key = try serviceKeyFile()
    }

    /// A node with `arguments` on `uri` (the database's unless given).
    func node(_ arguments: [String] = [], uri: String? = nil) throws -> PrivateEscrow {
        let node = try PrivateEscrow(
            store: (uri ?? database.uri, key), arguments: arguments)
        started.append(node)
        return node
    }

    func stop() {
        started.forEach { $0.stop() }
        database.stop()
    }
}

/// A slot registered through `escrow`: its ID and public key, its passcode's key, its reader's
/// secret, and the secret it holds.
private struct TestSlot: Sendable {
    let slot: Data
    let publicKey: Data
    let passcodeKey: SecureBytes
    let readerSecret: SecureBytes
    let secret: SecureBytes

    init(on escrow: EscrowConfiguration, limit: Int = 10) throws {
        passcodeKey = SecureBytes(randomCount: 32)
        readerSecret = SecureBytes(randomCount: 32)
        secret = SecureBytes(randomCount: 32)
        let registered = try escrow.client().register(
            secret, passcodeKey: passcodeKey, salt: KeyDerivation.randomBytes(16),
            cost: .minimum, limit: limit,
            reader: EscrowProtocol.reader(secret: readerSecret).publicKey)
        (slot, publicKey) = (registered.slot, registered.publicKey)
    }

    /// One claim with a wrong passcode: its refusal's code (`.authFailed`: counted).
    func wrongClaim(on escrow: EscrowConfiguration) -> EscrowError.Code? {
        do {
            _ = try escrow.client().claim(
                slot, passcodeKey: SecureBytes(randomCount: 32), publicKey: publicKey)
            return nil
        } catch {
            return error.code
        }
    }

    /// A claim's first step alone, with a random guess (`/v1/claim`): the HTTP status — 200 (a
    /// challenge: the claim is counted) or the refusal's.
    func countedStep(on escrow: EscrowConfiguration) -> Int {
        let blinded = OPRF.blind(SecureBytes(randomCount: 32), context: "a guess").blinded
        let answer = try? escrow.transport()(
            "POST", EscrowProtocol.Path.claim.rawValue,
            EscrowProtocol.message([(.slot, slot), (.blinded, blinded)]))
        return answer?.status ?? 0
    }

    /// The count as the slot's reader is told it.
    func spent(on escrow: EscrowConfiguration) throws -> Int {
        try #require(
            try escrow.client().count(
                of: slot, reader: EscrowProtocol.reader(secret: readerSecret)
            ).count
        ).spent
    }
}

@Suite("The account's escrow on PostgreSQL: many nodes, one exact count, failover", .serialized)
struct PostgresEscrowTests {
    @Test(
        "two escrow nodes on one PostgreSQL count every claim once: 7 claims at once through both are each counted (the count is 7); of 14 at once exactly 10 are counted and 4 refused as the slot is destroyed at its limit"
    )
    func twoNodesOneCount() throws {
        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let escrows = try (0..<2).map { _ in try cluster.node().configuration }

        // A claim's first step is where it is counted: answered with a challenge, or refused.
        let seven = try TestSlot(on: escrows[0])
        let answers = Mutex<[Int]>([])
        onThreads(7, 7) { index in
            let status = seven.countedStep(on: escrows[index % 2])
            answers.withLock { $0.append(status) }
        }
        #expect(answers.withLock { $0 } == Array(repeating: 200, count: 7))
        #expect(try seven.spent(on: escrows[1]) == 7)
        #expect(try seven.spent(on: escrows[0]) == 7)
        // The right passcode through the other node: the secret, and the 7 wrong claims reported.
        let right = try escrows[1].client().claim(
            seven.slot, passcodeKey: seven.passcodeKey, publicKey: seven.publicKey)
        #expect(right.secret == seven.secret)
        #expect(right.wrongSinceRight == 7)

        let fourteen = try TestSlot(on: escrows[1])
        answers.withLock { $0 = [] }
        onThreads(7, 14) { index in
            let status = fourteen.countedStep(on: escrows[index % 2])
            answers.withLock { $0.append(status) }
        }
        let statuses = answers.withLock { $0 }
        #expect(statuses.filter { $0 == 200 }.count == 10, "\(statuses)")
        #expect(statuses.filter { $0 != 200 }.count == 4, "\(statuses)")
        #expect(fourteen.wrongClaim(on: escrows[0]) == .destroyed)
        #expect(throws: EscrowError.self) {
            try escrows[1].client().claim(
                fourteen.slot, passcodeKey: fourteen.passcodeKey, publicKey: fourteen.publicKey)
        }
    }

    @Test(
        "a dump of the database holds no slot's secret, key or envelope in clear; a node started with another service key is refused, and a row moved to another slot's ID does not open"
    )
    func dumpHoldsNothing() throws {
        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let database = cluster.database
        let node = try cluster.node()
        let slots = try (0..<3).map { _ in try TestSlot(on: node.configuration) }
        #expect(slots[0].wrongClaim(on: node.configuration) == .authFailed)

        let dump = try database.dump().lowercased()
        #expect(dump.contains("keepsake_escrow_records"))
        for slot in slots {
            for secret in [slot.secret, slot.passcodeKey, slot.readerSecret] {
                #expect(!dump.contains(secret.unsafeData().hexString))
            }
            // The slot's OPRF public key is public; its reader's public key is in no row either.
            #expect(
                !dump.contains(
                    EscrowProtocol.reader(secret: slot.readerSecret).publicKey.hexString))
        }

        #expect(throws: HarnessError.self) {
            _ = try PrivateEscrow(store: (database.uri, try serviceKeyFile()))
        }

        // Another slot's row put in place of the first's: refused, not read.
        let ids = [slots[0].slot, slots[1].slot].map { "'\\x\($0.hexString)'::bytea" }
        try database.sql(
            "UPDATE keepsake_escrow_records SET sealed = (SELECT sealed FROM keepsake_escrow_records WHERE id = \(ids[1])) WHERE id = \(ids[0])"
        )
        #expect(slots[0].wrongClaim(on: node.configuration) == .unavailable)
        #expect(slots[2].wrongClaim(on: node.configuration) == .authFailed)
    }

    @Test(
        "a service key sealed to the node's TPM (seal-service-key, --service-key-tpm): the node serves the store with it, the sealed file holds no key, and it opens on no other TPM, not without its TPM and not when changed"
    )
    func serviceKeySealedToTPM() throws {
        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let tpm = try PrivateTPM()
        let sealedFile = Throwaway.directory("sealed-key").appendingPathComponent("sealed")
        func seal(_ tcti: String, to out: URL) throws -> (status: Int32, stderr: String) {
            let run = try Spawn.capture(
                PrivateEscrow.executable.path,
                [
                    "seal-service-key", "--service-key", cluster.key.path, "--service-key-tpm",
                    tcti, "--out", out.path,
                ], environment: ProcessInfo.processInfo.environment)
            return (run.status, String(decoding: run.stderr, as: UTF8.self))
        }
        let sealed = try seal(tpm.tcti, to: sealedFile)
        #expect(sealed.status == 0, "\(sealed.stderr)")
        // Never written over: a second seal to the same file is refused.
        #expect(try seal(tpm.tcti, to: sealedFile).status == 2)
        let bytes = try Data(contentsOf: sealedFile)
        let key = try Data(contentsOf: cluster.key)
        #expect(bytes.range(of: key) == nil)
        #expect(!String(decoding: bytes, as: UTF8.self).lowercased().contains(key.hexString))
        var info = stat()
        #expect(stat(sealedFile.path, &info) == 0 && info.st_mode & 0o777 == 0o600)

        // A node with the sealed key and a node with the plain one serve the same slots.
        let sealedNode = try PrivateEscrow(
            store: (cluster.database.uri, sealedFile),
            arguments: ["--service-key-tpm", tpm.tcti])
        defer { sealedNode.stop() }
        let plainNode = try cluster.node()
        let slot = try TestSlot(on: sealedNode.configuration)
        #expect(slot.wrongClaim(on: plainNode.configuration) == .authFailed)
        #expect(try slot.spent(on: sealedNode.configuration) == 1)
        let right = try sealedNode.configuration.client().claim(
            slot.slot, passcodeKey: slot.passcodeKey, publicKey: slot.publicKey)
        #expect(right.secret == slot.secret)

        // Refused at start: without its TPM, on another TPM, and changed.
        #expect(throws: HarnessError.self) {
            _ = try PrivateEscrow(store: (cluster.database.uri, sealedFile))
        }
        let other = try PrivateTPM()
        do {
            _ = try PrivateEscrow(
                store: (cluster.database.uri, sealedFile),
                arguments: ["--service-key-tpm", other.tcti])
            Issue.record("a node started with a key sealed to another TPM")
        } catch {
            #expect("\(error)".contains("is not the one this state was made on"), "\(error)")
        }
        var changed = try JSONSerialization.jsonObject(with: bytes) as! [String: Any]
        var envelope = try #require(Data(base64Encoded: changed["sealed"] as! String))
        envelope[envelope.count - 1] ^= 1
        changed["sealed"] = envelope.base64EncodedString()
        let changedFile = Throwaway.directory("sealed-key").appendingPathComponent("changed")
        try JSONSerialization.data(withJSONObject: changed).write(to: changedFile)
        chmod(changedFile.path, 0o600)
        #expect(throws: HarnessError.self) {
            _ = try PrivateEscrow(
                store: (cluster.database.uri, changedFile),
                arguments: ["--service-key-tpm", tpm.tcti])
        }
    }

    @Test(
        "the primary killed during 1,000 concurrent claims through two nodes, its synchronous standby promoted: every claim answered is counted exactly once, no count goes back, the nodes reconnect by themselves"
    )
    func failover() throws {
        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let primary = cluster.database
        let standby = try primary.standby()
        defer { standby.stop() }
        let uri = PrivatePostgres.uri(ports: [primary.port, standby.port])
        let escrows = try (0..<2).map { _ in try cluster.node(uri: uri).configuration }

        // 125 slots, 8 wrong claims each: below the limit, so each count only goes up.
        let slots = try (0..<125).map { try TestSlot(on: escrows[$0 % 2]) }
        struct Tally {
            var answered = [Int](repeating: 0, count: 125)
            var failed = [Int](repeating: 0, count: 125)
            var other: [EscrowError.Code?] = []
        }
        let tally = Mutex(Tally())
        let killed = Mutex(false)
        let answeredAtKill = Mutex(0)
        // Each slot's claims in a fixed order across the stream: claim i goes to slot i % 125.
        onThreads(8, 1000) { index in
            let slot = index % 125
            let code = slots[slot].wrongClaim(on: escrows[index % 2])
            let answered = tally.withLock { tally -> Int in
                switch code {
                case .authFailed: tally.answered[slot] += 1
                case .unavailable, .malformed, .stale: tally.failed[slot] += 1
                default: tally.other.append(code)
                }
                return tally.answered.reduce(0, +)
            }
            // At the 300th answered claim, the primary dies; its standby takes over.
            let first = killed.withLock { done -> Bool in
                guard answered >= 300, !done else { return false }
                done = true
                return true
            }
            if first {
                answeredAtKill.withLock { $0 = answered }
                primary.crash()
                try? standby.promote()
            }
        }
        let outcome = tally.withLock { $0 }
        #expect(killed.withLock { $0 })
        #expect(outcome.other.isEmpty, "\(outcome.other)")
        var lost = 0
        var double = 0
        var counted = 0
        for (index, slot) in slots.enumerated() {
            let spent = try slot.spent(on: escrows[index % 2])
            counted += spent
            lost += max(0, outcome.answered[index] - spent)
            double += max(0, spent - outcome.answered[index] - outcome.failed[index])
        }
        let answered = outcome.answered.reduce(0, +)
        let failed = outcome.failed.reduce(0, +)
        let before = answeredAtKill.withLock { $0 }
        print(
            "failover: 1000 claims, \(answered) answered as counted (\(before) before the primary was killed, \(answered - before) after, on the promoted standby), \(failed) failed (the primary went under them), \(counted) counted; \(lost) lost, \(double) counted twice"
        )
        #expect(try standby.sql("SELECT pg_is_in_recovery()") == "f")
        #expect(answered - before > 300)
        #expect(lost == 0)
        #expect(double == 0)
        #expect(answered + failed == 1000)
        // The nodes took claims after the failover: a claim on each node now is counted.
        for (index, escrow) in escrows.enumerated() {
            #expect(slots[index].wrongClaim(on: escrow) == .authFailed)
        }
    }

    @Test(
        "keepsake-escrow migrate moves a stopped file escrow's slots with their counts into PostgreSQL: the count read there is the count kept before, the right passcode reports it, and a second migration over other bytes is refused"
    )
    func migrate() throws {
        let files = try PrivateEscrow(files: true)
        let slot = try TestSlot(on: files.configuration)
        for _ in 0..<3 { #expect(slot.wrongClaim(on: files.configuration) == .authFailed) }
        let other = try TestSlot(on: files.configuration)
        files.stop()

        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let (database, key) = (cluster.database, cluster.key)
        let migrate = {
            try Spawn.capture(
                PrivateEscrow.executable.path,
                [
                    "migrate", "--from", files.stateDirectory.path, "--to", database.uri,
                    "--service-key", key.path,
                ], environment: ProcessInfo.processInfo.environment)
        }
        let moved = try migrate()
        #expect(moved.status == 0, "\(String(decoding: moved.stderr, as: UTF8.self))")
        #expect(String(decoding: moved.stdout, as: UTF8.self).contains("migrated"))

        let node = try cluster.node()
        #expect(try slot.spent(on: node.configuration) == 3)
        #expect(try other.spent(on: node.configuration) == 0)
        let right = try node.configuration.client().claim(
            slot.slot, passcodeKey: slot.passcodeKey, publicKey: slot.publicKey)
        #expect(right.secret == slot.secret && right.wrongSinceRight == 3)

        // The store changed since (a claim counted there): migrating the old state again would
        // write a count back, and is refused whole.
        #expect(other.wrongClaim(on: node.configuration) == .authFailed)
        let again = try migrate()
        #expect(again.status != 0)
        #expect(try other.spent(on: node.configuration) == 1)
    }

    @Test(
        "a source limit holds across nodes: with --source-limit 7, a registration and six claims from one address through either node are taken and the next refused (wait) by both; X-Forwarded-For names the source only on a node told to trust its proxy, which refuses a request without it"
    )
    func sourceLimitAcrossNodes() throws {
        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let nodes = try (0..<2).map { _ in try cluster.node(["--source-limit", "7"]) }
        let proxied = try cluster.node(["--source-limit", "7", "--trust-forwarded-for", "yes"])
        let escrows = nodes.map(\.configuration)
        // The limit is per wall-clock minute: started with 40 s of this one left, so the steps
        // below (a second or two) stay in it on a busy machine.
        let second = Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 60)
        if second > 20 { Thread.sleep(forTimeInterval: 60.5 - second) }
        // The registration is one request of the seven (a claim's second step is not charged).
        let slot = try TestSlot(on: escrows[0])
        for index in 0..<6 { #expect(slot.countedStep(on: escrows[index % 2]) == 200) }
        #expect(slot.countedStep(on: escrows[0]) == 429)
        #expect(slot.countedStep(on: escrows[1]) == 429)
        #expect(try slot.spent(on: escrows[0]) == 6)
        let blinded = OPRF.blind(SecureBytes(randomCount: 32), context: "a guess").blinded
        let body = EscrowProtocol.message([(.slot, slot.slot), (.blinded, blinded)])
        // A node that does not trust a proxy ignores the header: still this address, refused.
        #expect(try post(body, to: nodes[1], forwardedFor: "198.51.100.7") == 429)
        // Behind a trusted proxy: the address it appended (the last entry) is the source.
        #expect(try post(body, to: proxied, forwardedFor: "203.0.113.9, 198.51.100.7") == 200)
        #expect(try post(body, to: proxied, forwardedFor: nil) == 400)
        #expect(try slot.spent(on: escrows[1]) == 7)
    }

    @Test(
        "a slot whose caller's count went missing from the database (its row deleted behind the escrow) is refused, never counted again from zero; a store address with a password, or off this machine without sslmode=verify-full, is refused at start"
    )
    func missingCountAndAddresses() throws {
        let cluster = try EscrowCluster()
        defer { cluster.stop() }
        let (database, key) = (cluster.database, cluster.key)
        let node = try cluster.node()
        let slot = try TestSlot(on: node.configuration)
        for _ in 0..<3 { #expect(slot.wrongClaim(on: node.configuration) == .authFailed) }
        let budget = CallerBudget.id(slot: slot.slot)
        try database.sql(
            "DELETE FROM keepsake_escrow_records WHERE id = '\\x\(budget.hexString)'::bytea")
        #expect(slot.wrongClaim(on: node.configuration) == .unavailable)
        #expect(throws: (any Error).self) { try slot.spent(on: node.configuration) }

        for (uri, says) in [
            ("postgresql://keepsake:secret@127.0.0.1:5/escrow", "passfile"),
            ("postgresql://keepsake@127.0.0.1:5/escrow?password=secret", "passfile"),
            ("postgresql://keepsake@db.example:5432/escrow", "sslmode=verify-full"),
            ("postgresql://keepsake@127.0.0.1:5,10.0.0.2:5/escrow?sslmode=require", "verify-full"),
        ] {
            let run = try Spawn.capture(
                PrivateEscrow.executable.path,
                ["--store", uri, "--service-key", key.path, "--listen", "127.0.0.1:0"],
                environment: ProcessInfo.processInfo.environment)
            let text = String(decoding: run.stderr, as: UTF8.self)
            #expect(run.status == 2 && text.contains(says), "\(uri): \(text)")
            #expect(!text.contains("secret"), "\(text)")
        }
    }
}

/// POSTs a claim's first step to `node` as a reverse proxy on this machine would, with
/// `X-Forwarded-For` (nil: without one): the status of the answer.
private func post(_ body: Data, to node: PrivateEscrow, forwardedFor: String?) throws -> Int {
    let port = UInt16(try #require(node.url.port))
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = Loopback.address(port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    try #require(connected == 0)
    let request =
        Data(
            "POST \(EscrowProtocol.Path.claim.rawValue) HTTP/1.1\r\nHost: escrow\r\n\(forwardedFor.map { "X-Forwarded-For: \($0)\r\n" } ?? "")Content-Length: \(body.count)\r\n\r\n"
                .utf8) + body
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var reply = [UInt8](repeating: 0, count: 64)
    let got = recv(fd, &reply, reply.count, 0)
    let line = String(decoding: reply.prefix(max(0, got)), as: UTF8.self)
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

@Suite("A slot's session as a shared store keeps it")
struct SlotSessionTests {
    @Test(
        "a session reads back whole (a registration, a claim with its budget before, a report, several challenges); an empty one is empty, and bytes that are not a session read as none"
    )
    func roundTrip() throws {
        var session = SlotSession()
        #expect(session.isEmpty && session.encoded().count > 0)
        let now = Date(timeIntervalSince1970: 1_800_000_000.123)
        var before = CallerBudget()
        before.countWrong(on: Data(repeating: 1, count: 16), at: now, boot: .now())
        session.pending = (SecureBytes(randomCount: OPRF.scalarLength), now, Data(count: 16))
        session.claim = (Data(repeating: 2, count: 32), now + 60, before)
        session.report = (Data(repeating: 3, count: 32), 4, now + 120)
        session.challenges = [
            (Data(repeating: 4, count: 32), now), (Data(repeating: 5, count: 32), now + 1),
        ]
        let read = try #require(SlotSession.parse(session.encoded()))
        #expect(read.pending?.key == session.pending?.key)
        #expect(read.pending?.budget == Data(count: 16))
        #expect(read.pendingRegistration?.expires.timeIntervalSince1970 == 1_800_000_000.123)
        #expect(read.claim?.challenge == Data(repeating: 2, count: 32))
        #expect(read.claim?.before == before)
        #expect(read.report?.shown == 4)
        #expect(read.challenges.map(\.challenge) == session.challenges.map(\.challenge))
        #expect(read.expiry == now + 120)
        var taken = read
        #expect(taken.take(Data(repeating: 5, count: 32), at: now) == true)
        #expect(taken.challenges.count == 1)
        let bytes = session.encoded()
        for cut in [0, 3, bytes.count / 2, bytes.count - 1] {
            #expect(SlotSession.parse(bytes.prefix(cut)) == nil, "cut at \(cut)")
        }
        #expect(SlotSession.parse(bytes.prefix(4))?.isEmpty == true)  // the magic alone
        #expect(SlotSession.parse(Data("KESS".utf8) + Data(count: 8)) == nil)
    }
}
