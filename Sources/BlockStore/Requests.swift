import Foundation

/// Mirrors `StoreBytesData`.
public struct StoreBytesData: Sendable, Hashable {
    /// `com.google.android.gms.auth.blockstore.DEFAULT_BYTES_DATA_KEY`.
    public static let defaultKey = "com.google.android.gms.auth.blockstore.DEFAULT_BYTES_DATA_KEY"

    /// The entry's key (`setKey`); `defaultKey` when none is given.
    public var key: String
    /// The entry's bytes (`setBytes`).
    public var bytes: Data
    /// `setShouldBackupToCloud`: whether sync copies the entry to the cloud account (only with
    /// end-to-end encryption).
    public var shouldBackupToCloud: Bool

    /// Mirrors `StoreBytesData.Builder`: `bytes` under `key` (nil: `defaultKey`), not backed up
    /// unless asked.
    public init(bytes: Data, key: String? = nil, shouldBackupToCloud: Bool = false) {
        self.key = key ?? Self.defaultKey
        self.bytes = bytes
        self.shouldBackupToCloud = shouldBackupToCloud
    }
}

/// Mirrors `RetrieveBytesRequest`.
public struct RetrieveBytesRequest: Sendable, Hashable {
    /// The keys to retrieve (`setKeys`); absent keys are left out of the result.
    public var keys: [String]
    /// `setRetrieveAll`: every entry of the app (with `keys` too: `DEVELOPER_ERROR`).
    public var retrieveAll: Bool
    /// Mirrors `RetrieveBytesRequest.Builder`: `keys`, or every entry.
    public init(keys: [String] = [], retrieveAll: Bool = false) {
        self.keys = keys
        self.retrieveAll = retrieveAll
    }
}

/// Mirrors `DeleteBytesRequest`.
public struct DeleteBytesRequest: Sendable, Hashable {
    /// The keys to delete (`setKeys`); absent keys are skipped.
    public var keys: [String]
    /// `setDeleteAll`: every entry of the app (with `keys` too: `DEVELOPER_ERROR`).
    public var deleteAll: Bool
    /// Mirrors `DeleteBytesRequest.Builder`: `keys`, or every entry.
    public init(keys: [String] = [], deleteAll: Bool = false) {
        self.keys = keys
        self.deleteAll = deleteAll
    }
}
