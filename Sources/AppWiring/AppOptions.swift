import CloudAccount
import Device
import Foundation

/// What opens an app on this user's device, typed: the app and its container, the device's
/// directory, the cloud account and its servers. The command line's global options and the C
/// interface's `options_json` both say these; nil is the default, from the environment
/// (`$XDG_DATA_HOME`, `$HOME`) where there is one.
package struct AppOptions: Sendable {
    /// How the device's passcode guesses are counted.
    package enum Counter: Sendable {
        /// The guess counter installed on this machine, when its socket is there.
        case installed
        /// None: the software guess limit.
        case none
        /// The guess counter service at this address (`unix:/run/keepsake/counter.sock`).
        case at(EscrowConfiguration)
    }

    /// The app's identifier.
    package var appID: String
    /// The app's container (default: `$XDG_DATA_HOME/keepsake/containers/<app id>`).
    package var container: URL?
    /// The access groups the app is entitled to besides its own.
    package var entitledGroups: [String] = []
    /// The device directory (default: `$XDG_DATA_HOME/keepsake/device`).
    package var deviceDirectory: URL?
    /// The cloud account: a directory, or a WebDAV collection's URL (`https://…`, `http://` on
    /// loopback). nil: signed out.
    package var cloud: String?
    /// The certificate authorities a WebDAV cloud's (and the escrow's) TLS is checked against
    /// instead of the system's.
    package var cloudCA: String?
    /// The cloud account's escrow service, for joining with a passcode.
    package var escrow: URL?
    /// The guess counter that counts the device's passcode guesses.
    package var counter = Counter.installed
    /// The TCTI of the TPM a direct passcode slot is held by (default: the machine's).
    package var tpm: String?
    /// The device's Argon2id cost and retry delays: the real ones but in the test harness and the
    /// development tool.
    package var tuning = DeviceTuning.real

    /// The options of `appID`'s app, every other one its default.
    package init(appID: String) { self.appID = appID }
}
