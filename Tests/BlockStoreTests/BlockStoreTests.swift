import BlockStore
import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Platform
import Sealing
import SecretService
import Synchronization
import Testing

/// A phone for Block Store tests: its own Secret Service, device directory and (optionally) a
/// cloud account directory shared with other phones.
struct Phone {
    let service: PrivateSecretService
    let account: CloudAccount
    var device: Device { account.device }
    let directory: URL

    init(cloud: URL?) throws {
        service = try PrivateSecretService.start()
        account = service.account(cloud: cloud, retryPolicy: .fast)
        directory = account.device.directory
    }

    func app(_ id: String = "com.example.wallet") throws -> App {
        try App(id: id, container: service.root.appendingPathComponent("containers/\(id)"))
    }

    func client(_ id: String = "com.example.wallet") throws -> BlockStoreClient {
        BlockStoreClient(app: try app(id), device: device)
    }

    var sync: BlockStoreSync { BlockStoreSync(account: account) }
}

/// A phone for the rule tests: a device on a Secret Service of its own in memory (the rule is
/// Keepsake's, not the provider's), no cloud.
struct RulePhone {
    let device: Device
    let directory: URL
    private let root = Throwaway.directory("rule-phone")

    init() {
        device = InMemorySecretService().device()
        directory = device.directory
    }

    func app(_ id: String = "com.example.wallet") throws -> App {
        try App(id: id, container: root.appendingPathComponent("containers/\(id)"))
    }

    func client(_ id: String = "com.example.wallet") throws -> BlockStoreClient {
        BlockStoreClient(app: try app(id), device: device)
    }
}

func newCloud() -> URL { Throwaway.untrusted("cloud") }

