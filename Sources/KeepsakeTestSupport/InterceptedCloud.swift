import CloudAccount
import Foundation

/// A real cloud account whose every write of an object first passes `beforeWrite` (its name):
/// fault injection around the real storage — a write that fails, another writer slipping in
/// first. Every request still goes to the storage underneath.
package final class InterceptedCloud: WrappedCloud, Sendable {
    package let inner: any CloudStorage
    private let beforeWrite: @Sendable (String) throws -> Void

    package init(
        _ inner: any CloudStorage, beforeWrite: @escaping @Sendable (String) throws -> Void
    ) {
        self.inner = inner
        self.beforeWrite = beforeWrite
    }

    package func willChange(_ change: CloudChange, _ name: String) throws {
        if change != .delete { try beforeWrite(name) }
    }
}
