import BlockStore
import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import RecoveryHint
import Sealing
import Synchronization
import Testing

@Suite("async forms: the blocking calls on threads of their own")
struct AsyncTests {
    @Test(
        "the async forms do what the blocking ones do, and 24 of them at once (more than the cooperative pool has threads) run side by side while a task of the pool keeps running"
    )
    func asyncForms() async throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: .fast)
        try await device.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        try device.reboot()
        _ = try await device.unlock(passcode: "4711")
        #expect(try device.state() == .unlocked)
        let app = try ThrowawayApp.make(id: "com.example.async")
        let keychain = Keychain(app: app, device: device)
        try await keychain.add(
            GenericPasswordAttributes(service: "async", account: "a"), data: Data("one".utf8))
        let query = GenericPasswordQuery(service: "async", account: "a")
        #expect(try await keychain.data(matching: query) == Data("one".utf8))
        let blockStore = BlockStoreClient(app: app, device: device)
        try await blockStore.storeBytes(StoreBytesData(bytes: Data("b".utf8), key: "k"))
        #expect(
            try await blockStore.retrieveBytes(RetrieveBytesRequest(keys: ["k"]))["k"]
                == Data("b".utf8))
        // 24 reads at once, and a task of the pool counting meanwhile.
        let ticks = Mutex(0)
        let heartbeat = Task {
            while !Task.isCancelled {
                ticks.withLock { $0 += 1 }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        try await withThrowingTaskGroup(of: Data.self) { group in
            for _ in 0..<24 { group.addTask { try await keychain.data(matching: query) } }
            for try await data in group { #expect(data == Data("one".utf8)) }
        }
        heartbeat.cancel()
        #expect(ticks.withLock { $0 } > 0)
        try await keychain.delete(matching: query)
        #expect(try await keychain.dataIfPresent(matching: query) == nil)
    }
}