/// Every file under `directory`, recursively.
func allFiles(_ directory: URL) -> [URL] {
    guard
        let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
    else { return [] }
    return walker.compactMap { $0 as? URL }.filter {
        !$0.hasDirectoryPath
            && (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
    }
}

func code(_ body: () throws -> Void) -> BlockStoreError.Code? {
    do {
        try body()
        return nil
    } catch let error as BlockStoreError {
        return error.code
    } catch {
        return nil
    }
}

@Suite(
    "Block Store rules (on a Secret Service in memory)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct BlockStoreRuleTests {
    @Test("16 entries are fine, a 17th key is TOO_MANY_ENTRIES, overwriting the 16th is fine")
    func entryLimit() throws {
        let phone = RulePhone()
        let client = try phone.client()
        for index in 0..<16 {
            try client.storeBytes(StoreBytesData(bytes: Data([UInt8(index)]), key: "k\(index)"))
        }
        #expect(
            code { try client.storeBytes(StoreBytesData(bytes: Data([1]), key: "k16")) }
                == .tooManyEntries)
        #expect(try client.storeBytes(StoreBytesData(bytes: Data([9, 9]), key: "k15")) == 2)
        #expect(try client.retrieveBytes(RetrieveBytesRequest(retrieveAll: true)).count == 16)
        #expect(
            try client.retrieveBytes(RetrieveBytesRequest(keys: ["k15"])) == ["k15": Data([9, 9])])
    }

    @Test("key and bytes of exactly 4096 are stored, 4097 is MAX_SIZE_EXCEEDED")
    func sizeLimit() throws {
        let phone = RulePhone()
        let client = try phone.client()
        let key = "sixteen-byte-key"
        #expect(
            try client.storeBytes(StoreBytesData(bytes: Data(count: 4096 - 16), key: key)) == 4080)
        #expect(
            code { try client.storeBytes(StoreBytesData(bytes: Data(count: 4097 - 16), key: key)) }
                == .maxSizeExceeded)
        #expect(try client.retrieveBytes(RetrieveBytesRequest(keys: [key]))[key]?.count == 4080)
        // Multi-byte keys count in UTF-8 bytes.
        #expect(
            code { try client.storeBytes(StoreBytesData(bytes: Data(count: 4095), key: "é")) }
                == .maxSizeExceeded)
    }

    @Test("the default key, overwrite, retrieve and delete semantics")
    func semantics() throws {
        let phone = RulePhone()
        let client = try phone.client()
        #expect(try client.storeBytes(StoreBytesData(bytes: Data("a".utf8))) == 1)
        #expect(
            try client.retrieveBytes(RetrieveBytesRequest(keys: [StoreBytesData.defaultKey])) == [
                StoreBytesData.defaultKey: Data("a".utf8)
            ])
        try client.storeBytes(StoreBytesData(bytes: Data("b".utf8)))
        #expect(
            try client.retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [
                StoreBytesData.defaultKey: Data("b".utf8)
            ])
        #expect(try client.retrieveBytes(RetrieveBytesRequest(keys: [])) == [:])
        #expect(
            code {
                _ = try client.retrieveBytes(RetrieveBytesRequest(keys: ["x"], retrieveAll: true))
            } == .invalidArgument)
        #expect(
            code { _ = try client.deleteBytes(DeleteBytesRequest(keys: ["x"], deleteAll: true)) }
                == .invalidArgument)
        #expect(try client.deleteBytes(DeleteBytesRequest(keys: ["absent"])) == false)
        #expect(
            try client.deleteBytes(DeleteBytesRequest(keys: [StoreBytesData.defaultKey])) == true)
        #expect(try client.deleteBytes(DeleteBytesRequest(deleteAll: true)) == false)
    }

    @Test("one app never reads another's entries, even with its files copied in")
    func perAppIsolation() throws {
        let phone = RulePhone()
        let wallet = try phone.client("com.example.wallet")
        let other = try phone.client("com.example.other")
        try wallet.storeBytes(StoreBytesData(bytes: Data("secret".utf8), key: "k"))
        #expect(try other.retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [:])
        // Copy the wallet's entry file into the other app's directory under the name the other app
        // would use for the same key: it must not open there.
        let walletDir = phone.device.appDataDirectory(
            try phone.app("com.example.wallet"), store: "blockstore")
        let otherDir = phone.device.appDataDirectory(
            try phone.app("com.example.other"), store: "blockstore")
        try other.storeBytes(StoreBytesData(bytes: Data("mine".utf8), key: "k"))
        let walletFile = Files.list(walletDir).first { $0.hasSuffix(".entry") }!
        let otherFile = Files.list(otherDir).first { $0.hasSuffix(".entry") }!
        try FileManager.default.removeItem(at: otherDir.appendingPathComponent(otherFile))
        try FileManager.default.copyItem(
            at: walletDir.appendingPathComponent(walletFile),
            to: otherDir.appendingPathComponent(otherFile))
        #expect(
            code { _ = try other.retrieveBytes(RetrieveBytesRequest(keys: ["k"])) }
                == .internalError)
    }

    @Test("an entry file copied to another device does not open there, even under its own name")
    func movedToAnotherDevice() throws {
        let phone = RulePhone()
        let other = RulePhone()
        try phone.client().storeBytes(StoreBytesData(bytes: Data("secret".utf8), key: "k"))
        try other.client().storeBytes(StoreBytesData(bytes: Data("theirs".utf8), key: "k"))
        let source = phone.device.appDataDirectory(try phone.app(), store: "blockstore")
        let target = other.device.appDataDirectory(try other.app(), store: "blockstore")
        let sourceFile = Files.list(source).first { $0.hasSuffix(".entry") }!
        let targetFile = Files.list(target).first { $0.hasSuffix(".entry") }!
        #expect(sourceFile != targetFile)  // names are keyed by the device too
        try Files.writeAtomically(
            try Data(contentsOf: source.appendingPathComponent(sourceFile)),
            to: target.appendingPathComponent(targetFile))
        #expect(
            code { _ = try other.client().retrieveBytes(RetrieveBytesRequest(keys: ["k"])) }
                == .internalError)
        #expect(
            try phone.client().retrieveBytes(RetrieveBytesRequest(keys: ["k"])) == [
                "k": Data("secret".utf8)
            ])
    }

    @Test("entries survive uninstall while backup is on, and are gone with it when backup is off")
    func uninstall() throws {
        let phone = RulePhone()
        let app = try phone.app()
        try FileManager.default.createDirectory(
            at: app.container, withIntermediateDirectories: true)
        try phone.client().storeBytes(StoreBytesData(bytes: Data("kept".utf8), key: "k"))
        try phone.device.uninstall(app)
        #expect(!FileManager.default.fileExists(atPath: app.container.path))
        #expect(
            try phone.client().retrieveBytes(RetrieveBytesRequest(keys: ["k"])) == [
                "k": Data("kept".utf8)
            ])
        try phone.device.updateSettings { $0.backupEnabled = false }
        try phone.device.uninstall(app)
        #expect(try phone.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [:])
    }

    @Test("a device without Block Store answers FEATURE_NOT_SUPPORTED to every call")
    func featureNotSupported() throws {
        let phone = RulePhone()
        try phone.device.updateSettings { $0.blockStoreAvailable = false }
        let client = try phone.client()
        #expect(
            code { try client.storeBytes(StoreBytesData(bytes: Data([1]))) } == .featureNotSupported
        )
        #expect(
            code { _ = try client.retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) }
                == .featureNotSupported)
        #expect(
            code { _ = try client.deleteBytes(DeleteBytesRequest(deleteAll: true)) }
                == .featureNotSupported)
        #expect(code { _ = try client.isEndToEndEncryptionAvailable() } == .featureNotSupported)
    }

    @Test("local files are 0600 in 0700 directories and their names reveal no key")
    func fileHygiene() throws {
        let phone = RulePhone()
        try phone.client().storeBytes(
            StoreBytesData(bytes: Data("v".utf8), key: "recovery-hint-key"))
        for file in allFiles(phone.directory) {
            let mode =
                (try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions]
                    as? Int) ?? 0
            #expect(mode == 0o600, "\(file.lastPathComponent)")
            #expect(!file.path.contains("recovery-hint-key"))
            #expect(try Data(contentsOf: file).range(of: Data("recovery-hint-key".utf8)) == nil)
        }
        let dir = phone.device.appDataDirectory(try phone.app(), store: "blockstore")
        #expect(
            (try FileManager.default.attributesOfItem(atPath: dir.path)[.posixPermissions] as? Int)
                == 0o700)
    }

    @Test(
        "flipping any single bit of a local entry file gives an error, never wrong bytes")
    func localBitFlips() throws {
        let phone = RulePhone()
        let client = try phone.client()
        try client.storeBytes(StoreBytesData(bytes: Data("the hint".utf8), key: "k"))
        let dir = phone.device.appDataDirectory(try phone.app(), store: "blockstore")
        let file = dir.appendingPathComponent(Files.list(dir).first { $0.hasSuffix(".entry") }!)
        let original = try Data(contentsOf: file)
        var refused = 0
        for flipped in Tampered.singleBitFlips(of: original) {
            try flipped.write(to: file)
            if code({ _ = try client.retrieveBytes(RetrieveBytesRequest(keys: ["k"])) })
                == .internalError
            {
                refused += 1
            }
        }
        #expect(refused == original.count * 8)
        print(
            "tamper: local Block Store entry, \(refused) of \(original.count * 8) single-bit flips refused"
        )
        try original.write(to: file)
        #expect(
            try client.retrieveBytes(RetrieveBytesRequest(keys: ["k"])) == [
                "k": Data("the hint".utf8)
            ])
    }
}

