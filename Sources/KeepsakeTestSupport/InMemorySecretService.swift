import Device
import Foundation
import SecretService
import Synchronization

/// A Secret Service in memory: the calls Keepsake makes (search, batched secrets, create,
/// replace, delete, lock), answered as gnome-keyring answers them once the connection has read
/// them, with no bus and no daemon. For the tests whose subject is a rule of Keepsake's own, not
/// a provider (the rule tables): they run in a fraction of the time, once; the provider-neutral
/// suites keep running on real gnome-keyring, KeePassXC and KWallet, and `InMemorySecretServiceTests`
/// holds this one to what each of them answers.
package final class InMemorySecretService: SecretServiceBackend {
    private struct Item {
        var collection: String
        var label: String
        var attributes: [String: String]
        var secret: Data
    }

    private struct State {
        var items: [ItemPath: Item] = [:]
        var created = 0
        var locked: Set<String> = []
    }

    private let state = Mutex(State())
    private let log = Mutex<[String]>([])
    private let masterPassword: Data
    /// The throwaway directory its devices live in (removed when the process exits).
    private let root = Throwaway.directory("in-memory-secret-service")

    /// An empty service whose collections unlock with `masterPassword`.
    package init(masterPassword: Data = Data()) {
        self.masterPassword = masterPassword
    }

    /// The calls made so far, one line each: `search <schema>`, `secrets <count>`, `create
    /// <schema>`, `replace`, `delete`, `items`, `schema`, `lock`, `isLocked`, `unlock`.
    package var calls: [String] { log.withLock { $0 } }

    /// Forgets the calls made so far.
    package func forgetCalls() { log.withLock { $0 = [] } }

    private func note(_ call: String) { log.withLock { $0.append(call) } }

    /// One service for the whole test process, as `PrivateSecretService.shared()` is.
    package static let shared = InMemorySecretService()

    /// A connection to this service.
    package func connection(timeout: Duration = .seconds(5)) -> SecretServiceConnection {
        SecretServiceConnection(backend: self, timeout: timeout)
    }

    /// A test device on this service, in the directory `name` under the service's throwaway root
    /// (the same name gives the same directory), tuned as every test device is
    /// (`DeviceTuning.fast`); its runtime keys (the kernel keyring) go when the process exits.
    package func device(_ name: String = "device", tuning: DeviceTuning = .fast) -> Device {
        let device = Device(
            secretService: connection(), directory: root.appendingPathComponent(name),
            tuning: tuning)
        Registry.shared.atExit { try? device.reboot() }
        return device
    }

    // MARK: - The calls

    /// The alias `default` is the `login` collection, as on gnome-keyring.
    private static func name(_ collection: CollectionPath) -> String {
        collection == .default ? CollectionPath.login.rawValue : collection.rawValue
    }

    package func search(_ attributes: [String: String], in collection: CollectionPath)
        throws(SecretServiceError) -> SearchResult
    {
        note("search \(attributes["xdg:schema"] ?? "")")
        let name = Self.name(collection)
        return state.withLock { state in
            let paths = state.items.filter { _, item in
                item.collection == name
                    && attributes.allSatisfy { item.attributes[$0.key] == $0.value }
            }.keys.sorted()
            return SearchResult(paths, collectionLocked: state.locked.contains(name))
        }
    }

    package func items(in collection: CollectionPath) throws(SecretServiceError) -> [ItemPath] {
        note("items")
        let name = Self.name(collection)
        return state.withLock { state in
            state.items.filter { $0.value.collection == name }.keys.sorted()
        }
    }

    package func schema(of path: ItemPath) throws(SecretServiceError) -> String {
        note("schema")
        return try state.withLock { state throws(SecretServiceError) in
            guard let item = state.items[path] else { throw Self.noSuchItem(path) }
            return item.attributes["xdg:schema"] ?? ""
        }
    }

    /// No bus: its calls are answered in this process.
    package var busAddress: String? { nil }

    package func secrets(at paths: [ItemPath], oneByOneOnMissing: Bool) throws(SecretServiceError)
        -> [ItemPath: Data]
    {
        note("secrets \(paths.count)")
        return try state.withLock { state throws(SecretServiceError) in
            var found: [ItemPath: Data] = [:]
            for path in paths {
                guard let item = state.items[path] else { continue }
                if state.locked.contains(item.collection) { throw Self.isLocked(item.collection) }
                found[path] = item.secret
            }
            return found
        }
    }

    package func createItem(
        label: String, attributes: [String: String], secret: Data, replacing: Bool,
        in collection: CollectionPath
    ) throws(SecretServiceError) -> ItemPath {
        note("create \(attributes["xdg:schema"] ?? "")")
        let name = Self.name(collection)
        return try state.withLock { state throws(SecretServiceError) in
            if state.locked.contains(name) { throw Self.isLocked(name) }
            let item = Item(collection: name, label: label, attributes: attributes, secret: secret)
            if replacing,
                let same = state.items.first(where: {
                    $0.value.collection == name && $0.value.attributes == attributes
                })?.key
            {
                state.items[same] = item
                return same
            }
            state.created += 1
            let path = ItemPath(name + "/\(state.created)")
            state.items[path] = item
            return path
        }
    }

    package func replaceItem(
        at path: ItemPath, secret: Data, label: String?, attributes: [String: String]?
    ) throws(SecretServiceError) {
        note("replace")
        try state.withLock { state throws(SecretServiceError) in
            guard var item = state.items[path] else { throw Self.noSuchItem(path) }
            if state.locked.contains(item.collection) { throw Self.isLocked(item.collection) }
            if let attributes {
                item.attributes = attributes
                item.label = label ?? ""
            }
            item.secret = secret
            state.items[path] = item
        }
    }

    package func deleteItem(at path: ItemPath) throws(SecretServiceError) {
        note("delete")
        try state.withLock { state throws(SecretServiceError) in
            guard let item = state.items[path] else { throw Self.noSuchItem(path) }
            if state.locked.contains(item.collection) { throw Self.isLocked(item.collection) }
            state.items[path] = nil
        }
    }

    package func lock(_ collection: CollectionPath) throws(SecretServiceError) {
        note("lock")
        _ = state.withLock { $0.locked.insert(Self.name(collection)) }
    }

    package func isLocked(_ collection: CollectionPath) throws(SecretServiceError) -> Bool {
        note("isLocked")
        return state.withLock { $0.locked.contains(Self.name(collection)) }
    }

    package func unlock(_ collection: CollectionPath, masterPassword: Data)
        throws(SecretServiceError)
    {
        note("unlock")
        guard masterPassword == self.masterPassword else {
            throw SecretServiceError(
                .failed, message: "the password for the collection was wrong")
        }
        _ = state.withLock { $0.locked.remove(Self.name(collection)) }
    }

    /// Collections are named by their path's last part here, any name: there is nothing to
    /// make.
    package func createCollection(label: String, masterPassword: Data) throws(SecretServiceError)
        -> CollectionPath
    {
        note("createCollection")
        return CollectionPath("/org/freedesktop/secrets/collection/\(label)")
    }

    private static func isLocked(_ collection: String) -> SecretServiceError {
        SecretServiceError(
            .locked, message: "Cannot get secret of a locked object",
            dbusName: "org.freedesktop.Secret.Error.IsLocked")
    }

    private static func noSuchItem(_ path: ItemPath) -> SecretServiceError {
        SecretServiceError(
            .noSuchObject, message: "No such secret item at path: \(path)",
            dbusName: "org.freedesktop.Secret.Error.NoSuchObject")
    }
}
