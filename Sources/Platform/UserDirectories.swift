import Foundation

/// Where a user's Keepsake files are by default: the XDG base directories. The one place the rule
/// is said; the device, the app wiring and `NSUbiquitousKeyValueStore.default`'s fallback app
/// take it from here.
package enum UserDirectories {
    /// The user's home directory: `$HOME` when it is an absolute path, else the password
    /// database's.
    package static var home: URL {
        absolute("HOME") ?? FileManager.default.homeDirectoryForCurrentUser
    }

    /// `$XDG_DATA_HOME`, else `~/.local/share`. As the XDG Base Directory specification says, a
    /// value that is empty or not an absolute path is ignored.
    package static var dataHome: URL {
        absolute("XDG_DATA_HOME") ?? home.appendingPathComponent(".local/share")
    }

    /// Keepsake's device directory: `$XDG_DATA_HOME/keepsake/device`.
    package static var device: URL { dataHome.appendingPathComponent("keepsake/device") }

    /// An app's container: `$XDG_DATA_HOME/keepsake/containers/<app id>`.
    package static func container(of appID: String) -> URL {
        dataHome.appendingPathComponent("keepsake/containers").appendingPathComponent(appID)
    }

    /// The environment's `name` when it holds an absolute path.
    private static func absolute(_ name: String) -> URL? {
        guard let value = ProcessInfo.processInfo.environment[name], value.hasPrefix("/") else {
            return nil
        }
        return URL(fileURLWithPath: value)
    }
}
