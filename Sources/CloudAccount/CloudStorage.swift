import Device
import Foundation
import Platform
import Sealing

/// Storage for a cloud account: untrusted, shared by the user's devices, possibly synced by any
/// file-sync engine. Everything written to it is sealed and named by keyed hashes; a backend only
/// moves opaque blobs.
public protocol CloudStorage: Sendable {
    /// The bytes of the object `name`, or nil when there is none.
    func read(_ name: String) throws -> Data?
    /// Writes `data` as the object `name`, replacing any object of that name.
    func write(_ name: String, _ data: Data) throws
    /// Deletes the object `name`; deleting one that is not there is not an error.
    func delete(_ name: String) throws
    /// The names of every object in the account's storage.
    func list() throws -> [String]
    /// Waits for the account's exclusive lock (every device and process of the account takes
    /// the same one around a sync); released when the returned value is.
    func lock() throws -> AnyObject
    /// The object with the version it was read at, for a later `write(_:_:ifVersion:)`.
    func readVersioned(_ name: String) throws -> VersionedObject?
    /// Writes only when the object is still at `expected` (nil: only when there is none);
    /// false when another writer got there first, and nothing was written.
    func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?) throws
        -> Bool
    /// Writes several objects, in any order (at once where the storage can).
    func write(_ objects: [(name: String, data: Data)]) throws
    /// Reads several objects (at once where the storage can); absent ones are left out.
    func read(_ names: [String]) throws -> [String: Data]
}

/// A cloud account that passes every request on to another (a test's fault injection): what a
/// device keeps about the storage underneath (a WebDAV server's lock tokens) it keeps about that.
/// Each change of an object (a write, a compare-and-swap, a deletion) first passes `willChange`.
package protocol WrappedCloud: CloudStorage {
    var inner: any CloudStorage { get }
    /// Called before each change of `name` reaches `inner`; throwing stops it there.
    func willChange(_ change: CloudChange, _ name: String) throws
}

/// A kind of change a ``WrappedCloud`` passes on.
package enum CloudChange: String, Sendable {
    case write, swap, delete
}

extension WrappedCloud {
    package func read(_ name: String) throws -> Data? { try inner.read(name) }
    package func read(_ names: [String]) throws -> [String: Data] { try inner.read(names) }
    package func readVersioned(_ name: String) throws -> VersionedObject? {
        try inner.readVersioned(name)
    }
    package func list() throws -> [String] { try inner.list() }
    package func lock() throws -> AnyObject { try inner.lock() }
    package func write(_ name: String, _ data: Data) throws {
        try willChange(.write, name)
        try inner.write(name, data)
    }
    package func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?)
        throws -> Bool
    {
        try willChange(.swap, name)
        return try inner.write(name, data, ifVersion: expected)
    }
    package func write(_ objects: [(name: String, data: Data)]) throws {
        for object in objects { try willChange(.write, object.name) }
        try inner.write(objects)
    }
    package func delete(_ name: String) throws {
        try willChange(.delete, name)
        try inner.delete(name)
    }
}

extension CloudStorage {
    /// `write(_:_:ifVersion:)`, or nothing but a pretended success when `skipped` (a test's
    /// broken commit: `CloudSession.skipsTheSwitch`).
    func write(
        _ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?, unless skipped: Bool
    ) throws -> Bool {
        skipped ? true : try write(name, data, ifVersion: expected)
    }

    /// The storage underneath every wrapper.
    package var underlying: any CloudStorage {
        (self as? any WrappedCloud)?.inner.underlying ?? self
    }

    /// Asks the storage underneath every wrapper to note the lock tokens this device's processes
    /// hold in `file`, when its locks outlive a process (`LocksOutliveProcesses`: a WebDAV
    /// server's); a storage whose locks die with their process has nothing to note.
    package func keepLockTokens(in file: URL) {
        (underlying as? any LocksOutliveProcesses)?.keepLockTokens(in: file)
    }
}

/// A storage capability: its locks outlive the process that took them (a WebDAV server's last
/// until they time out), so a device notes their tokens for the next process to release one left
/// by a process that died.
package protocol LocksOutliveProcesses {
    /// Notes the tokens of the locks this device's processes hold in `file`.
    func keepLockTokens(in file: URL)
}

