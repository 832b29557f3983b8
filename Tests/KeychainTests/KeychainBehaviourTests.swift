import Device
import Foundation
import KeepsakeTestSupport
import SecretService
import Synchronization
import Testing

@testable import Keychain

private func makeKeychain(_ service: PrivateSecretService? = nil, groups: [String]? = nil) throws
    -> Keychain
{
    let secretService = try service ?? PrivateSecretService.shared()
    return Keychain(
        app: try ThrowawayApp.make(accessGroups: groups), device: secretService.device())
}

@Suite("Keychain behaviour on a shared private gnome-keyring")
struct KeychainBehaviourTests {
    @Test("update keeps the creation date and moves the modification date")
    func dates() throws {
        let keychain = try makeKeychain()
        let service = UUID().uuidString
        try keychain.add(
            GenericPasswordAttributes(service: service, account: "a"), data: Data("1".utf8))
        let before = try keychain.item(matching: GenericPasswordQuery(service: service)).attributes
        waitForTheNextMillisecond()
        try keychain.update(
            matching: GenericPasswordQuery(service: service),
            with: GenericPasswordChanges(label: "new", data: Data("2".utf8)))
        let after = try keychain.item(matching: GenericPasswordQuery(service: service))
        #expect(after.attributes.creationDate == before.creationDate)
        #expect(after.attributes.modificationDate! > before.modificationDate!)
        #expect(after.attributes.label == "new")
        #expect(after.data == Data("2".utf8))
    }

    #if KEEPSAKE_TEST_HOOKS
        @Test("a cached path that now holds another item never yields that item's secret")
        func stalePathIsValidated() throws {
            let keychain = try makeKeychain()
            let service = UUID().uuidString
            try keychain.add(
                GenericPasswordAttributes(service: service, account: "mine"),
                data: Data("mine".utf8))
            try keychain.add(
                GenericPasswordAttributes(service: service, account: "other"),
                data: Data("other".utf8))
            let otherPath = try keychain.secretService.search([
                "service": service, "account": "other",
            ])
            .unlocked[0]
            let query = GenericPasswordQuery(service: service, account: "mine")
            keychain.rememberPath(otherPath, for: query)
            #expect(try keychain.data(matching: query) == Data("mine".utf8))
            // And a path that no longer exists falls back to a search.
            let gone = GenericPasswordQuery(service: service, account: "nobody")
            keychain.rememberPath(otherPath, for: gone)
            #expect(status { _ = try keychain.data(matching: gone) } == KeychainStatus.itemNotFound)
        }

    #endif

    @Test("a hot read sees another process's update and rename")
    func hotReadSeesOtherWriters() throws {
        let reader = try makeKeychain()
        let writer = Keychain(
            app: reader.app, device: try PrivateSecretService.shared().device())
        let service = UUID().uuidString
        let query = GenericPasswordQuery(service: service, account: "a")
        try writer.add(
            GenericPasswordAttributes(service: service, account: "a"), data: Data("1".utf8))
        #expect(try reader.data(matching: query) == Data("1".utf8))
        try writer.update(matching: query, with: GenericPasswordChanges(data: Data("2".utf8)))
        #expect(try reader.data(matching: query) == Data("2".utf8))
        try writer.update(matching: query, with: GenericPasswordChanges(account: "b"))
        #expect(status { _ = try reader.data(matching: query) } == KeychainStatus.itemNotFound)
    }

