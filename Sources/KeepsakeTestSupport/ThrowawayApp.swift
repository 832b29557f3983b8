import Device
import Foundation

/// Throwaway directories for tests and the benchmark, under one per-process root that is removed
/// when the process exits.
package enum Throwaway {
    private static let root: URL = {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("keepsake-throwaway-\(getpid())-\(UUID().uuidString.prefix(6))")
        try? FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        Registry.shared.removeAtExit(url)
        return url
    }()

    /// A fresh, empty directory (mode 0700).
    package static func directory(_ prefix: String) -> URL {
        let url = root.appendingPathComponent(
            "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())")
        try? FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return url
    }

    /// A fresh directory that `user` owns (`mode`), in a directory of root's under the system's
    /// temporary directory that everyone may search: a service running as a user of its own
    /// reaches it (this process's throwaway root is this user's alone). Removed at exit.
    package static func reachable(_ prefix: String, by user: uid_t, mode: Int = 0o700) -> URL {
        let parent = URL(fileURLWithPath: "/tmp")
            .appendingPathComponent("keepsake-\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(
            at: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        Registry.shared.removeAtExit(parent)
        let url = parent.appendingPathComponent(prefix)
        try? FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: mode])
        chown(url.path, user, user)
        return url
    }

    /// A fresh directory that plays untrusted storage — a cloud account, the place a transfer
    /// file is carried to. Under `KEEPSAKE_SWEEP_DIR` it is made there and kept for the
    /// suite-wide sweep (`SuiteSweep`); otherwise it is an ordinary throwaway directory.
    package static func untrusted(_ prefix: String) -> URL {
        guard let root = SuiteSweep.untrustedRoot else { return directory(prefix) }
        return kept(
            root.appendingPathComponent(
                "\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8).lowercased())"))
    }

    /// A directory kept for the sweep under `root`, made once.
    static func kept(_ url: URL) -> URL {
        _ = SuiteSweep.begin
        try? FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return url
    }
}

/// A throwaway app: a unique reverse-DNS id and a fresh container directory.
package enum ThrowawayApp {
    package static func make(
        id: String? = nil, accessGroups: [String]? = nil
    ) throws -> App {
        let container = Throwaway.directory("app")
        let suffix = container.lastPathComponent.dropFirst(4)
        return try App(
            id: id ?? "com.example.app\(suffix)", container: container, accessGroups: accessGroups)
    }
}