/// Which copy of an object was read: a digest of its bytes, and the server's tag for it (an
/// HTTP ETag) when it has one.
public struct CloudObjectVersion: Sendable, Hashable {
    /// A keyed hash of the object's bytes (fixed key, context `keepsake.cloud.version.v1`).
    public var digest: Data
    /// The server's tag for this copy (an HTTP ETag); nil for storage without tags.
    public var tag: String?

    /// The version of `bytes` as read, with the server's `tag` for them when it gave one.
    public init(of bytes: Data, tag: String?) {
        digest = KeyDerivation.keyedHash(
            key: SecureBytes(count: 32) { _ in }, context: "keepsake.cloud.version.v1", bytes
        ).unsafeData()
        self.tag = tag
    }
}

/// An object's bytes with the version they were read at (`CloudStorage.readVersioned(_:)`).
public struct VersionedObject: Sendable {
    /// The object's bytes.
    public var data: Data
    /// The version `data` was read at, for a later `write(_:_:ifVersion:)`.
    public var version: CloudObjectVersion
}

extension CloudStorage {
    /// One after the other.
    public func write(_ objects: [(name: String, data: Data)]) throws {
        for (name, data) in objects { try write(name, data) }
    }

    /// One after the other.
    public func read(_ names: [String]) throws -> [String: Data] {
        var found: [String: Data] = [:]
        for name in names { found[name] = try read(name) }
        return found
    }

    /// Storage without tags of its own: the digest of what is there.
    public func readVersioned(_ name: String) throws -> VersionedObject? {
        try read(name).map {
            VersionedObject(data: $0, version: CloudObjectVersion(of: $0, tag: nil))
        }
    }

    /// Compares what is there, then writes: atomic for every writer that holds the account's
    /// lock (as every Keepsake device does around a sync).
    public func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?)
        throws -> Bool
    {
        let current = try readVersioned(name)
        guard current?.version.digest == expected?.digest else { return false }
        try write(name, data)
        return true
    }
}

/// The cloud account as a directory (a synced folder, a mounted share; `WebDAVCloud` is the other
/// ``CloudStorage``). Writes are atomic; names are validated so none can escape the directory.
public struct CloudDirectory: CloudStorage {
    /// The directory holding the account's objects, one file each.
    public let url: URL
    /// The cloud account kept in the directory at `url`.
    public init(_ url: URL) { self.url = url }

    private func file(_ name: String) throws -> URL {
        url.appendingPathComponent(try CloudObjectName.checked(name))
    }

    /// The object's bytes, or nil when there is none: a regular file only, and only up to its
    /// kind's size cap (`CloudObjectLimits`), checked before anything is read.
    public func read(_ name: String) throws -> Data? {
        try Files.read(try file(name), limit: CloudObjectLimits.maximumSize(ofObjectNamed: name))
    }
    /// Writes `data` atomically as the file `name` in the directory.
    public func write(_ name: String, _ data: Data) throws {
        try Files.writeAtomically(data, to: try file(name))
    }
    /// Removes the file `name` from the directory; a file that is not there is no error.
    public func delete(_ name: String) throws { try Files.remove(try file(name)) }
    /// The directory's file names, sorted, hidden ones (`.lock`) left out; none when the
    /// directory does not exist, refused beyond `CloudObjectLimits.maximumCount`.
    public func list() throws -> [String] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        let names = Files.list(url)
        guard names.count <= CloudObjectLimits.maximumCount else {
            throw CloudError(
                "the cloud account holds more than \(CloudObjectLimits.maximumCount) objects")
        }
        return names
    }
    /// An flock on `.lock` in the directory: holds among processes of machines that share the
    /// directory's file system (not across a file-sync engine, which has no locks).
    public func lock() throws -> AnyObject { try FileLock(url.appendingPathComponent(".lock")) }
}

/// The one rule for cloud object names, on every backend: ASCII letters, digits, `-` and `_`,
/// at most 200 bytes — so no name escapes the account's directory or collection.
enum CloudObjectName {
    static func checked(_ name: String) throws -> String {
        guard !name.isEmpty, name.utf8.count <= 200,
            name.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_")
            })
        else { throw CloudError("invalid cloud object name") }
        return name
    }
}