@Suite("Block Store on a locked or gone Secret Service")
struct BlockStoreProviderTests {
    @Test(
        "a locked Secret Service is RESOLUTION_REQUIRED saying how to unlock, a gone one API_NOT_CONNECTED — as the Keychain tells errSecInteractionNotAllowed from errSecNotAvailable, never INTERNAL_ERROR"
    )
    func lockedAndUnavailable() throws {
        let phone = try Phone(cloud: nil)
        try phone.service.lock()
        do {
            _ = try phone.client().storeBytes(StoreBytesData(bytes: Data([1]), key: "k"))
            Issue.record("stored with the collection locked")
        } catch let error as BlockStoreError {
            #expect(error.code == .resolutionRequired, "\(error)")
            #expect(error.message.contains("unlock it"), "\(error)")
        }
        phone.service.kill()
        let fresh = BlockStoreClient(
            app: try phone.app(), device: phone.service.device(retryPolicy: .fast))
        #expect(
            code { _ = try fresh.retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) }
                == .apiNotConnected)
    }
}

@Suite(
    "Block Store cloud copies and devices (two private Secret Services sharing a cloud)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct BlockStoreCloudTests {
    @Test(
        "without a knowledge-factor lock screen the cloud directory stays empty after every operation and sync"
    )
    func noLockScreenNoCloud() throws {
        let cloud = newCloud()
        let phone = try Phone(cloud: cloud)
        let client = try phone.client()
        for kind in [LockScreenKind.none, .swipe] {
            try phone.account.setLockScreen(kind, passcode: nil, currentPasscode: nil)
            #expect(try client.isEndToEndEncryptionAvailable() == false)
            try client.storeBytes(
                StoreBytesData(bytes: Data("hint".utf8), key: "k", shouldBackupToCloud: true))
            #expect(try phone.sync.sync().uploaded == 0)
            _ = try client.retrieveBytes(RetrieveBytesRequest(retrieveAll: true))
            _ = try client.deleteBytes(DeleteBytesRequest(keys: ["k"]))
            _ = try phone.sync.sync()
            #expect(allFiles(cloud).isEmpty)
        }
    }

    @Test(
        "with a pin: a new device restores backed-up entries with the right pin, nothing with a wrong one"
    )
    func restoreOnNewDevice() throws {
        let cloud = newCloud()
        let old = try Phone(cloud: cloud)
        try old.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let client = try old.client()
        try client.storeBytes(
            StoreBytesData(
                bytes: Data("backed up".utf8), key: "hint-key", shouldBackupToCloud: true))
        try client.storeBytes(
            StoreBytesData(bytes: Data("local only".utf8), key: "local", shouldBackupToCloud: false)
        )
        #expect(try old.sync.sync().uploaded == 1)
        // Nothing in the cloud in clear, and no name reveals an app id or key.
        for file in allFiles(cloud) {
            let bytes = try Data(contentsOf: file)
            for plain in ["backed up", "local only", "hint-key", "com.example.wallet"] {
                #expect(bytes.range(of: Data(plain.utf8)) == nil)
                #expect(!file.lastPathComponent.contains(plain))
            }
        }

        let new = try Phone(cloud: cloud)
        try new.account.setLockScreen(.pin, passcode: "5555", currentPasscode: nil)
        #expect(code { try new.sync.join(passcode: "0000") } == .internalError)
        #expect(try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [:])
        // The wrong claim was counted by the cloud's escrow (JoinTests pins its limit of 10).
        #expect(try new.sync.join(passcode: "1234") == 1)
        #expect(
            try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [
                "hint-key": Data("backed up".utf8)
            ])
    }

    @Test(
        "storing a key with shouldBackupToCloud false removes its earlier cloud copy at the next sync (the deletion trap)"
    )
    func deletionTrap() throws {
        let cloud = newCloud()
        let phone = try Phone(cloud: cloud)
        try phone.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let client = try phone.client()
        try client.storeBytes(
            StoreBytesData(bytes: Data("v1".utf8), key: "hint", shouldBackupToCloud: true))
        _ = try phone.sync.sync()
        #expect(Files.list(cloud).filter { $0.hasPrefix("bs-") }.count == 1)
        try client.storeBytes(
            StoreBytesData(bytes: Data("v2".utf8), key: "hint", shouldBackupToCloud: false))
        // The copy is replaced by a deletion marker (no bytes), which a restore skips.
        #expect(try phone.sync.sync().removed == 1)
        #expect(Files.list(cloud).filter { $0.hasPrefix("bs-") }.count == 1)
        // Deleting a backed-up key replaces its copy too.
        try client.storeBytes(
            StoreBytesData(bytes: Data("v3".utf8), key: "other", shouldBackupToCloud: true))
        _ = try phone.sync.sync()
        _ = try client.deleteBytes(DeleteBytesRequest(keys: ["other"]))
        #expect(try phone.sync.sync().removed == 1)
        #expect(Files.list(cloud).filter { $0.hasPrefix("bs-") }.count == 2)
        let new = try Phone(cloud: cloud)
        try new.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        #expect(try new.sync.join(passcode: "1234") == 0)
        #expect(try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)).isEmpty)
    }

    @Test(
        "a sync whose manifest write the cloud refuses forgets nothing: the deletion is made at the next sync, and a new device never restores the deleted entry"
    )
    func failedCommitForgetsNothing() throws {
        let cloud = newCloud()
        // The cloud refuses the manifest's write while `refusing`: a commit that fails (a server
        // answering 5xx, a connection dropped) at the one moment it matters.
        let refusing = Mutex(false)
        let storage = InterceptedCloud(CloudDirectory(cloud)) { name in
            if name == "account-manifest", refusing.withLock({ $0 }) {
                throw HarnessError("the cloud refused the manifest's write")
            }
        }
        let service = try PrivateSecretService.start()
        let device = service.account(
            cloud: storage, escrow: try PrivateEscrow.of(cloud).configuration, tuning: .fast)
        try device.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let client = BlockStoreClient(
            app: try App(
                id: "com.example.wallet",
                container: service.root.appendingPathComponent("containers/com.example.wallet")),
            device: device.device)
        try client.storeBytes(
            StoreBytesData(bytes: Data("gone".utf8), key: "other", shouldBackupToCloud: true))
        #expect(try BlockStoreSync(account: device).sync().uploaded == 1)
        _ = try client.deleteBytes(DeleteBytesRequest(keys: ["other"]))
        refusing.withLock { $0 = true }
        #expect(throws: BlockStoreError.self) { try BlockStoreSync(account: device).sync() }
        refusing.withLock { $0 = false }
        #expect(try BlockStoreSync(account: device).sync().removed == 1)
        let new = try Phone(cloud: cloud)
        try new.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        _ = try new.sync.join(passcode: "1234")
        #expect(try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)).isEmpty)
    }

    @Test(
        "flipping any single bit of a cloud object makes restore fail, never restore wrong bytes",
        .enabled(
            if: PrivateSecretService.runsKeepsakesOwnRules,
            "Keepsake's own rule: gnome-keyring pass"))
    func cloudBitFlips() throws {
        let cloud = newCloud()
        let old = try Phone(cloud: cloud)
        try old.account.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        try old.client().storeBytes(
            StoreBytesData(bytes: Data("v".utf8), key: "k", shouldBackupToCloud: true))
        _ = try old.sync.sync()
        let new = try Phone(cloud: cloud)
        try new.account.join(passcode: "1234")
        let object = cloud.appendingPathComponent(Files.list(cloud).first { $0.hasPrefix("bs-") }!)
        let original = try Data(contentsOf: object)
        var refused = 0
        for flipped in Tampered.singleBitFlips(of: original) {
            try flipped.write(to: object)
            if code({ _ = try new.sync.restore() }) == .internalError { refused += 1 }
        }
        #expect(refused == original.count * 8)
        print(
            "tamper: cloud Block Store object, \(refused) of \(original.count * 8) single-bit flips refused"
        )
        #expect(try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [:])
    }

    @Test(
        "device-to-device transfer carries the local entries without the cloud, only with its key")
    func deviceToDevice() throws {
        let old = try Phone(cloud: nil)
        // A key long enough that random ciphertext never holds it by chance ("k1" did, 1 in ~100).
        let key1 = "transfer-key-one-\(UUID().uuidString)"
        try old.client().storeBytes(StoreBytesData(bytes: Data("a".utf8), key: key1))
        try old.client("com.example.other").storeBytes(
            StoreBytesData(bytes: Data("b".utf8), key: "k2", shouldBackupToCloud: true))
        let (bundle, key) = try old.sync.transferOut()
        #expect(bundle.range(of: Data(key1.utf8)) == nil)
        let new = try Phone(cloud: nil)
        #expect(
            code { try new.sync.transferIn(bundle, key: String(repeating: "0", count: 64)) }
                == .internalError)
        var tampered = bundle
        tampered[tampered.count - 1] ^= 1
        #expect(code { try new.sync.transferIn(tampered, key: key) } == .internalError)
        #expect(try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [:])
        #expect(try new.sync.transferIn(bundle, key: key) == 2)
        #expect(
            try new.client().retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) == [
                key1: Data("a".utf8)
            ])
        #expect(
            try new.client("com.example.other").retrieveBytes(
                RetrieveBytesRequest(retrieveAll: true)) == ["k2": Data("b".utf8)])
    }
}
