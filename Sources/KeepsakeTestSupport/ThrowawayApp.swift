import Device
import Foundation

/// A throwaway app: a unique reverse-DNS id and a fresh container directory.
public enum ThrowawayApp {
    public static func make(
        id: String? = nil, accessGroups: [String]? = nil
    ) throws -> App {
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let container = FileManager.default.temporaryDirectory
            .appendingPathComponent("keepsake-app-\(suffix)")
        try FileManager.default.createDirectory(
            at: container, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        return try App(
            id: id ?? "com.example.app\(suffix)", container: container, accessGroups: accessGroups)
    }
}
