import Foundation

/// Items and collections: the calls the stores make, their arguments checked as D-Bus would
/// (no NUL in a string), then handed to the backend (`DBusSecretService`, or another).
extension SecretServiceConnection {
    // MARK: - Items

    /// The items of `collection` whose attributes include `attributes` exactly, and whether the
    /// collection is locked: its `SearchItems` and its `Locked` property, both in flight at once
    /// (one round trip). The collection's search, never the Service's: KeePassXC answers the
    /// Service's `SearchItems`, by default, with an unlock dialog when its database is locked and
    /// waits in it for a person; a collection's search asks nobody on any provider.
    package func search(_ attributes: [String: String], in collection: CollectionPath = .default)
        throws(SecretServiceError) -> SearchResult
    {
        try validate(attributes)
        try validate(collection.rawValue)
        return try backend.search(attributes, in: collection)
    }

    /// The secrets of many items in one `GetSecrets` round trip. Paths that no longer exist are
    /// absent from the result (a provider that fails the whole batch for one of them, KWallet,
    /// is asked path by path; with `oneByOneOnMissing` false its `.noSuchObject` is thrown
    /// instead). Mirrors `secret_service_get_secrets_for_dbus_paths_sync`.
    ///
    /// The returned `Data` values are copies in ordinary memory; the caller owns them.
    package func secrets(at paths: [ItemPath], oneByOneOnMissing: Bool = true)
        throws(SecretServiceError) -> [ItemPath: Data]
    {
        if paths.isEmpty { return [:] }
        for path in paths { try validate(path.rawValue) }
        return try backend.secrets(at: paths, oneByOneOnMissing: oneByOneOnMissing)
    }

    /// `CreateItem` in `collection` with a binary secret. With `replacing`, an item with exactly
    /// the same attributes is overwritten in place. Mirrors
    /// `secret_service_create_item_dbus_path_sync`.
    package func createItem(
        label: String, attributes: [String: String], secret: Data, replacing: Bool = false,
        in collection: CollectionPath = .default
    ) throws(SecretServiceError) -> ItemPath {
        try validate(attributes)
        try validate(label)
        return try backend.createItem(
            label: label, attributes: attributes, secret: secret, replacing: replacing,
            in: collection)
    }

    /// Replaces the secret of the item at `path` in place (`Item.SetSecret`), and with
    /// `attributes` its attributes and label too (the `Attributes` and `Label` properties). How
    /// Keepsake updates the items it owns: every provider allows it without a prompt, where
    /// `CreateItem` with replace makes KeePassXC 2.7.4 ask the user.
    package func replaceItem(
        at path: ItemPath, secret: Data, label: String? = nil, attributes: [String: String]? = nil
    ) throws(SecretServiceError) {
        if let attributes {
            try validate(attributes)
            try validate(label ?? "")
        }
        try backend.replaceItem(at: path, secret: secret, label: label, attributes: attributes)
    }

    /// `Item.Delete`. Mirrors `secret_service_delete_item_dbus_path_sync`.
    package func deleteItem(at path: ItemPath) throws(SecretServiceError) {
        try backend.deleteItem(at: path)
    }

    /// The items of `collection` (its `Items` property), unlocked or not. Mirrors
    /// `secret_collection_get_items`.
    package func items(in collection: CollectionPath = .default) throws(SecretServiceError)
        -> [ItemPath]
    {
        try validate(collection.rawValue)
        return try backend.items(in: collection)
    }

    /// The `xdg:schema` of the item at `path` ("" for an item without one), from its `Attributes`
    /// property: for a caller that finds items by their schema's name rather than by a whole name
    /// (a wipe of a namespace). Mirrors `secret_item_get_schema_name`.
    package func schema(of path: ItemPath) throws(SecretServiceError) -> String {
        try validate(path.rawValue)
        return try backend.schema(of: path)
    }

    // MARK: - Collections (prompt-free administration, as gnome-keyring allows headless)

    /// Locks a collection. Mirrors `org.freedesktop.Secret.Service.Lock`.
    package func lock(_ collection: CollectionPath = .login) throws(SecretServiceError) {
        try backend.lock(collection)
    }

    /// Whether `collection` is locked (its `Locked` property; `search` asks it too).
    package func isLocked(_ collection: CollectionPath = .default) throws(SecretServiceError)
        -> Bool
    {
        try validate(collection.rawValue)
        return try backend.isLocked(collection)
    }

    /// Unlocks a collection with its master password through gnome-keyring's
    /// `InternalUnsupportedGuiltRiddenInterface.UnlockWithMasterPassword`: no prompt.
    package func unlock(_ collection: CollectionPath = .login, masterPassword: Data)
        throws(SecretServiceError)
    {
        try backend.unlock(collection, masterPassword: masterPassword)
    }

    /// Creates a collection protected by `masterPassword` without a prompt
    /// (`CreateWithMasterPassword`).
    package func createCollection(label: String, masterPassword: Data) throws(SecretServiceError)
        -> CollectionPath
    {
        try validate(label)
        return try backend.createCollection(label: label, masterPassword: masterPassword)
    }
}
