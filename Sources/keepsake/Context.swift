import Device
import Foundation
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

    /// Standard input, whole, as bytes.
    static func readStandardInput() -> Data {
        FileHandle.standardInput.readDataToEndOfFile()
    }
}
