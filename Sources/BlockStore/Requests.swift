import Foundation

/// Mirrors `StoreBytesData`.
public struct StoreBytesData: Sendable, Hashable {
    /// `com.google.android.gms.auth.blockstore.DEFAULT_BYTES_DATA_KEY`.
    public static let defaultKey = "com.google.android.gms.auth.blockstore.DEFAULT_BYTES_DATA_KEY"

    public var key: String
    public var bytes: Data
    public var shouldBackupToCloud: Bool

    public init(bytes: Data, key: String? = nil, shouldBackupToCloud: Bool = false) {
        self.key = key ?? Self.defaultKey
        self.bytes = bytes
        self.shouldBackupToCloud = shouldBackupToCloud
    }
}

/// Mirrors `RetrieveBytesRequest`.
public struct RetrieveBytesRequest: Sendable, Hashable {
    public var keys: [String]
    public var retrieveAll: Bool
    public init(keys: [String] = [], retrieveAll: Bool = false) {
        self.keys = keys
        self.retrieveAll = retrieveAll
    }
}

/// Mirrors `DeleteBytesRequest`.
public struct DeleteBytesRequest: Sendable, Hashable {
    public var keys: [String]
    public var deleteAll: Bool
    public init(keys: [String] = [], deleteAll: Bool = false) {
        self.keys = keys
        self.deleteAll = deleteAll
    }
}
