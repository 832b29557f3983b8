import CloudAccount
import Device
import Foundation
import Sealing
import SecretService

/// What every command shares: the app, its container and the device's places, from the global
/// options, else the environment, else defaults under `$XDG_DATA_HOME/keepsake`.
package struct Context {
    package let arguments: Arguments
    package let app: App
    package let deviceDirectory: URL
    /// `--cloud`: a directory, or a WebDAV collection's URL (`https://…`, `http://` on loopback).
    package let cloudLocation: String?
    /// `--cloud-ca FILE`: the certificate authorities a WebDAV cloud's TLS is checked against
    /// instead of the system's.
    package let cloudCA: String?
    package let dataHome: URL
    package let homeDirectory: URL
    /// The TPM of a direct passcode slot a device record holds (`--tpm`, else the machine's);
    /// new lock screens never make one (`TPMConfiguration`).
    package let tpm: TPMConfiguration?
    /// The cloud account's escrow service, or nil.
    package let escrow: EscrowConfiguration?
    /// The guess counter service that holds the device's passcode slot, or nil.
    package let counter: EscrowConfiguration?
    /// The device's Argon2id cost and retry delays: the real ones in the shipped `keepsake`.
    package let tuning: DeviceTuning

    package init(_ arguments: Arguments, tuning: DeviceTuning) throws(CommandError) {
        self.arguments = arguments
        self.tuning = tuning
        let environment = ProcessInfo.processInfo.environment
        homeDirectory =
            environment["HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser
        let dataHome =
            environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) }
            ?? homeDirectory.appendingPathComponent(".local/share")
        self.dataHome = dataHome
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
        cloudLocation = arguments.value("cloud")
        cloudCA = arguments.value("cloud-ca")
        // `--tpm TCTI`; without it the machine's TPM (`/dev/tpmrm0`) when there is one.
        tpm = arguments.value("tpm").map(TPMConfiguration.init(tcti:)) ?? .machine
        // `--escrow URL`: the account's escrow service, for joining with a passcode (its TLS
        // checked against `--cloud-ca` too: both are the account's servers).
        if let text = arguments.value("escrow") {
            guard let url = URL(string: text),
                let escrow = EscrowConfiguration(url: url, caFile: cloudCA)
            else {
                throw CommandError.usage(
                    "--escrow takes the escrow's address: https://… (plain http at 127.0.0.1 only)")
            }
            self.escrow = escrow
        } else {
            escrow = nil
        }
        // `--counter URL`: the guess counter service (a `keepsake-escrow` of its own user) that
        // counts this device's passcode guesses; `none` for none. Without the option, the one
        // installed on this machine (`scripts/install-guess-counter`) when its socket is there.
        if let text = arguments.value("counter") {
            if text == "none" {
                counter = nil
            } else {
                guard let url = URL(string: text), let counter = EscrowConfiguration(url: url)
                else {
                    throw CommandError.usage(
                        "--counter takes the guess counter's address: unix:/run/keepsake/counter.sock (or none)"
                    )
                }
                self.counter = counter
            }
        } else {
            counter = Self.installedCounter
        }
    }

    /// The guess counter installed on this machine, when its socket is there. In test builds
    /// only where `KEEPSAKE_TEST_COUNTER_SOCKET` says (the suites never reach the machine's).
    static var installedCounter: EscrowConfiguration? {
        #if KEEPSAKE_TEST_HOOKS
            guard let path = ProcessInfo.processInfo.environment["KEEPSAKE_TEST_COUNTER_SOCKET"]
            else { return nil }
            let address = URL(string: "unix:\(path)")!
        #else
            let address = EscrowConfiguration.defaultCounter
        #endif
        var info = stat()
        guard lstat(address.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK else {
            return nil
        }
        return EscrowConfiguration(url: address)
    }

    /// The Secret Service on `DBUS_SESSION_BUS_ADDRESS`.
    package var secretService: SecretServiceConnection {
        #if KEEPSAKE_TEST_HOOKS
            // Debug builds only: a test kills the command at a chosen write of the Secret Service.
            MortalSecretService.fromEnvironment(.shared())
        #else
            .shared()
        #endif
    }

    /// The device on that Secret Service, at `tuning`'s cost and delays, signed in to `--cloud`.
    package var account: CloudAccount {
        get throws { try account(secretService: secretService) }
    }

    /// The account's device.
    package var device: Device {
        get throws { try account.device }
    }

    /// The device on `secretService`, signed in to `--cloud`.
    package func account(secretService: SecretServiceConnection) throws -> CloudAccount {
        CloudAccount(
            secretService: secretService, directory: deviceDirectory,
            cloud: try cloud(secretService: secretService), tpm: tpm, escrow: escrow,
            counter: counter, tuning: tuning)
    }

    /// The device without a cloud account (for what never touches it).
    var localDevice: Device { localDevice(secretService: secretService) }

    private func localDevice(secretService: SecretServiceConnection) -> Device {
        Device(
            secretService: secretService, directory: deviceDirectory, tpm: tpm, counter: counter,
            tuning: tuning)
    }

    /// `--cloud` as storage: a WebDAV URL with its credentials (`CloudCredentials`), or a
    /// directory.
    package func cloud(secretService: SecretServiceConnection) throws -> (any CloudStorage)? {
        #if KEEPSAKE_TEST_HOOKS
            // Debug builds only: a test kills the command at a chosen change of the cloud.
            return try storage(secretService: secretService).map(MortalCloud.fromEnvironment)
        #else
            return try storage(secretService: secretService)
        #endif
    }

    private func storage(secretService: SecretServiceConnection) throws -> (any CloudStorage)? {
        guard let location = cloudLocation else { return nil }
        guard let url = webDAVURL else { return CloudDirectory(URL(fileURLWithPath: location)) }
        let found = try CloudCredentials.find(
            for: url, self, device: localDevice(secretService: secretService))
        do {
            let cloud = try WebDAVCloud(
                url: url, username: found?.user, password: found?.password, caFile: cloudCA)
            if let capabilities = found?.capabilities { cloud.remember(capabilities) }
            return cloud
        } catch {
            throw CommandError.param("--cloud: \(error)")
        }
    }

    /// `--cloud` when it names a WebDAV server.
    package var webDAVURL: URL? {
        guard let location = cloudLocation,
            location.hasPrefix("https://") || location.hasPrefix("http://")
        else { return nil }
        return URL(string: location)
    }

    /// Standard input as lines, without their line ends.
    package static func readLines() throws(CommandError) -> [String] {
        String(decoding: try readStandardInput(), as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
    }

    /// The most standard input a command reads as a value (a secret, a Block Store entry, a
    /// key-value string): every store's own limit is far below it, so anything longer is refused
    /// here, before it is held in memory whole.
    package static let maximumInput = 4 * 1024 * 1024

    /// Standard input, whole, as bytes; longer than `maximumInput` is refused.
    package static func readStandardInput() throws(CommandError) -> Data {
        var data = Data()
        while data.count <= maximumInput {
            guard let chunk = try? FileHandle.standardInput.read(upToCount: 64 * 1024),
                !chunk.isEmpty
            else { return data }
            data.append(chunk)
        }
        throw CommandError.param("standard input is longer than \(maximumInput) bytes")
    }
}
