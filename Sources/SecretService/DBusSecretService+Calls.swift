internal import CKeepsakeShims
import Dispatch
import Foundation
import Synchronization
import Platform

/// The Secret Service's calls over D-Bus, each bounded (`call`, `read`).
extension DBusSecretService {
    // MARK: - Items

    /// The items of `collection` whose attributes include `attributes` exactly, and whether the
    /// collection is locked: its `SearchItems` and its `Locked` property, both in flight at once
    /// (one round trip). The collection's search, never the Service's: KeePassXC answers the
    /// Service's `SearchItems`, by default, with an unlock dialog when its database is locked and
    /// waits in it for a person; a collection's search asks nobody on any provider.
    package func search(_ attributes: [String: String], in collection: CollectionPath = .default)
        throws(SecretServiceError) -> SearchResult
    {
        return try read { reader, error -> SearchResult? in
            var paths: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
            var collectionLocked: gboolean = 0
            let ok = withAttributeArrays(attributes) { count, k, v in
                keepsake_collection_search(
                    reader, collection.rawValue, count, k, v, &paths, &collectionLocked, &error)
            }
            guard ok != 0 else { return nil }
            return SearchResult(
                takeStringArray(paths).map(ItemPath.init), collectionLocked: collectionLocked != 0)
        }
    }

    /// The secrets of many items in one `GetSecrets` round trip. Paths that no longer exist are
    /// absent from the result (a provider that fails the whole batch for one of them, KWallet,
    /// is asked path by path; with `oneByOneOnMissing` false its `.noSuchObject` is thrown
    /// instead). Mirrors `secret_service_get_secrets_for_dbus_paths_sync`.
    ///
    /// The returned `Data` values are copies in ordinary memory; the caller owns them.
    package func secrets(at paths: [ItemPath], oneByOneOnMissing: Bool)
        throws(SecretServiceError) -> [ItemPath: Data]
    {
        if paths.isEmpty { return [:] }
        do {
            return try batchedSecrets(at: paths)
        } catch  where error.code == .noSuchObject {
            // KWallet fails the whole batch for one path gone meanwhile: read the rest one by one.
            guard oneByOneOnMissing else { throw error }
            guard paths.count > 1 else { return [:] }
            var result: [ItemPath: Data] = [:]
            for path in paths {
                do { result.merge(try batchedSecrets(at: [path])) { $1 } } catch
                    where error.code == .noSuchObject
                {
                    continue
                }
            }
            return result
        }
    }

    private func batchedSecrets(at paths: [ItemPath]) throws(SecretServiceError)
        -> [ItemPath: Data]
    {
        try read { reader, error -> [ItemPath: Data]? in
            let list = withCStringArray(paths.map(\.rawValue)) {
                keepsake_service_get_secrets(reader, $0, &error)
            }
            guard let list else { return nil }
            defer { keepsake_secret_list_free(list) }
            var result: [ItemPath: Data] = [:]
            for index in 0..<Int(list.pointee.count) {
                let path = ItemPath(String(cString: list.pointee.paths[index]!))
                var length = 0
                let bytes = keepsake_secret_value_get(list.pointee.values[index], &length)
                result[path] = bytes.map { Data(bytes: $0, count: length) } ?? Data()
            }
            return result
        }
    }

    /// `CreateItem` in `collection` with a binary secret. With `replacing`, an item with exactly
    /// the same attributes is overwritten in place. Mirrors
    /// `secret_service_create_item_dbus_path_sync`.
    package func createItem(
        label: String, attributes: [String: String], secret: Data, replacing: Bool = false,
        in collection: CollectionPath = .default
    ) throws(SecretServiceError) -> ItemPath {
        // Retried only when rejected for a stale session: a create whose reply was lost may have
        // happened; the caller re-reads. KWallet's rejection comes after it registered the item
        // (`isKWalletSessionRejection`): the retry replaces that half-made item (found by its
        // attributes, which Keepsake makes unique: an item ID, or the device record made once)
        // rather than making a second object for one entry.
        let replace = Mutex(replacing)
        return try call(
            rejectedOnly: true,
            beforeRetry: { failure in
                if Self.isKWalletSessionRejection(failure) { replace.withLock { $0 = true } }
            }
        ) { service, cancellable, error -> ItemPath? in
            let replacing = replace.withLock { $0 }
            let session = self.sessionForWrite()
            let path = withAttributeArrays(attributes) { count, k, v in
                secret.withUnsafeBytes { bytes in
                    keepsake_service_create_item(
                        service, collection.rawValue, label, count, k, v, bytes.baseAddress,
                        bytes.count, replacing ? 1 : 0, session, cancellable, &error)
                }
            }
            guard let path else { return nil }
            defer { keepsake_g_free(path) }
            return ItemPath(String(cString: path))
        }
    }

