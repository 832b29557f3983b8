import CloudAccount
import Foundation

/// A real cloud account whose every write of an object first passes `beforeWrite` (its name):
/// fault injection around the real storage — a write that fails, another writer slipping in
/// first. Every request still goes to the storage underneath.
package final class InterceptedCloud: CloudStorage, WrappedCloud, Sendable {
    package let inner: any CloudStorage
    private let beforeWrite: @Sendable (String) throws -> Void

    package init(
        _ inner: any CloudStorage, beforeWrite: @escaping @Sendable (String) throws -> Void
    ) {
        self.inner = inner
        self.beforeWrite = beforeWrite
    }

    package func read(_ name: String) throws -> Data? { try inner.read(name) }
    package func write(_ name: String, _ data: Data) throws {
        try beforeWrite(name)
        try inner.write(name, data)
    }
    package func delete(_ name: String) throws { try inner.delete(name) }
    package func list() throws -> [String] { try inner.list() }
    package func lock() throws -> AnyObject { try inner.lock() }
    package func readVersioned(_ name: String) throws -> VersionedObject? {
        try inner.readVersioned(name)
    }
    package func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?)
        throws -> Bool
    {
        try beforeWrite(name)
        return try inner.write(name, data, ifVersion: expected)
    }
    package func write(_ objects: [(name: String, data: Data)]) throws {
        for object in objects { try beforeWrite(object.name) }
        try inner.write(objects)
    }
    package func read(_ names: [String]) throws -> [String: Data] { try inner.read(names) }
}