    @Test("concurrent adds of one primary key leave exactly one item, and every query returns it")
    func concurrentAddsOfOneKey() throws {
        let shared = try PrivateSecretService.shared()
        let app = try ThrowawayApp.make()
        let service = UUID().uuidString
        let statuses = Mutex<[KeychainStatus]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            // Separate connections, as separate processes would have — with a bound long enough
            // for eight adds in a row on a busy machine: what is under test is that exactly one
            // adds, not how fast the provider answers.
            let keychain = Keychain(
                app: app, device: shared.device(timeout: .seconds(60)))
            let result = status {
                try keychain.add(
                    GenericPasswordAttributes(service: service, account: "same"),
                    data: Data("writer \(index)".utf8))
            }
            statuses.withLock { $0.append(result) }
        }
        let results = statuses.withLock { $0 }
        #expect(results.filter { $0 == .success }.count == 1, "\(results)")
        #expect(results.filter { $0 == KeychainStatus.duplicateItem }.count == 7, "\(results)")
        let index = try shared.connection().search(["service": service])
        #expect(index.unlocked.count == 1)
        let keychain = Keychain(app: app, device: shared.device())
        let first = try keychain.data(
            matching: GenericPasswordQuery(service: service, account: "same"))
        for _ in 0..<3 {
            let fresh = Keychain(app: app, device: shared.device())
            #expect(
                try fresh.data(matching: GenericPasswordQuery(service: service, account: "same"))
                    == first)
        }
    }

    @Test("threads of one process share one Keychain freely")
    func threadsShareOneKeychain() throws {
        let keychain = try makeKeychain()
        let service = UUID().uuidString
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<10 {
                let account = "t\(thread)-\(round)"
                let query = GenericPasswordQuery(service: service, account: account)
                do {
                    try keychain.add(
                        GenericPasswordAttributes(service: service, account: account),
                        data: Data(account.utf8))
                    guard try keychain.data(matching: query) == Data(account.utf8) else {
                        failures.withLock { $0.append("wrong data for \(account)") }
                        continue
                    }
                    try keychain.update(
                        matching: query, with: GenericPasswordChanges(data: Data("x".utf8)))
                    if round % 2 == 0 { try keychain.delete(matching: query) }
                } catch {
                    failures.withLock { $0.append("\(account): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
        let left = try keychain.items(matching: GenericPasswordQuery(service: service), limit: .all)
        #expect(left.count == 40)
        #expect(left.allSatisfy { $0.data == Data("x".utf8) })
    }

    @Test("an item that is not a Keepsake record answers errSecDecode, never wrong bytes")
    func foreignRecordIsRefused() throws {
        let keychain = try makeKeychain()
        let service = UUID().uuidString
        _ = try keychain.secretService.createItem(
            label: "forged",
            attributes: [
                "xdg:schema": "org.keepsake.GenericPassword", "service": service, "account": "a",
                "access-group": keychain.app.accessGroups[0], "synchronizable": "false",
                "accessible": "ak", "keepsake-id": "x",
            ], secret: Data("KSK1 not a record".utf8))
        #expect(
            status {
                _ = try keychain.data(
                    matching: GenericPasswordQuery(service: service, account: "a"))
            }
                == KeychainStatus.decode)
    }

    @Test("items are found by secret-tool under the documented schema and attribute names")
    func secretToolFindsItems() throws {
        let shared = try PrivateSecretService.shared()
        let keychain = Keychain(app: try ThrowawayApp.make(), device: shared.device())
        let service = "st-" + UUID().uuidString
        try keychain.add(
            GenericPasswordAttributes(service: service, account: "alice"), data: Data("pw".utf8))
        let found = try Spawn.capture(
            "/usr/bin/secret-tool", ["search", "--all", "service", service],
            environment: shared.environment)
        let text = String(decoding: found.stdout + found.stderr, as: UTF8.self)
        #expect(text.contains("schema = org.keepsake.GenericPassword"))
        #expect(text.contains("attribute.account = alice"))
        #expect(text.contains("attribute.access-group = \(keychain.app.accessGroups[0])"))
    }

    @Test("a failed add leaves the store exactly as it was")
    func failedAddChangesNothing() throws {
        let keychain = try makeKeychain()
        let service = UUID().uuidString
        try keychain.add(
            GenericPasswordAttributes(service: service, account: "a"), data: Data("1".utf8))
        let before = try keychain.secretService.search(["service": service])
        #expect(
            status {
                try keychain.add(
                    GenericPasswordAttributes(service: service, account: "a"), data: Data("2".utf8))
            } == KeychainStatus.duplicateItem)
        #expect(
            status {
                try keychain.add(
                    GenericPasswordAttributes(service: service, account: "b"),
                    data: Data(count: Keychain.maximumDataSize + 1))
            } == KeychainStatus.param)
        #expect(
            status {
                try keychain.add(
                    GenericPasswordAttributes(
                        service: service, account: "c", synchronizable: true,
                        accessible: .afterFirstUnlockThisDeviceOnly), data: Data())
            } == KeychainStatus.param)
        #expect(try keychain.secretService.search(["service": service]) == before)
        #expect(
            try keychain.data(matching: GenericPasswordQuery(service: service, account: "a"))
                == Data("1".utf8))
    }

    @Test("of eight concurrent deletes of one item exactly one succeeds; the others find nothing")
    func oneAnswerPerDelete() throws {
        let first = try makeKeychain()
        for round in 0..<5 {
            let service = "delete-race-\(round)-\(UUID().uuidString)"
            try first.add(
                GenericPasswordAttributes(service: service, account: "a"), data: Data("x".utf8))
            // Eight keychains of the one app and device, as eight processes would hold.
            let keychains = (0..<8).map { _ in Keychain(app: first.app, device: first.device) }
            let outcomes = Mutex<[KeychainStatus]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                let status: KeychainStatus
                do {
                    try keychains[index].delete(
                        matching: GenericPasswordQuery(service: service, account: "a"))
                    status = .success
                } catch { status = (error as? KeychainError)?.status ?? .param }
                outcomes.withLock { $0.append(status) }
            }
            let seen = outcomes.withLock { $0 }
            #expect(seen.filter { $0 == .success }.count == 1, "round \(round): \(seen)")
            #expect(seen.filter { $0 == .itemNotFound }.count == 7, "round \(round): \(seen)")
        }
    }
}

