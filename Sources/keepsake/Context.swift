import Device
import Foundation
import Sealing
import SecretService

/// What every command shares: the app, its container and the device's places, from the global
/// options, else the environment, else defaults under `$XDG_DATA_HOME/keepsake`.
struct Context {
    let arguments: Arguments
    let app: App
    let deviceDirectory: URL
    let cloudDirectory: URL?

    init(_ arguments: Arguments) throws(CommandError) {
        self.arguments = arguments
        let environment = ProcessInfo.processInfo.environment
        let dataHome =
            environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".local/share")
        let id = arguments.value("app-id") ?? environment["KEEPSAKE_APP_ID"] ?? "local.keepsake.cli"
        let container =
            arguments.value("container").map { URL(fileURLWithPath: $0) }
            ?? dataHome.appendingPathComponent("keepsake/containers/\(id)")
        let groups = [id] + arguments.values("entitled-group")
        do {
            app = try App(id: id, container: container, accessGroups: groups)
        } catch {
            throw CommandError.param(error.description)
        }
        deviceDirectory =
            arguments.value("device-dir").map { URL(fileURLWithPath: $0) }
            ?? dataHome.appendingPathComponent("keepsake/device")
        cloudDirectory = arguments.value("cloud").map { URL(fileURLWithPath: $0) }
    }

    /// The Secret Service on `DBUS_SESSION_BUS_ADDRESS`.
    var secretService: SecretServiceConnection { .shared() }

    /// The device on that Secret Service. `KEEPSAKE_ARGON2_COST` (moderate, interactive, minimum)
    /// and `KEEPSAKE_RETRY_BASE_MS` exist so tests can run fast; the defaults are for real use.
    var device: Device {
        let environment = ProcessInfo.processInfo.environment
        let cost = environment["KEEPSAKE_ARGON2_COST"].flatMap(Argon2Cost.init(name:)) ?? .moderate
        var policy = RetryPolicy()
        if let base = environment["KEEPSAKE_RETRY_BASE_MS"].flatMap(Int.init) {
            policy.base = .milliseconds(base)
        }
        return Device(
            secretService: secretService, directory: deviceDirectory,
            cloud: cloudDirectory.map(CloudDirectory.init), passcodeCost: cost, retryPolicy: policy)
    }

    /// Standard input as lines (passcodes), without their line ends.
    static func readLines() -> [String] {
        String(decoding: readStandardInput(), as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
    }

    /// Standard input, whole, as bytes.
    static func readStandardInput() -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}
