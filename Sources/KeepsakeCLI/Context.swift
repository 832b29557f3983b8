import CloudAccount
import Device
import AppWiring
import Foundation
import Sealing
import SecretService

/// What every command shares: its arguments, and the app they open (`OpenedApp`, the wiring the
/// C interface and the development tool use too) from the global options, else the environment,
/// else defaults under `$XDG_DATA_HOME/keepsake`. One `Device` per command.
package struct Context {
    package let arguments: Arguments
    /// The app, its device and its cloud account.
    package let opened: OpenedApp

    package init(_ arguments: Arguments, tuning: DeviceTuning) throws(CommandError) {
        self.arguments = arguments
        let options = try Self.options(arguments, tuning: tuning)
        do {
            opened = try OpenedApp(options)
        } catch {
            throw CommandError.param(error.description)
        }
    }

    /// The global options, typed.
    package static func options(_ arguments: Arguments, tuning: DeviceTuning) throws(CommandError)
        -> AppOptions
    {
        var options = AppOptions(
            appID: arguments.value("app-id") ?? ProcessInfo.processInfo.environment[
                "KEEPSAKE_APP_ID"] ?? "local.keepsake.cli")
        options.tuning = tuning
        options.container = arguments.value("container").map { URL(fileURLWithPath: $0) }
        options.entitledGroups = arguments.values("entitled-group")
        options.deviceDirectory = arguments.value("device-dir").map { URL(fileURLWithPath: $0) }
        options.cloud = arguments.value("cloud")
        options.cloudCA = arguments.value("cloud-ca")
        // `--tpm TCTI`; without it the machine's TPM (`/dev/tpmrm0`) when there is one.
        options.tpm = arguments.value("tpm")
        // `--escrow URL`: the account's escrow service, for joining with a passcode (its TLS
        // checked against `--cloud-ca` too: both are the account's servers).
        if let text = arguments.value("escrow") {
            guard let url = URL(string: text), EscrowConfiguration(url: url) != nil else {
                throw CommandError.usage(
                    "--escrow takes the escrow's address: https://… (plain http at 127.0.0.1 only)")
            }
            options.escrow = url
        }
        // `--counter URL`: the guess counter service (a `keepsake-escrow` of its own user) that
        // counts this device's passcode guesses; `none` for none. Without the option, the one
        // installed on this machine (`scripts/install-guess-counter`) when its socket is there.
        if let text = arguments.value("counter") {
            if text == "none" {
                options.counter = .none
            } else {
                guard let url = URL(string: text), let counter = EscrowConfiguration(url: url)
                else {
                    throw CommandError.usage(
                        "--counter takes the guess counter's address: unix:/run/keepsake/counter.sock (or none)"
                    )
                }
                options.counter = .at(counter)
            }
        }
        return options
    }

    package var app: App { opened.app }
    /// `--cloud`: a directory, or a WebDAV collection's URL.
    package var cloudLocation: String? { opened.options.cloud }
    /// `--cloud-ca FILE`.
    package var cloudCA: String? { opened.options.cloudCA }
    /// `--cloud` when it names a WebDAV server.
    package var webDAVURL: URL? { opened.webDAVURL }

    /// The device signed in to `--cloud`.
    package var account: CloudAccount {
        get throws { try opened.account() }
    }

    /// The command's device (the cloud, and its credentials, are made only when `account` is
    /// asked for).
    package var device: Device { opened.device }

    /// `lock` or `reboot`: a command that takes no option and forgets runtime keys through
    /// `forgetting`, which never waits (no cloud, nor its credentials, and no Secret Service).
    func forget(_ forgetting: (Device) throws -> Void) throws {
        try arguments.allowOnly([])
        try forgetting(opened.device)
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
