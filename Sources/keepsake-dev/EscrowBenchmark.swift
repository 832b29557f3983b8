import Device
import Escrow
import Foundation
import KeepsakeTestSupport
import Sealing
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `keepsake-dev bench escrow [--slots N] [--claims N]`: claims per second and a claim's p50/p99
/// on the PostgreSQL store at `--slots` records, through one node and through two, against the
/// file store at 100,000 — in one run, on this machine.
///
/// The stores are filled to size with rows of a slot record's size under random IDs (a million
/// registrations would take the benchmark's whole time), beside 200 slots registered through the
/// protocol (each with its budget's record) that the claims go to: each claim is a right one (counted, proved, its count given
/// back), two requests and two transactions, from 8 client threads.
struct EscrowBenchmark {
    let slots: Int
    let claims: Int
    static let registered = 200
    static let threads = 8

    func run() throws {
        print(
            "escrow claims: \(claims) right claims from \(Self.threads) threads over \(Self.registered) registered slots"
        )
        let database = try PrivatePostgres.start()
        defer { database.stop() }
        let keyFile = Throwaway.directory("bench-key").appendingPathComponent("key")
        try KeyDerivation.randomBytes(32).write(to: keyFile)
        chmod(keyFile.path, 0o600)
        let nodes = try (0..<2).map { _ in
            try PrivateEscrow(store: (database.uri, keyFile))
        }
        defer { nodes.forEach { $0.stop() } }
        let filled = Date()
        // Rows of a sealed slot record's size (~330 bytes) under IDs no slot takes.
        try database.sql(
            """
            INSERT INTO keepsake_escrow_records (id, sealed)
            SELECT substring(sha256(int8send(i)) FROM 1 FOR 16),
                   decode(repeat(md5(i::text), 10), 'hex') || sha256(int8send(i))
            FROM generate_series(1, \(max(0, slots - 2 * Self.registered))) AS i
            """)
        try database.sql("ANALYZE keepsake_escrow_records")
        let registered = try (0..<Self.registered).map { _ in
            try Slot(on: nodes[0].configuration)
        }
        let rows = try database.sql("SELECT count(*) FROM keepsake_escrow_records")
        print(
            "  PostgreSQL store: \(rows) records (filled in \(String(format: "%.1f", Date().timeIntervalSince(filled))) s)"
        )
        let one = try measure(registered, through: [nodes[0].configuration])
        print("  PostgreSQL, one node:  \(one)")
        let two = try measure(registered, through: nodes.map(\.configuration))
        print("  PostgreSQL, two nodes: \(two)")
        print(
            "  two nodes / one node: \(String(format: "%.2f", two.perSecond / one.perSecond))× the claims per second (target ≥ 1.6×: "
                + (two.perSecond >= 1.6 * one.perSecond
                    ? "met)"
                    : "missed — both nodes, PostgreSQL and the 8 client threads share this machine's \(ProcessInfo.processInfo.activeProcessorCount) cores, \(String(format: "%.0f", one.busy * 100))% busy with one node already: a second node's work is CPU the others then wait for)")
        )

        // The file store filled before it starts (it counts its files then).
        let fileSlots = 100_000
        let state = Throwaway.directory("bench-file-escrow")
        for index in 0..<(fileSlots - 2 * Self.registered) {
            let id = KeyDerivation.keyedHash(
                key: SecureBytes(copying: Data(count: 32)), context: "bench filler",
                Data(String(index).utf8)
            ).unsafeData().prefix(16)
            try KeyDerivation.randomBytes(330).write(
                to: state.appendingPathComponent(id.hexString))
        }
        let files = try PrivateEscrow(stateDirectory: state, files: true)
        defer { files.stop() }
        let fileRegistered = try (0..<Self.registered).map { _ in
            try Slot(on: files.configuration)
        }
        let file = try measure(fileRegistered, through: [files.configuration])
        print("  file store at \(fileSlots) slots, one process: \(file)")
    }

    /// One registered slot: its ID, key and passcode.
    struct Slot: Sendable {
        let slot: Data
        let publicKey: Data
        let passcodeKey: SecureBytes

        init(on escrow: EscrowConfiguration) throws {
            passcodeKey = SecureBytes(randomCount: 32)
            let registered = try escrow.client().register(
                SecureBytes(randomCount: 32), passcodeKey: passcodeKey,
                salt: KeyDerivation.randomBytes(16), cost: .minimum, limit: 10)
            (slot, publicKey) = (registered.slot, registered.publicKey)
        }
    }

    /// One run's figures.
    struct Result: CustomStringConvertible {
        /// Claims that went through, a second.
        var perSecond: Double
        /// The middle and the 99th percentile of a claim's time (seconds).
        var p50, p99: Double
        /// Claims that did not go through.
        var failed: Int
        /// The machine's cores busy meanwhile (0…1), and the share of it this process (the 8
        /// client threads) took.
        var busy, clients: Double
        var description: String {
            String(
                format:
                    "%.0f claims/s, a claim p50 %.1f ms, p99 %.1f ms; the cores %.0f%% busy (the clients %.0f%% of it)%@",
                perSecond, p50 * 1000, p99 * 1000, busy * 100, clients * 100,
                failed == 0 ? "" : " (\(failed) failed)")
        }
    }

    /// The machine's busy and total CPU time (`/proc/stat`, in ticks) and this process's (user
    /// and system, in seconds).
    private static func cpu() -> (busy: Double, total: Double, own: Double) {
        let line =
            (try? String(contentsOfFile: "/proc/stat", encoding: .utf8))?.split(separator: "\n")
            .first ?? ""
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        let idle = ticks.count > 4 ? ticks[3] + ticks[4] : 0
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let own =
            Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        return (ticks.reduce(0, +) - idle, ticks.reduce(0, +), own)
    }

    /// `claims` right claims over `slots`, spread over `escrows` in turn, from 8 threads.
    private func measure(_ slots: [Slot], through escrows: [EscrowConfiguration]) throws -> Result {
        let times = Mutex<[Double]>([])
        let failed = Mutex(0)
        let clock = ContinuousClock()
        let start = clock.now
        let cpuBefore = Self.cpu()
        onThreads(Self.threads, claims) { index in
            let slot = slots[index % slots.count]
            let begun = clock.now
            do {
                _ = try escrows[index % escrows.count].client().claim(
                    slot.slot, passcodeKey: slot.passcodeKey, publicKey: slot.publicKey)
                let took = clock.now - begun
                times.withLock {
                    $0.append(
                        Double(took.components.seconds) + Double(took.components.attoseconds)
                            / 1e18)
                }
            } catch {
                failed.withLock { $0 += 1 }
            }
        }
        let cpuAfter = Self.cpu()
        let elapsed = clock.now - start
        let seconds =
            Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let sorted = times.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { throw HarnessError("no claim went through") }
        return Result(
            perSecond: Double(sorted.count) / seconds, p50: sorted[sorted.count / 2],
            p99: sorted[min(sorted.count - 1, sorted.count * 99 / 100)],
            failed: failed.withLock { $0 },
            busy: (cpuAfter.busy - cpuBefore.busy) / max(1, cpuAfter.total - cpuBefore.total),
            clients: (cpuAfter.own - cpuBefore.own)
                / max(
                    0.001,
                    (cpuAfter.busy - cpuBefore.busy) / Double(sysconf(Int32(_SC_CLK_TCK)))))
    }
}
