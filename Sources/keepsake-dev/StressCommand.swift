import AppWiring
import BlockStore
import Device
import Foundation
import KeepsakeCLI
import KeepsakeTestSupport
import Keychain
import RecoveryHint
import SecretService

/// `keepsake stress --worker N --ops M`: one worker of the load test. Mixed Keychain, Block Store
/// and hint operations on the device; prints a JSON summary (counts of each status met). Used by
/// the test suite with several workers at once on one device.
enum StressCommand {
    static func run(_ context: Context) throws {
        try context.arguments.allowOnly(["worker", "ops"])
        let worker = try context.arguments.count("worker", default: 0, in: 0...1000)
        let ops = try context.arguments.count("ops", default: 200, in: 1...100_000)
        // The load test checks correctness under contention (no lost update, no duplicate); the
        // 5 s bound itself is the fault suites' business. Eight workers beside a whole parallel
        // suite on two starved cores can wait longer than that for gnome-keyring, so the workers
        // wait up to 60 s.
        let account = try OpenedApp(
            try Context.options(context.arguments, tuning: context.opened.options.tuning),
            secretService: SecretServiceConnection(
                busAddress: ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"],
                timeout: .seconds(60))
        ).account()
        let device = account.device
        let keychain = Keychain(app: context.app, device: device)
        let blockStore = BlockStoreClient(app: context.app, device: device)
        let hints = try RecoveryHintService.make(
            profile: .linux, app: context.app, account: account)
        var outcomes: [String: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        func record(_ body: () throws -> Void) {
            do {
                try body()
                outcomes["ok", default: 0] += 1
            } catch let error as KeychainError {
                // An expected status counts by name; anything else keeps its message, so a failed
                // load run says what happened (messages carry paths and reasons, never values).
                let expected: Set<KeychainStatus> = [.duplicateItem, .itemNotFound]
                outcomes[
                    expected.contains(error.code) ? error.statusName : error.description,
                    default: 0] += 1
            } catch let error as BlockStoreError {
                outcomes[error.code.description, default: 0] += 1
            } catch {
                outcomes["other: \(error)", default: 0] += 1
            }
        }
        for op in 0..<ops {
            let mine = GenericPasswordQuery(service: "stress", account: "w\(worker)")
            let shared = GenericPasswordQuery(service: "stress", account: "shared")
            switch op % 8 {
            case 0:
                record {
                    try keychain.add(
                        GenericPasswordAttributes(service: "stress", account: "w\(worker)"),
                        data: Data("\(op)".utf8))
                }
            case 1:
                record {
                    try keychain.update(
                        matching: mine, with: GenericPasswordChanges(data: Data("\(op)".utf8)))
                }
            case 2: record { _ = try keychain.data(matching: mine) }
            case 3:
                record {
                    try keychain.add(
                        GenericPasswordAttributes(service: "stress", account: "shared"),
                        data: Data("w\(worker)".utf8))
                }
            case 4: record { _ = try keychain.data(matching: shared) }
            case 5:
                record {
                    try blockStore.storeBytes(
                        StoreBytesData(
                            bytes: Data("\(worker)-\(op)".utf8),
                            key: "k\(worker)-\(Int.random(in: 0..<3, using: &generator))"))
                }
            case 6:
                record { _ = try blockStore.retrieveBytes(RetrieveBytesRequest(retrieveAll: true)) }
            default:
                record {
                    _ = try hints.update(
                        RecoveryHint(
                            lastAuthenticatorId: worker % 2 == 0 ? "a\(worker)-\(op)" : nil,
                            lastWallet: worker % 2 == 1 ? testWallet("w\(worker)-\(op)") : nil))
                }
            }
        }
        // The worker's own item ends with its last value.
        record {
            try keychain.update(
                matching: GenericPasswordQuery(service: "stress", account: "w\(worker)"),
                with: GenericPasswordChanges(data: Data("final-\(worker)".utf8)))
        }
        Output.json(outcomes)
    }
}