/// A cloud storage failure: what went wrong, and whether trying again later can help.
public struct CloudError: KeepsakeError {
    /// Whether trying again later can help: `unreachable` (unreachable, a timeout, a 5xx) or
    /// `refused` (what the server will keep refusing: the credentials, a capability it lacks).
    public typealias Code = ErrorCode<CloudErrorDomain>

    /// What went wrong, as the caller tells failures apart.
    public let code: Code
    /// What went wrong, as the command line shows it (never a secret).
    public let message: String
    /// The failure underneath, when there was one.
    public let underlying: (any Error & Sendable)?

    /// An error saying `description`; temporary unless said otherwise.
    public init(
        _ description: String, isTemporary: Bool = true, underlying: (any Error & Sendable)? = nil
    ) {
        code = isTemporary ? .unreachable : .refused
        message = description
        self.underlying = underlying
    }

    /// The message alone (the command line's words).
    public var description: String { message }
    /// Whether trying again later can help (`code == .unreachable`).
    public var isTemporary: Bool { code == .unreachable }
}

/// Whose codes `CloudError`'s are.
public enum CloudErrorDomain {}

extension ErrorCode<CloudErrorDomain> {
    /// The storage could not be reached, timed out or failed on its side: trying later can help.
    public static var unreachable: Self { Self("cloud storage unreachable") }
    /// The storage refused what it will keep refusing: the credentials, a capability it lacks.
    public static var refused: Self { Self("cloud storage refused") }
}

/// How large a cloud object of each kind may be: its store's own limit, sealed, with room to
/// spare. A bigger object is refused before it is read, so whoever holds the cloud cannot make a
/// device spend its memory (a planted 1 GiB object costs a `stat`).
package enum CloudObjectLimits {
    package static func maximumSize(ofObjectNamed name: String) -> Int {
        if name.hasPrefix("bs-") { return 16 * 1024 }  // a Block Store entry: ≤ 4096 bytes
        if name.hasPrefix("kc-") { return 256 * 1024 }  // a Keychain item: ≤ 64 KiB + attributes
        if name.hasPrefix("kv-") { return 2 * 1024 * 1024 }  // key-value store: ≤ 1 MB
        if name.hasPrefix("ab-") { return 27 * 1024 * 1024 }  // Auto Backup: ≤ 25 MB
        if name == "account-manifest" { return 4 * 1024 * 1024 }  // ~140 bytes per object
        return 64 * 1024  // the account's own small objects (its record, joins, escrow)
    }
    /// How many objects a cloud account may hold: a listing beyond it is refused.
    package static let maximumCount = 20_000
}

/// A `CloudStorage` as the account calls it: every failure of a call is `.notAvailable`
/// ("cloud account unreachable: …"), a `DeviceError` passes as it is. The one place the
/// storage's errors become the account's (`storage.checked.read(…)`).
struct CheckedStorage {
    /// The storage called.
    let storage: any CloudStorage

    func read(_ name: String) throws(DeviceError) -> Data? {
        try checked { try storage.read(name) }
    }

    func read(_ names: [String]) throws(DeviceError) -> [String: Data] {
        try checked { try storage.read(names) }
    }

    func readVersioned(_ name: String) throws(DeviceError) -> VersionedObject? {
        try checked { try storage.readVersioned(name) }
    }

    func write(_ name: String, _ data: Data) throws(DeviceError) {
        try checked { try storage.write(name, data) }
    }

    func write(_ objects: [(name: String, data: Data)]) throws(DeviceError) {
        try checked { try storage.write(objects) }
    }

    func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?)
        throws(DeviceError) -> Bool
    {
        try checked { try storage.write(name, data, ifVersion: expected) }
    }

    func delete(_ name: String) throws(DeviceError) {
        try checked { try storage.delete(name) }
    }

    func list() throws(DeviceError) -> [String] {
        try checked { try storage.list() }
    }

    func lock() throws(DeviceError) -> AnyObject {
        try checked { try storage.lock() }
    }

    private func checked<R>(_ call: () throws -> R) throws(DeviceError) -> R {
        do { return try call() } catch let error as DeviceError { throw error } catch {
            throw DeviceError(
                .notAvailable, "cloud account unreachable: \(error)", underlying: error)
        }
    }
}

extension CloudStorage {
    /// This storage as the account calls it (`CheckedStorage`).
    var checked: CheckedStorage { CheckedStorage(storage: self) }
}