@Suite("Keychain when the Secret Service is unavailable, locked or restarted", .serialized)
struct KeychainAvailabilityTests {
    @Test("a killed Secret Service answers errSecNotAvailable within the bound")
    func killed() throws {
        let service = try PrivateSecretService.start()
        let keychain = Keychain(
            app: try ThrowawayApp.make(), device: service.device(timeout: .seconds(1)))
        service.kill()
        let start = ContinuousClock.now
        #expect(
            status {
                _ = try keychain.data(matching: GenericPasswordQuery(service: "s", account: "a"))
            } == KeychainStatus.notAvailable)
        #expect(
            status {
                try keychain.add(
                    GenericPasswordAttributes(service: "s", account: "a"), data: Data())
            } == KeychainStatus.notAvailable)
        #expect(ContinuousClock.now - start < Pace.allowance(bound: .seconds(2)))
    }

    @Test("a frozen Secret Service answers errSecNotAvailable within the bound, never a hang")
    func frozen() throws {
        let service = try PrivateSecretService.start()
        let keychain = Keychain(
            app: try ThrowawayApp.make(),
            device: service.device(timeout: .milliseconds(800)))
        try keychain.add(
            GenericPasswordAttributes(service: "s", account: "a"), data: Data("1".utf8))
        service.freeze()
        defer { service.thaw() }
        let start = ContinuousClock.now
        var message = ""
        let result = status {
            do {
                _ = try keychain.data(matching: GenericPasswordQuery(service: "s", account: "a"))
            } catch {
                message = error.localizedDescription
                throw error
            }
        }
        #expect(result == KeychainStatus.notAvailable)
        #expect(message.contains("the Secret Service did not answer within 800 ms"), "\(message)")
        #expect(ContinuousClock.now - start < Pace.allowance(bound: .milliseconds(800)))
    }

    @Test("no session bus at all answers errSecNotAvailable")
    func noBus() throws {
        let keychain = Keychain(
            app: try ThrowawayApp.make(), secretService: SecretServiceConnection(busAddress: ""))
        #expect(
            status { _ = try keychain.data(matching: GenericPasswordQuery(service: "s")) }
                == KeychainStatus.notAvailable)
    }

    @Test("a locked collection answers errSecInteractionNotAllowed; after unlock all is readable")
    func locked() throws {
        let service = try PrivateSecretService.start()
        let keychain = Keychain(app: try ThrowawayApp.make(), device: service.device())
        try keychain.add(
            GenericPasswordAttributes(service: "s", account: "a"), data: Data("1".utf8))
        try service.lock()
        let query = GenericPasswordQuery(service: "s", account: "a")
        #expect(
            status { _ = try keychain.data(matching: query) }
                == KeychainStatus.interactionNotAllowed
        )
        #expect(
            status {
                try keychain.add(
                    GenericPasswordAttributes(service: "s", account: "b"), data: Data())
            } == KeychainStatus.interactionNotAllowed)
        #expect(
            status { try keychain.delete(matching: query) } == KeychainStatus.interactionNotAllowed)
        try service.unlock()
        #expect(try keychain.data(matching: query) == Data("1".utf8))
    }

    @Test("items survive a restart of the Secret Service, and the connection recovers by itself")
    func restart() throws {
        let service = try PrivateSecretService.start(savesAfterEveryChange: true)
        let keychain = Keychain(app: try ThrowawayApp.make(), device: service.device())
        try keychain.add(
            GenericPasswordAttributes(service: "s", account: "a"), data: Data("1".utf8))
        try service.restart()
        #expect(
            try keychain.data(matching: GenericPasswordQuery(service: "s", account: "a"))
                == Data("1".utf8))
    }
}
