import Foundation

/// An app on the device: its reverse-DNS id, its container (sandbox) directory, and the keychain
/// access groups it is entitled to (the first is where items go by default).
public struct App: Sendable, Hashable {
    /// The app's reverse-DNS identifier (`com.example.wallet`), checked by `isValidID`.
    public let id: String
    /// The app's container (sandbox) directory, deleted when the app is uninstalled.
    public let container: URL
    /// The keychain access groups the app is entitled to; the first is where its items go by
    /// default, and without a list given it is the app's id alone.
    public let accessGroups: [String]

    /// An app with id `id` and container `container`, entitled to `accessGroups` (`[id]` when nil).
    ///
    /// - Throws: `DeviceError.invalidAppID` when `id` is not reverse-DNS.
    public init(id: String, container: URL, accessGroups: [String]? = nil) throws(DeviceError) {
        guard App.isValidID(id) else { throw DeviceError.invalidAppID }
        self.id = id
        self.container = container
        self.accessGroups = accessGroups ?? [id]
    }

    /// Reverse-DNS: at least two dot-separated labels of ASCII letters, digits, `-` and `_`.
    public static func isValidID(_ id: String) -> Bool {
        let labels = id.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, id.utf8.count <= 255 else { return false }
        return labels.allSatisfy { label in
            !label.isEmpty
                && label.unicodeScalars.allSatisfy {
                    $0.isASCII
                        && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_")
                }
        }
    }

    /// Uninstall: the container is deleted. What the app kept elsewhere (the Secret Service, the
    /// device directory) is not the app's to delete.
    package func uninstall() throws {
        if FileManager.default.fileExists(atPath: container.path) {
            try FileManager.default.removeItem(at: container)
        }
    }
}
