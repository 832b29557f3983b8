import Foundation
import Sealing
import Synchronization

/// The suite-wide hygiene sweep: untrusted storage never holds a plaintext byte sequence of any
/// secret stored during the whole test suite, and no error or log line holds a secret.
///
/// `scripts/test` runs the suite with `KEEPSAKE_SWEEP_DIR` set. Then the test process records,
/// as sets of windows (`Windows`: 16 bytes long, or 8 of a sequence shorter than 16), two ledgers:
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
    /// Sequences this long or longer are tracked as windows of this length, shorter ones as
    /// windows of `window` bytes. A position of random bytes starts a given 8-byte window with
    /// probability 2⁻⁶⁴: against the tens of megabytes swept and the hundreds of thousands of
    /// windows sealed, about 10⁻⁶ a run. A 16-byte window's is 2⁻¹²⁸ (docs/testing.md, "Checks
    /// that could pass or fail by chance"). The cost: a leaked piece of 8–15 bytes of a longer
    /// plaintext goes unseen by the sweep.
    package static let longWindow = 16

    /// A 16-byte window: its first and its last 8 bytes, as loaded from memory.
    package struct LongWindow: Hashable, Sendable {
        package var first: UInt64
        package var last: UInt64

        /// Its bytes.
        package var bytes: Data {
            withUnsafeBytes(of: first) { Data($0) } + withUnsafeBytes(of: last) { Data($0) }
        }

        static func load(_ raw: UnsafeRawBufferPointer, at offset: Int) -> LongWindow {
            LongWindow(
                first: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self),
                last: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
        }
    }

    /// A ledger's windows: every 16-byte window of each sequence of 16 bytes or more, and every
    /// 8-byte window of each sequence of 8 to 15 bytes.
    package struct Windows: Sendable {
        package var short: Set<UInt64> = []
        package var long: Set<LongWindow> = []

        package var count: Int { short.count + long.count }

        package func union(_ other: Windows) -> Windows {
            Windows(short: short.union(other.short), long: long.union(other.long))
        }

        mutating func formUnion(_ other: Windows) {
            short.formUnion(other.short)
            long.formUnion(other.long)
        }

        /// The bytes of every window, short ones first.
        package var allBytes: [Data] {
            short.map { value in withUnsafeBytes(of: value) { Data($0) } } + long.map(\.bytes)
        }
    }

    package enum Ledger: String, CaseIterable, Sendable { case sealed, secrets }

    package static let directory: URL? = ProcessInfo.processInfo.environment["KEEPSAKE_SWEEP_DIR"]
        .map { URL(fileURLWithPath: $0) }

    static var untrustedRoot: URL? { directory?.appendingPathComponent("untrusted") }
    static var atRestRoot: URL? { directory?.appendingPathComponent("at-rest") }
    static var streamsRoot: URL? { directory?.appendingPathComponent("streams") }
    static var ledgerDirectory: URL? { directory?.appendingPathComponent("ledgers") }

    private static let windows = Mutex<[Ledger: Windows]>([:])
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
        var found = Windows()
        if bytes.count < longWindow {
            for offset in 0...(bytes.count - window) {
                let value = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                if !isRepetitive(value) { found.short.insert(value) }
            }
        } else {
            for offset in 0...(bytes.count - longWindow) {
                let value = LongWindow.load(bytes, at: offset)
                if !(value.first == value.last && isRepetitive(value.first)) {
                    found.long.insert(value)
                }
            }
        }
        windows.withLock { $0[ledger, default: Windows()].formUnion(found) }
    }

    /// A window of one repeated byte (zero padding, "AAAA…" base64) says nothing about a secret.
    static func isRepetitive(_ value: UInt64) -> Bool {
        value == (value & 0xff) &* 0x0101_0101_0101_0101
    }

    /// How the files of `ledger`'s windows of `width` bytes begin; each process's file goes on
    /// with its pid and holds the windows one after the other.
    private static func ledgerPrefix(_ ledger: Ledger, width: Int) -> String {
        "\(ledger.rawValue)-\(width)-"
    }

    private static func writeLedgers() {
        guard let ledgers = ledgerDirectory else { return }
        for (ledger, set) in windows.withLock({ $0 }) {
            let short = Array(set.short).withUnsafeBufferPointer { Data(buffer: $0) }
            let long = set.long.flatMap { [$0.first, $0.last] }
                .withUnsafeBufferPointer { Data(buffer: $0) }
            for (width, bytes) in [(window, short), (longWindow, long)] {
                try? bytes.write(
                    to: ledgers.appendingPathComponent(
                        ledgerPrefix(ledger, width: width) + "\(getpid())"))
            }
        }
    }

    // MARK: - The sweep

    /// Every window of `ledger` recorded by earlier test processes of this sweep directory.
    package static func recorded(_ ledger: Ledger) throws -> Windows {
        guard let ledgers = ledgerDirectory else { return Windows() }
        var all = Windows()
        for name in try FileManager.default.contentsOfDirectory(atPath: ledgers.path) {
            let isShort = name.hasPrefix(ledgerPrefix(ledger, width: window))
            let isLong = name.hasPrefix(ledgerPrefix(ledger, width: longWindow))
            guard isShort || isLong else { continue }
            let data = try Data(contentsOf: ledgers.appendingPathComponent(name))
            data.withUnsafeBytes { raw in
                if isShort {
                    for offset in stride(from: 0, to: raw.count - 7, by: 8) {
                        all.short.insert(raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                    }
                } else {
                    for offset in stride(from: 0, to: raw.count - 15, by: 16) {
                        all.long.insert(LongWindow.load(raw, at: offset))
                    }
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
    package static func matches(in bytes: Data, windows: Windows) -> [Int] {
        guard bytes.count >= window else { return [] }
        return bytes.withUnsafeBytes { raw in
            (0...(raw.count - window)).filter { offset in
                windows.short.contains(raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                    || (offset + longWindow <= raw.count
                        && windows.long.contains(LongWindow.load(raw, at: offset)))
            }
        }
    }

    // MARK: - The chance of a match by coincidence

    /// The chance that `count` bytes of random data (sealed files: nonces, ciphertext, MACs) hold
    /// one of `windows` by coincidence: at most 2⁻⁶⁴ a position for each 8-byte window and 2⁻¹²⁸
    /// for each 16-byte one.
    package static func chance(inRandomBytes count: Int, of windows: Windows) -> Double {
        Double(count)
            * (Double(windows.short.count) * 0x1p-64 + Double(windows.long.count) * 0x1p-128)
    }

    /// The alphabets of the random text that names, clear JSON and standard error hold: decimal
    /// numbers, hex and UUIDs in either case, base64 (and `mkdtemp`'s letters and digits in
    /// throwaway paths).
    static let textAlphabets: [Set<UInt8>] = [
        "0123456789", "0123456789abcdef-", "0123456789ABCDEF-",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
    ].map { Set($0.utf8) }

    /// The chance that one position of random text in one of `textAlphabets`, or of random bytes,
    /// starts `window`: 256⁻ⁿ, plus a⁻ⁿ for each alphabet of a characters that spells it.
    static func chance(atOnePositionOf window: Data) -> Double {
        let length = Double(window.count)
        return textAlphabets.filter { alphabet in window.allSatisfy { alphabet.contains($0) } }
            .reduce(pow(256, -length)) {
                $0 + pow(Double($1.count), -length)
            }
    }

    /// The chance that `count` bytes of names, clear JSON or standard error hold one of
    /// `windows` by coincidence (each of them random text or random bytes at worst).
    package static func chance(inText count: Int, of windows: Windows) -> Double {
        Double(count) * windows.allBytes.reduce(0) { $0 + chance(atOnePositionOf: $1) }
    }

    /// The windows that random text can spell (hex, decimal, UUID or base64 characters only),
    /// shortest first: where a chance match in names, clear JSON and logs comes from.
    package static func spelledByRandomText(_ windows: Windows) -> [String] {
        windows.allBytes.filter { window in
            textAlphabets.contains { alphabet in window.allSatisfy { alphabet.contains($0) } }
        }
        .map { String(decoding: $0, as: UTF8.self) }
    }
}
