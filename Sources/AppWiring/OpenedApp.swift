import CloudAccount
import Device
import Foundation
import Keychain
import Platform
import SecretService
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An app opened on this user's device from its options: the app, the one `Device` it runs on,
/// and the cloud account that device is signed in to — what the command line, the C interface
/// and the development tool build the same way. Built once per command (or C handle): every
/// store it opens shares the device, so its record is read once per operation, not once per
/// layer.
package final class OpenedApp: Sendable {
    package let options: AppOptions
    package let app: App
    /// The device the app runs on.
    package let device: Device
    /// The cloud account's storage, made at its first use (a WebDAV cloud looks up its
    /// credentials then): a command that never reaches the cloud never looks them up.
    private let storage = Mutex<(any CloudStorage)??>(nil)
    /// The account's escrow service, when the account uses one.
    package let escrow: EscrowConfiguration?

    /// The app of `options`, on `secretService` (default: the one at `DBUS_SESSION_BUS_ADDRESS`).
    package init(_ options: AppOptions, secretService: SecretServiceConnection? = nil)
        throws(OptionError)
    {
        self.options = options
        let container = options.container ?? UserDirectories.container(of: options.appID)
        do {
            app = try App(
                id: options.appID, container: container,
                accessGroups: [options.appID] + options.entitledGroups)
        } catch {
            throw OptionError(error.description)
        }
        let counter: EscrowConfiguration? =
            switch options.counter {
            case .installed: Self.installedCounter
            case .none: nil
            case .at(let counter): counter
            }
        device = Device(
            secretService: secretService ?? Self.secretService,
            directory: options.deviceDirectory ?? UserDirectories.device,
            tpm: options.tpm.map(TPMConfiguration.init(tcti:)) ?? .machine, counter: counter,
            tuning: options.tuning)
        if let url = options.escrow {
            guard let escrow = EscrowConfiguration(url: url, caFile: options.cloudCA) else {
                throw OptionError(
                    "the escrow's address is https://… (plain http at 127.0.0.1 only)")
            }
            self.escrow = escrow
        } else {
            escrow = nil
        }
    }

    /// The device signed in to the cloud account (signed out without one).
    package func account() throws -> CloudAccount {
        CloudAccount(device, cloud: try cloud(), escrow: escrow)
    }

    /// The cloud account's storage: a WebDAV collection with its credentials
    /// (`CloudCredentials`), or a directory; nil when signed out.
    package func cloud() throws -> (any CloudStorage)? {
        if let made = storage.withLock({ $0 }) { return made }
        var made = try makeStorage()
        #if KEEPSAKE_TEST_HOOKS
            // Debug builds only: a test kills the command at a chosen change of the cloud.
            made = made.map(MortalCloud.fromEnvironment)
        #endif
        storage.withLock { $0 = .some(made) }
        return made
    }

    private func makeStorage() throws -> (any CloudStorage)? {
        guard let location = options.cloud else { return nil }
        guard let url = webDAVURL else { return CloudDirectory(URL(fileURLWithPath: location)) }
        let found = try CloudCredentials.find(for: url, device: device)
        do {
            let cloud = try WebDAVCloud(
                url: url, username: found?.user, password: found?.password,
                caFile: options.cloudCA)
            if let capabilities = found?.capabilities { cloud.remember(capabilities) }
            return cloud
        } catch {
            throw OptionError("the cloud: \(error)")
        }
    }

    /// The cloud when it names a WebDAV server.
    package var webDAVURL: URL? {
        guard let location = options.cloud,
            location.hasPrefix("https://") || location.hasPrefix("http://")
        else { return nil }
        return URL(string: location)
    }

    /// The Secret Service on `DBUS_SESSION_BUS_ADDRESS`.
    private static var secretService: SecretServiceConnection {
        #if KEEPSAKE_TEST_HOOKS
            // Debug builds only: a test kills the command at a chosen write of the Secret Service.
            MortalSecretService.fromEnvironment(.shared())
        #else
            .shared()
        #endif
    }

    /// The guess counter installed on this machine, when its socket is there. In test builds
    /// only where `KEEPSAKE_TEST_COUNTER_SOCKET` says (the suites never reach the machine's).
    package static var installedCounter: EscrowConfiguration? {
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
}

/// An option that does not open an app: what is wrong with it, in words for the caller.
package struct OptionError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
