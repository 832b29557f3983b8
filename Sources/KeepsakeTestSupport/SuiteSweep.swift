import Foundation
import Sealing
import Synchronization

/// The suite-wide hygiene sweep: untrusted storage never holds a plaintext byte sequence of any
/// secret stored during the whole test suite, and no error or log line holds a secret.
///
/// `scripts/test` runs the suite with `KEEPSAKE_SWEEP_DIR` set. Then the test process records,
/// as sets of 8-byte windows, two ledgers:
/// - `sealed`: every plaintext it seals (`Envelope.sealObserver`: Keychain items, Block Store
///   entries, key-value and backup contents, hints, wrapped keys) — whole records, so with their
///   non-secret framing (key names, app ids);
/// - `secrets`: the secrets themselves that tests hand the CLI (standard input, hint values).
/// Every untrusted directory the tests create (cloud accounts, transfer files —
/// `Throwaway.untrusted`) and every test device's directory (`PrivateSecretService.device`) is
/// made under the sweep directory and kept, and so is the standard error
/// (errors, log lines) of every CLI run (`keepStandardError`). At exit the ledgers are written out;
/// a second run of only the sweep test (`SuiteWideSweep`) then looks for any sealed or secret
/// sequence in every untrusted or device file, and for any secret in the kept standard error (which may
/// name keys and apps, but never values). Without `KEEPSAKE_SWEEP_DIR` nothing is recorded and
/// the sweep test does not run.
package enum SuiteSweep {
    /// Sequences shorter than this are not tracked (they would match random bytes by chance).
    package static let window = 8

    package enum Ledger: String, CaseIterable, Sendable { case sealed, secrets }

    package static let directory: URL? = ProcessInfo.processInfo.environment["KEEPSAKE_SWEEP_DIR"]
        .map { URL(fileURLWithPath: $0) }

    static var untrustedRoot: URL? { directory?.appendingPathComponent("untrusted") }
    static var atRestRoot: URL? { directory?.appendingPathComponent("at-rest") }
    static var streamsRoot: URL? { directory?.appendingPathComponent("streams") }
    static var ledgerDirectory: URL? { directory?.appendingPathComponent("ledgers") }

    private static let windows = Mutex<[Ledger: Set<UInt64>]>([:])
    private static let streams = Mutex<Void>(())

    /// Starts recording (once per process; a no-op without `KEEPSAKE_SWEEP_DIR`). Called by the
    /// harness whenever a test starts a Secret Service or makes an untrusted directory.
    static let begin: Void = {
        guard let ledgers = ledgerDirectory else { return }
        try? FileManager.default.createDirectory(at: ledgers, withIntermediateDirectories: true)
        #if KEEPSAKE_TEST_HOOKS
            Envelope.sealObserver.withLock { $0 = { SuiteSweep.add($0, to: .sealed) } }
        #endif
        atexit { SuiteSweep.writeLedgers() }
    }()

    /// Records a secret the test hands to another process (the CLI's standard input, a hint
    /// value on its command line).
    package static func record(_ secret: some DataProtocol) {
        guard directory != nil else { return }
        _ = begin
        Array(secret).withUnsafeBytes { add($0, to: .secrets) }
    }

    /// Keeps what another process wrote to its standard error (errors and log lines), so that the
    /// sweep checks it for secrets.
    package static func keepStandardError(_ bytes: Data) {
        guard let root = streamsRoot, !bytes.isEmpty else { return }
        _ = begin
        let file = root.appendingPathComponent("stderr-\(getpid())")
        streams.withLock { _ in
            try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            if !FileManager.default.fileExists(atPath: file.path) {
                _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            }
            guard let handle = try? FileHandle(forWritingTo: file) else { return }
            handle.seekToEndOfFile()
            handle.write(bytes + Data("\n".utf8))
            try? handle.close()
        }
    }

    private static func add(_ bytes: UnsafeRawBufferPointer, to ledger: Ledger) {
        guard bytes.count >= window else { return }
        var found: [UInt64] = []
        found.reserveCapacity(bytes.count - window + 1)
        for offset in 0...(bytes.count - window) {
            let value = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            if !isRepetitive(value) { found.append(value) }
        }
        windows.withLock { $0[ledger, default: []].formUnion(found) }
    }

    /// A window of one repeated byte (zero padding, "AAAA…" base64) says nothing about a secret.
    static func isRepetitive(_ value: UInt64) -> Bool {
        value == (value & 0xff) &* 0x0101_0101_0101_0101
    }

    private static func writeLedgers() {
        guard let ledgers = ledgerDirectory else { return }
        for (ledger, set) in windows.withLock({ $0 }) {
            let bytes = Array(set).withUnsafeBufferPointer { Data(buffer: $0) }
            try? bytes.write(to: ledgers.appendingPathComponent("\(ledger.rawValue)-\(getpid())"))
        }
    }

    // MARK: - The sweep

    /// Every window of `ledger` recorded by earlier test processes of this sweep directory.
    package static func recorded(_ ledger: Ledger) throws -> Set<UInt64> {
        guard let ledgers = ledgerDirectory else { return [] }
        var all = Set<UInt64>()
        for name in try FileManager.default.contentsOfDirectory(atPath: ledgers.path)
        where name.hasPrefix(ledger.rawValue + "-") {
            let data = try Data(contentsOf: ledgers.appendingPathComponent(name))
            data.withUnsafeBytes { raw in
                for offset in stride(from: 0, to: raw.count - 7, by: 8) {
                    all.insert(raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                }
            }
        }
        return all
    }

    /// Every regular file under the untrusted directories the suite made.
    package static func untrustedFiles() -> [URL] { files(under: untrustedRoot) }

    /// Every regular file under the test devices' directories (`PrivateSecretService.device`),
    /// where Keepsake seals everything it writes.
    package static func atRestFiles() -> [URL] { files(under: atRestRoot) }

    /// The permission bits of every file and directory under the test devices' directories.
    package static func atRestModes() -> [(URL, Int)] {
        guard let root = atRestRoot,
            let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        else { return [] }
        return walker.compactMap { $0 as? URL }.compactMap { url in
            var info = stat()
            guard lstat(url.path, &info) == 0 else { return nil }
            let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
            return (
                URL(fileURLWithPath: url.path, isDirectory: isDirectory), Int(info.st_mode & 0o777)
            )
        }
    }

    /// The kept standard error of every CLI run.
    package static func keptStandardError() -> [URL] { files(under: streamsRoot) }

    private static func files(under root: URL?) -> [URL] {
        guard let root,
            let walker = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isRegularFileKey])
        else { return [] }
        return walker.compactMap { $0 as? URL }.filter {
            (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
        }
    }

    /// The offsets in `bytes` where a recorded window starts.
    package static func matches(in bytes: Data, windows: Set<UInt64>) -> [Int] {
        guard bytes.count >= window else { return [] }
        return bytes.withUnsafeBytes { raw in
            (0...(raw.count - window)).filter {
                windows.contains(raw.loadUnaligned(fromByteOffset: $0, as: UInt64.self))
            }
        }
    }
}
