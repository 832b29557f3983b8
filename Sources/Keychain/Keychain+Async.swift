import Foundation
import Platform
import Sealing

/// `async` forms of the Keychain's calls: each runs the blocking call on a thread of its own
/// (`offThePool`), never on one of Swift concurrency's cooperative threads.
extension Keychain {
    /// `add(_:data:authentication:)`, run off Swift concurrency's cooperative threads.
    @discardableResult
    public func add(
        _ attributes: GenericPasswordAttributes, data: Data,
        authentication: ItemAuthentication = .none
    ) async throws(KeychainError) -> String {
        try await offThePool { () throws(KeychainError) in
            try self.add(attributes, data: data, authentication: authentication)
        }
    }

    /// `data(matching:authentication:)`, run off Swift concurrency's cooperative threads.
    public func data(
        matching query: GenericPasswordQuery, authentication: ItemAuthentication = .none
    ) async throws(KeychainError) -> Data {
        try await offThePool { () throws(KeychainError) in
            try self.data(matching: query, authentication: authentication)
        }
    }

    /// `dataIfPresent(matching:authentication:)`, run off Swift concurrency's cooperative threads.
    public func dataIfPresent(
        matching query: GenericPasswordQuery, authentication: ItemAuthentication = .none
    ) async throws(KeychainError) -> Data? {
        try await offThePool { () throws(KeychainError) in
            try self.dataIfPresent(matching: query, authentication: authentication)
        }
    }

    /// `delete(matching:)`, run off Swift concurrency's cooperative threads.
    public func delete(matching query: GenericPasswordQuery) async throws(KeychainError) {
        try await offThePool { () throws(KeychainError) in try self.delete(matching: query) }
    }
}
