import Foundation
import KeepsakeTestSupport
import Testing

/// Runs after the rest of the suite, in a process of its own (`scripts/test`): see `SuiteSweep`.
@Suite("Suite-wide sweep of untrusted storage")
struct SuiteWideSweep {
    /// A file's name as it is checked for secrets: an atomic write's temporary file
    /// (`.<name>.<UUID>.tmp`, left behind by a process killed mid-write) without the UUID that
    /// `Files.writeAtomically` drew for it. A UUID's dashes and version digit leave an 8-byte
    /// window of it about 20 random bits, so it can meet a secret that is itself a UUID by
    /// chance; the name it was written for is checked as every name is.
    static func checkedName(_ file: URL) -> String {
        let name = file.lastPathComponent
        let uuidLength = 36
        guard name.hasPrefix("."), name.hasSuffix(".tmp"), name.count > uuidLength + 5,
            UUID(uuidString: String(name.dropLast(4).suffix(uuidLength))) != nil
        else { return name }
        return String(name.dropLast(4 + uuidLength))
    }

    @Test(
        "no cloud account, transfer file or device directory made during the suite holds an 8-byte sequence of any plaintext sealed or secret stored; no file name, error or log line of the CLI holds a secret",
        .enabled(if: SuiteSweep.directory != nil, "run by scripts/test after the whole suite"))
    func sweep() throws {
        let secrets = try SuiteSweep.recorded(.secrets)
        let sealedOrSecret = try SuiteSweep.recorded(.sealed).union(secrets)
        // A device directory's clear files are the device's settings (backup on, Block Store
        // available: no secret, and JSON whose punctuation matches sealed JSON by chance) and its
        // public device ID (which sealed device lists name on purpose).
        let files =
            SuiteSweep.untrustedFiles()
            + SuiteSweep.atRestFiles().filter {
                !["settings.json", "device-id"].contains($0.lastPathComponent)
            }
        let logs = SuiteSweep.keptStandardError()
        // Not vacuous: the suite sealed plenty, gave the CLI secrets and left plenty behind.
        #expect(
            sealedOrSecret.count > 10_000, "the ledger is nearly empty: did the suite run first?")
        #expect(secrets.count > 100, "few secrets recorded: did the CLI tests run first?")
        #expect(files.count > 50, "too few untrusted files: did the suite run first?")
        #expect(!logs.isEmpty, "no standard error kept: did the CLI tests run first?")
        var bytes = 0
        // What the chance of a match by coincidence is figured from (docs/testing.md, "Checks
        // that could pass or fail by chance"): sealed bytes checked against every window, and
        // text (clear JSON, names, standard error) checked against the secrets' windows.
        var sealedBytes = 0
        var textBytes = 0
        for file in files {
            let data = try Data(contentsOf: file)
            bytes += data.count
            // The cloud account's own clear objects (`account`, `account-escrow`, `join-…`: a
            // check value, an escrow slot's ID, public keys, nonces, a commitment) are JSON by design:
            // their punctuation and numbers meet sealed JSON by chance at 8 bytes, as
            // settings.json's do. They are checked for the secrets themselves, as names and logs
            // are (and JoinTests checks them for anything derived from the passcode).
            // A device's `cloud-strays` lists cloud object names (keyed hashes, public in the
            // cloud already) and times; its sync manifests (`cloud-manifest`, the Keychain's
            // `manifest`) list those names with keyed digests of what was uploaded: hex, which
            // meets the hex-rich sealed records by chance at 8 bytes, so
            // checked for the secrets themselves as names are. Its `cloud-synced` holds the
            // stores' names (with app ids, as the `apps/` folder names are) and times of day. Its
            // `account-manifest-seen` is the account's id (hex) and the highest epoch and version
            // seen, all public in the cloud's own manifest.
            let clearByDesign =
                [
                    "account", "account-escrow", "cloud-strays", "cloud-manifest", "manifest",
                    "cloud-synced", "account-manifest-seen",
                ]
                .contains(file.lastPathComponent)
                || (file.lastPathComponent.hasPrefix("join-")
                    && !file.lastPathComponent.hasSuffix("-approval"))
            if clearByDesign { textBytes += data.count } else { sealedBytes += data.count }
            let found = SuiteSweep.matches(
                in: data, windows: clearByDesign ? secrets : sealedOrSecret)
            #expect(
                found.isEmpty,
                "\(file.lastPathComponent) holds recorded plaintext at offsets \(found.prefix(5))")
            // Names are hex and UUIDs: 8 such characters carry ~32 bits, so against the sealed
            // records (full of item UUIDs and hex) they collide by chance; a name is checked for
            // the secrets themselves, as errors and logs are.
            let name = Data(Self.checkedName(file).utf8)
            textBytes += name.count
            #expect(
                SuiteSweep.matches(in: name, windows: secrets).isEmpty,
                "the name \(file.lastPathComponent) holds a secret")
        }
        var logBytes = 0
        for log in logs {
            let data = try Data(contentsOf: log)
            logBytes += data.count
            textBytes += data.count
            let found = SuiteSweep.matches(in: data, windows: secrets)
            #expect(found.isEmpty, "standard error holds a secret at offsets \(found.prefix(5))")
        }
        // Every file Keepsake left in a device directory is 0600, every directory 0700.
        let modes = SuiteSweep.atRestModes()
        #expect(modes.count > 100)
        for (path, mode) in modes {
            #expect(
                mode == (path.hasDirectoryPath ? 0o700 : 0o600),
                "\(path.path): \(String(mode, radix: 8))")
        }
        // No check above passes or fails by chance: a match by coincidence, in random bytes or in
        // random hex, decimal, UUID or base64 text, has a chance below 10⁻⁹ a run, figured here
        // from what was swept. A secret of 8–15 bytes that such text can spell (no space, newline
        // or other punctuation) would break that: names, clear JSON and logs are full of it.
        let chance =
            SuiteSweep.chance(inRandomBytes: sealedBytes, of: sealedOrSecret)
            + SuiteSweep.chance(inText: textBytes, of: secrets)
        #expect(
            chance < 1e-9,
            "a match by chance is too likely (\(chance) a run); secrets random text can spell: \(SuiteSweep.spelledByRandomText(secrets).prefix(10))"
        )
        // And the sweep does find a recorded sequence of either length when one is planted. (At
        // offset 2 among others: offset 1 matches too when the window follows the x of a "0x…"
        // wallet.)
        let planted = [
            secrets.short.first.map { value in withUnsafeBytes(of: value) { Data($0) } },
            secrets.long.first?.bytes,
        ].compactMap { $0 }
        #expect(planted.count == 2, "no secret of 8–15 bytes, or none of 16 or more, recorded")
        for window in planted {
            #expect(
                SuiteSweep.matches(in: Data("xx".utf8) + window, windows: secrets).contains(2))
        }
        print(
            "sweep: \(files.count) untrusted and device files (\(bytes) bytes) against \(sealedOrSecret.count) sealed or secret sequences (\(sealedOrSecret.short.count) of 8 bytes, the rest of 16); \(logBytes) bytes of CLI errors and logs against \(secrets.count) secret ones; chance of a match by coincidence \(chance) a run"
        )
    }
}
