import Foundation
import KeepsakeTestSupport
import Testing

/// Runs after the rest of the suite, in a process of its own (`scripts/test`): see `SuiteSweep`.
@Suite("Suite-wide sweep of untrusted storage")
struct SuiteWideSweep {
    @Test(
        "no cloud account or transfer file made during the suite holds, in its bytes or its name, an 8-byte sequence of any plaintext sealed or secret stored",
        .enabled(if: SuiteSweep.directory != nil, "run by scripts/test after the whole suite"))
    func sweep() throws {
        let windows = try SuiteSweep.recordedWindows()
        let files = SuiteSweep.untrustedFiles()
        // Not vacuous: the suite sealed plenty and left plenty in untrusted storage.
        #expect(windows.count > 10_000, "the ledger is nearly empty: did the suite run first?")
        #expect(files.count > 50, "too few untrusted files: did the suite run first?")
        var bytes = 0
        for file in files {
            let data = try Data(contentsOf: file)
            bytes += data.count
            let found = SuiteSweep.matches(in: data, windows: windows)
            #expect(
                found.isEmpty,
                "\(file.lastPathComponent) holds recorded plaintext at offsets \(found.prefix(5))")
            let name = Data(file.lastPathComponent.utf8)
            #expect(
                SuiteSweep.matches(in: name, windows: windows).isEmpty,
                "the name \(file.lastPathComponent) holds recorded plaintext")
        }
        // And the sweep does find a recorded sequence when one is planted.
        let planted = withUnsafeBytes(of: windows.first!) { Data($0) }
        #expect(SuiteSweep.matches(in: Data("xx".utf8) + planted, windows: windows) == [2])
        print(
            "sweep: \(files.count) untrusted files, \(bytes) bytes, against \(windows.count) recorded 8-byte sequences"
        )
    }
}
