import Foundation
import Platform
import Sealing

/// `async` forms of Block Store's calls: each runs the blocking call on a thread of its own
/// (`offThePool`), never on one of Swift concurrency's cooperative threads.
extension BlockStoreClient {
    @discardableResult
    public func storeBytes(_ data: StoreBytesData) async throws(BlockStoreError) -> Int {
        try await offThePool { () throws(BlockStoreError) in try self.storeBytes(data) }
    }

    public func retrieveBytes(_ request: RetrieveBytesRequest) async throws(BlockStoreError)
        -> [String: Data]
    {
        try await offThePool { () throws(BlockStoreError) in try self.retrieveBytes(request) }
    }

    @discardableResult
    public func deleteBytes(_ request: DeleteBytesRequest) async throws(BlockStoreError) -> Bool {
        try await offThePool { () throws(BlockStoreError) in try self.deleteBytes(request) }
    }
}

extension BlockStoreSync {
    @discardableResult
    public func sync() async throws(BlockStoreError) -> Report {
        try await offThePool { () throws(BlockStoreError) in try self.sync() }
    }

    @discardableResult
    public func restore() async throws(BlockStoreError) -> Int {
        try await offThePool { () throws(BlockStoreError) in try self.restore() }
    }
}
