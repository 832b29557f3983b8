import Foundation
import KeepsakeCLI
import Keychain

/// `keepsake-dev bench get --app-id A --service S --account A [--rounds N]`: the Swift side of
/// scripts/bench-rust — the Keychain read that `keepsake_password_get` makes (the same app,
/// device and query, on whatever Secret Service the session runs), timed in this process.
/// Prints the median, in microseconds, as the Rust side (`examples/entry.rs bench`) does.
enum GetBenchmark {
    static func run(_ context: Context) throws {
        try context.arguments.allowOnly(["app-id", "service", "account", "rounds"])
        let rounds = try context.arguments.count("rounds", default: 300, in: 1...100_000)
        guard let service = context.arguments.value("service"),
            let account = context.arguments.value("account")
        else { throw CommandError.usage("bench get --app-id A --service S --account A") }
        let keychain = Keychain(app: context.app, device: context.device)
        let query = GenericPasswordQuery(service: service, account: account, synchronizable: .no)
        _ = try keychain.data(matching: query)
        var times: [Double] = []
        for _ in 0..<rounds {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try keychain.data(matching: query)
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        print(String(format: "%.1f", times.median))
    }
}