    /// Replaces the secret of the item at `path` in place (`Item.SetSecret`), and with
    /// `attributes` its attributes and label too (the `Attributes` and `Label` properties). How
    /// Keepsake updates the items it owns: every provider allows it without a prompt, where
    /// `CreateItem` with replace makes KeePassXC 2.7.4 ask the user.
    package func replaceItem(
        at path: ItemPath, secret: Data, label: String? = nil, attributes: [String: String]? = nil
    ) throws(SecretServiceError) {
        if let attributes {
            let _: Bool = try call(rejectedOnly: true) { service, cancellable, error -> Bool? in
                withAttributeArrays(attributes) { count, k, v in
                    keepsake_item_set_attributes(
                        service, path.rawValue, label ?? "", count, k, v, cancellable, &error)
                } != 0 ? true : nil
            }
        }
        // Idempotent: a retry after a lost reply sets the same secret again.
        let _: Bool = try call { service, cancellable, error -> Bool? in
            let session = self.sessionForWrite()
            return secret.withUnsafeBytes { bytes in
                keepsake_item_set_secret(
                    service, path.rawValue, bytes.baseAddress, bytes.count, session, cancellable,
                    &error)
            } != 0 ? true : nil
        }
    }

    /// `Item.Delete`. Mirrors `secret_service_delete_item_dbus_path_sync`.
    package func deleteItem(at path: ItemPath) throws(SecretServiceError) {
        let _: Bool = try call { service, cancellable, error -> Bool? in
            keepsake_item_delete(service, path.rawValue, cancellable, &error) != 0 ? true : nil
        }
    }

    /// The items of `collection` (its `Items` property), unlocked or not. Mirrors
    /// `secret_collection_get_items`.
    package func items(in collection: CollectionPath = .default) throws(SecretServiceError)
        -> [ItemPath]
    {
        return try call { service, cancellable, error in
            keepsake_collection_items(service, collection.rawValue, cancellable, &error)
                .map { takeStringArray($0).map(ItemPath.init) }
        }
    }

    /// The `xdg:schema` of the item at `path` ("" for an item without one), from its `Attributes`
    /// property: for a caller that finds items by their schema's name rather than by a whole name
    /// (a wipe of a namespace). Mirrors `secret_item_get_schema_name`.
    package func schema(of path: ItemPath) throws(SecretServiceError) -> String {
        return try call { service, cancellable, error -> String? in
            guard let schema = keepsake_item_schema(service, path.rawValue, cancellable, &error)
            else { return nil }
            defer { keepsake_g_free(schema) }
            return String(cString: schema)
        }
    }

    // MARK: - Collections (prompt-free administration, as gnome-keyring allows headless)

    /// Locks a collection. Mirrors `org.freedesktop.Secret.Service.Lock`.
    package func lock(_ collection: CollectionPath = .login) throws(SecretServiceError) {
        let needsPrompt: Bool = try call { service, cancellable, error -> Bool? in
            var prompt: gboolean = 0
            return keepsake_service_lock(service, collection.rawValue, &prompt, cancellable, &error)
                != 0 ? prompt != 0 : nil
        }
        if needsPrompt {
            throw SecretServiceError(
                .promptRequired, message: "locking \(collection) needs a prompt")
        }
    }

    /// Whether `collection` is locked (its `Locked` property; `search` asks it too).
    package func isLocked(_ collection: CollectionPath = .default) throws(SecretServiceError)
        -> Bool
    {
        return try read { reader, error -> Bool? in
            var locked: gboolean = 0
            return keepsake_collection_is_locked(reader, collection.rawValue, &locked, &error)
                != 0
                ? locked != 0 : nil
        }
    }

    /// Unlocks a collection with its master password through gnome-keyring's
    /// `InternalUnsupportedGuiltRiddenInterface.UnlockWithMasterPassword`: no prompt.
    package func unlock(_ collection: CollectionPath = .login, masterPassword: Data)
        throws(SecretServiceError)
    {
        let _: Bool = try call { service, cancellable, error -> Bool? in
            masterPassword.withUnsafeBytes { bytes in
                keepsake_service_unlock_with_master_password(
                    service, collection.rawValue, bytes.baseAddress, bytes.count, cancellable,
                    &error)
            } != 0 ? true : nil
        }
    }

    /// Creates a collection protected by `masterPassword` without a prompt
    /// (`CreateWithMasterPassword`).
    package func createCollection(label: String, masterPassword: Data) throws(SecretServiceError)
        -> CollectionPath
    {
        return try call { service, cancellable, error -> CollectionPath? in
            let path = masterPassword.withUnsafeBytes { bytes in
                keepsake_service_create_collection_with_master_password(
                    service, label, bytes.baseAddress, bytes.count, cancellable, &error)
            }
            guard let path else { return nil }
            defer { keepsake_g_free(path) }
            return CollectionPath(String(cString: path))
        }
    }
}
