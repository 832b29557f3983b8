import Foundation
import Platform
import Sealing

/// `async` forms of Block Store's calls: each runs the blocking call on a thread of its own
/// (`offThePool`), never on one of Swift concurrency's cooperative threads.
extension BlockStoreClient {
    /// `storeBytes(_:)`, run off Swift concurrency's cooperative threads.
    @discardableResult
    public func storeBytes(_ data: StoreBytesData) async throws(BlockStoreError) -> Int {
        try await offThePool { () throws(BlockStoreError) in try self.storeBytes(data) }
    }

    /// `retrieveBytes(_:)`, run off Swift concurrency's cooperative threads.
    public func retrieveBytes(_ request: RetrieveBytesRequest) async throws(BlockStoreError)
        -> [String: Data]
    {
        try await offThePool { () throws(BlockStoreError) in try self.retrieveBytes(request) }
    }

    /// `deleteBytes(_:)`, run off Swift concurrency's cooperative threads.
    @discardableResult
    public func deleteBytes(_ request: DeleteBytesRequest) async throws(BlockStoreError) -> Bool {
        try await offThePool { () throws(BlockStoreError) in try self.deleteBytes(request) }
    }
}

extension BlockStoreSync {
    /// `sync()`, run off Swift concurrency's cooperative threads.
    @discardableResult
    public func sync() async throws(BlockStoreError) -> Report {
        try await offThePool { () throws(BlockStoreError) in try self.sync() }
    }

    /// `restore()`, run off Swift concurrency's cooperative threads.
    @discardableResult
    public func restore() async throws(BlockStoreError) -> Int {
        try await offThePool { () throws(BlockStoreError) in try self.restore() }
    }
}
