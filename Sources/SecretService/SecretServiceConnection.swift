internal import CKeepsakeShims
import Dispatch
import Foundation
import Synchronization
import Platform

/// The paths one search of a collection found, and whether the collection was locked.
package struct SearchResult: Sendable, Equatable {
    /// The paths found in an unlocked collection.
    package var unlocked: [ItemPath]
    /// The paths found in a locked collection (whose secrets cannot be read). Some providers
    /// (KeePassXC) find nothing at all in a locked collection.
    package var locked: [ItemPath]
    /// The collection's `Locked` property, asked with the search.
    package var collectionLocked: Bool

    package init(_ paths: [ItemPath], collectionLocked: Bool) {
        unlocked = collectionLocked ? [] : paths
        locked = collectionLocked ? paths : []
        self.collectionLocked = collectionLocked
    }
}

/// A connection to the freedesktop Secret Service (`org.freedesktop.secrets`).
///
/// Its calls go to a `SecretServiceBackend`: the provider on the bus (`DBusSecretService`, through
/// libsecret and libdbus), or another implementation of the same calls (the test support's
/// in-memory one). Either way each call's arguments are checked here first, as D-Bus would.
///
/// Over D-Bus every call is bounded by `timeout`: a missing, hung (SIGSTOPped) or dying daemon
/// yields a typed `SecretServiceError` (`.timedOut`, `.serviceUnavailable`, `.noBus`) within the
/// bound, never a hang. The connection reopens itself once when the daemon restarted under it (a
/// reboot), so one process-wide instance (`shared()`) serves for the process's life.
///
/// Thread-safe: calls from many threads run concurrently over one D-Bus connection.
public final class SecretServiceConnection: Sendable {
    /// The bus this connection talks to; nil when there is no session bus to be found (or the
    /// calls go elsewhere).
    public let busAddress: String?
    /// The bound on every call.
    public let timeout: Duration
    /// Where the calls go.
    let backend: any SecretServiceBackend

    /// Connects lazily: the first call opens the D-Bus connection and a session. Without
    /// `busAddress`, the session bus as libsecret finds it (`DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`).
    public init(busAddress: String? = nil, timeout: Duration = .seconds(5)) {
        let address = busAddress ?? Self.sessionBusAddress()
        self.busAddress = address
        self.timeout = timeout
        backend = DBusSecretService(busAddress: address, timeout: timeout)
    }

    /// A connection whose calls go to `backend`, checked as over D-Bus first.
    package init(backend: any SecretServiceBackend, timeout: Duration = .seconds(5)) {
        busAddress = backend.busAddress
        self.timeout = timeout
        self.backend = backend
    }

    /// How long past the bound a D-Bus call may take to come back from its cancellation before
    /// it is abandoned.
    package static var grace: Duration { DBusSecretService.grace }

    private static let sharedConnections = Mutex<[String: SecretServiceConnection]>([:])

    /// The process-wide connection to the Secret Service on `DBUS_SESSION_BUS_ADDRESS` (or on
    /// `busAddress` when given), created on first use.
    public static func shared(busAddress: String? = nil) -> SecretServiceConnection {
        let address = busAddress ?? sessionBusAddress()
        return sharedConnections.withLock { connections in
            let key = address ?? ""
            if let existing = connections[key] { return existing }
            let created = SecretServiceConnection(busAddress: address)
            connections[key] = created
            return created
        }
    }

    /// The session bus as libsecret and GDBus find it: `DBUS_SESSION_BUS_ADDRESS`, else the
    /// systemd user bus at `$XDG_RUNTIME_DIR/bus` when that is a socket (a server or container
    /// with a user session but no variable set); nil when neither is there.
    package static func sessionBusAddress(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty {
            return address
        }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else {
            return nil
        }
        let path = runtime + "/bus"
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK,
            status.st_uid == geteuid()
        else { return nil }
        return "unix:path=" + path
    }

    // MARK: - Validation

    func validate(_ attributes: [String: String]) throws(SecretServiceError) {
        for (key, value) in attributes {
            try validate(key)
            try validate(value)
        }
    }

    /// D-Bus strings cannot carry NUL.
    func validate(_ string: String) throws(SecretServiceError) {
        if string.utf8.contains(0) {
            throw SecretServiceError(.invalidArgument, message: "a string contains a NUL byte")
        }
    }
}
