import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

@testable import BlockStore
import Platform

struct EntryVector: Decodable, Sendable, CustomTestStringConvertible {
    var blockStoreKey: String
    var appID: String
    var key: String
    var bytes: String
    var shouldBackupToCloud: Bool
    var modified: Int64
    var nonce: String
    var fileName: String
    var file: String
    var testDescription: String { "\(appID) / \(key.prefix(20))" }
}
private struct EntryFile: Decodable { var vectors: [EntryVector] }
private struct CloudSample: Decodable {
    var recoveryKey: String
    var entries: [String: [String: String]]
}
private func entryVectors() throws -> [EntryVector] {
    try fixtureTable(EntryFile.self, "blockstore/entries.json", \.vectors, atLeast: 3)
}

private let sampleCloudSource = fixturesDirectory.appendingPathComponent("blockstore/cloud-sample")

/// A cloud account holding a copy of `Fixtures/blockstore/cloud-sample`, and what it holds.
private func sampleCloudAccount() throws -> (CloudSample, URL) {
    let cloud = Throwaway.untrusted("cloud")
    for name in try FileManager.default.contentsOfDirectory(atPath: sampleCloudSource.path) {
        try FileManager.default.copyItem(
            at: sampleCloudSource.appendingPathComponent(name),
            to: cloud.appendingPathComponent(name))
    }
    return (try loadFixture(CloudSample.self, "blockstore/cloud-sample.json"), cloud)
}

