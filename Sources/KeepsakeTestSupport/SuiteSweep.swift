import Foundation
import Sealing
import Synchronization

/// The suite-wide hygiene sweep: untrusted storage never holds a plaintext byte sequence of any
/// secret stored during the whole test suite.
///
/// `scripts/test` runs the suite with `KEEPSAKE_SWEEP_DIR` set. Then this test process records
/// every plaintext it seals (`Envelope.sealObserver`: Keychain items, Block Store entries,
/// key-value and backup contents, hints, wrapped keys) and every secret the tests hand the CLI,
/// as the set of their 8-byte windows; and every untrusted directory the tests create (cloud
/// accounts, transfer files — `Throwaway.untrusted`) is made under the sweep directory and kept.
/// At exit the windows are written out; a second run of only the sweep test
/// (`SuiteWideSweep`) then looks for any of them in every untrusted file.
/// Without `KEEPSAKE_SWEEP_DIR` nothing is recorded and the sweep test does not run.
public enum SuiteSweep {
    /// Sequences shorter than this are not tracked (they would match random bytes by chance).
    public static let window = 8

    public static let directory: URL? = ProcessInfo.processInfo.environment["KEEPSAKE_SWEEP_DIR"]
        .map { URL(fileURLWithPath: $0) }

    static var untrustedRoot: URL? { directory?.appendingPathComponent("untrusted") }
    static var ledgerDirectory: URL? { directory?.appendingPathComponent("ledgers") }

    private static let windows = Mutex<Set<UInt64>>([])

    /// Starts recording (once per process; a no-op without `KEEPSAKE_SWEEP_DIR`). Called by the
    /// harness whenever a test starts a Secret Service or makes an untrusted directory.
    static let begin: Void = {
        guard let ledgers = ledgerDirectory else { return }
        try? FileManager.default.createDirectory(at: ledgers, withIntermediateDirectories: true)
        Envelope.sealObserver.withLock { $0 = { SuiteSweep.add($0) } }
        atexit { SuiteSweep.writeLedger() }
    }()

    /// Records a secret the test hands to another process (the CLI's standard input).
    public static func record(_ secret: some DataProtocol) {
        guard directory != nil else { return }
        _ = begin
        Array(secret).withUnsafeBytes { add($0) }
    }

    private static func add(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= window else { return }
        var found: [UInt64] = []
        found.reserveCapacity(bytes.count - window + 1)
        for offset in 0...(bytes.count - window) {
            let value = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            if !isRepetitive(value) { found.append(value) }
        }
        windows.withLock { $0.formUnion(found) }
    }

    /// A window of one repeated byte (zero padding, "AAAA…" base64) says nothing about a secret.
    static func isRepetitive(_ value: UInt64) -> Bool {
        value == (value & 0xff) &* 0x0101_0101_0101_0101
    }

    private static func writeLedger() {
        guard let ledgers = ledgerDirectory else { return }
        let all = windows.withLock { Array($0) }
        let bytes = all.withUnsafeBufferPointer { Data(buffer: $0) }
        try? bytes.write(to: ledgers.appendingPathComponent("ledger-\(getpid())"))
    }

    // MARK: - The sweep

    /// Every window recorded by earlier test processes of this sweep directory.
    public static func recordedWindows() throws -> Set<UInt64> {
        guard let ledgers = ledgerDirectory else { return [] }
        var all = Set<UInt64>()
        for name in try FileManager.default.contentsOfDirectory(atPath: ledgers.path) {
            let data = try Data(contentsOf: ledgers.appendingPathComponent(name))
            data.withUnsafeBytes { raw in
                all.formUnion(raw.bindMemory(to: UInt64.self))
            }
        }
        return all
    }

    /// Every regular file under the untrusted directories the suite made.
    public static func untrustedFiles() -> [URL] {
        guard let root = untrustedRoot,
            let walker = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isRegularFileKey])
        else { return [] }
        return walker.compactMap { $0 as? URL }.filter {
            (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
        }
    }

    /// The offsets in `bytes` where a recorded window starts.
    public static func matches(in bytes: Data, windows: Set<UInt64>) -> [Int] {
        guard bytes.count >= window else { return [] }
        return bytes.withUnsafeBytes { raw in
            (0...(raw.count - window)).filter {
                windows.contains(raw.loadUnaligned(fromByteOffset: $0, as: UInt64.self))
            }
        }
    }
}