@Suite(
    "Block Store formats against an independent implementation (Fixtures/blockstore)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct BlockStoreFixtureTests {
    @Test(
        "a sealed local entry matches its vector byte for byte, name included, and opens back",
        arguments: try entryVectors())
    func localEntry(_ v: EntryVector) throws {
        let layout = LocalLayout(
            blockStoreKey: SecureBytes(copying: fromHex(v.blockStoreKey)),
            directory: Throwaway.directory("vector"), appID: v.appID)
        let entry = BlockStoreEntry(
            key: v.key, bytes: fromHex(v.bytes), shouldBackupToCloud: v.shouldBackupToCloud,
            modified: v.modified)
        #expect(layout.name(v.key) + ".entry" == v.fileName)
        #expect(
            KeepsakeTestSupport.hex(layout.seal(entry, nonce: Array(fromHex(v.nonce)))) == v.file)
        #expect(try layout.open(fromHex(v.file), name: String(v.fileName.dropLast(6))) == entry)
        // Under another app's layout the same file does not open.
        let other = LocalLayout(
            blockStoreKey: SecureBytes(copying: fromHex(v.blockStoreKey)),
            directory: Throwaway.directory("vector"), appID: v.appID + "x")
        #expect(throws: BlockStoreError.self) {
            try other.open(fromHex(v.file), name: String(v.fileName.dropLast(6)))
        }
    }

    @Test(
        "every single-bit flip, truncation and extension of a vector is refused, and so is the vector under another item's name, app or device",
        arguments: try entryVectors())
    func tamperedVector(_ v: EntryVector) throws {
        let file = fromHex(v.file)
        let name = String(v.fileName.dropLast(6))
        func layout(key: String = v.blockStoreKey, app: String = v.appID) -> LocalLayout {
            LocalLayout(
                blockStoreKey: SecureBytes(copying: fromHex(key)),
                directory: Throwaway.directory("vector"), appID: app)
        }
        let own = layout()
        var refused = 0
        var cases = 0
        func expectRefused(_ bytes: Data, _ layout: LocalLayout, _ name: String) {
            cases += 1
            do {
                _ = try layout.open(bytes, name: name)
            } catch {
                refused += 1
            }
        }
        for damaged in Tampered.singleBitFlips(of: file) { expectRefused(damaged, own, name) }
        for damaged in Tampered.truncationsAndExtension(of: file) {
            expectRefused(damaged, own, name)
        }
        for other in try entryVectors() where other.fileName != v.fileName {
            expectRefused(file, own, String(other.fileName.dropLast(6)))  // another item's name
            expectRefused(file, layout(key: other.blockStoreKey), name)  // another device
        }
        expectRefused(file, layout(app: "com.example.elsewhere"), name)  // another app
        #expect(refused == cases)
        print(
            "tamper: Block Store vector \(v.testDescription), \(refused) of \(cases) cases refused")
    }

    @Test(
        "every single-bit flip of a sample cloud object makes restore fail, never restore wrong bytes"
    )
    func tamperedSampleCloud() throws {
        let (sample, cloud) = try sampleCloudAccount()
        let phone = try Phone(cloud: cloud)
        try phone.account.join(
            recoveryKey: SecureBytes(copying: Data(sample.recoveryKey.utf8)))
        var refused = 0
        var cases = 0
        for name in Files.list(cloud) where name.hasPrefix("bs-") {
            let object = cloud.appendingPathComponent(name)
            let original = try Data(contentsOf: object)
            for flipped in Tampered.singleBitFlips(of: original) {
                try flipped.write(to: object)
                cases += 1
                if code({ _ = try phone.sync.restore() }) == .internalError { refused += 1 }
            }
            try original.write(to: object)
        }
        #expect(refused == cases)
        print(
            "tamper: sample cloud account objects, \(refused) of \(cases) single-bit flips refused")
        // Whatever restored before a refusal is exactly the sample's.
        for (appID, entries) in sample.entries {
            for (key, bytes) in try phone.client(appID).retrieveBytes(
                RetrieveBytesRequest(retrieveAll: true))
            {
                #expect(entries[key].map(fromHex) == bytes)
            }
        }
    }

    @Test("joining the sample cloud account with its recovery key restores exactly its entries")
    func sampleCloud() throws {
        let (sample, cloud) = try sampleCloudAccount()
        let phone = try Phone(cloud: cloud)
        try phone.account.setLockScreen(.pin, passcode: "1111", currentPasscode: nil)
        // Another recovery key, a malformed one: refused, nothing restored.
        #expect(throws: DeviceError(.authFailed, "")) {
            try phone.account.join(
                recoveryKey: "AAAA-BBBB-CCCC-DDDD-EEEE-FFFF-GGGG-HHHH")
        }
        #expect(throws: DeviceError(.invalidPasscode, "")) {
            try phone.account.join(recoveryKey: "not-a-recovery-key")
        }
        #expect(
            try phone.client("com.example.wallet").retrieveBytes(
                RetrieveBytesRequest(retrieveAll: true)
            ).isEmpty)
        // Typed back in lower case, without dashes: the same key.
        let typed = sample.recoveryKey.lowercased().replacingOccurrences(of: "-", with: "")
        try phone.account.join(recoveryKey: SecureBytes(copying: Data(typed.utf8)))
        #expect(try phone.sync.restore() == 2)
        for (appID, entries) in sample.entries {
            let restored = try phone.client(appID).retrieveBytes(
                RetrieveBytesRequest(retrieveAll: true))
            #expect(restored == entries.mapValues(fromHex))
        }
        // The joined device's sync moves the sample (written before 0.4.0, each object over in
        // place) to a copy per name, once: the same objects, each now under its name and its
        // copy's MAC, the old copies removed, nothing else appearing.
        _ = try phone.sync.sync()
        let sampleNames = Set(
            try FileManager.default.contentsOfDirectory(atPath: sampleCloudSource.path))
        let moved = Files.list(cloud)
        #expect(Set(moved.map { String($0.prefix { $0 != "_" }) }) == sampleNames)
        #expect(moved.filter { $0.hasPrefix("bs-") }.allSatisfy { $0.contains("_") })
        #expect(moved.count == sampleNames.count)
        #expect(try phone.sync.restore() == 0)  // read back from the moved copies, all there
    }
}
