import Foundation

/// Where a connection's item and collection calls go instead of the bus: another implementation
/// of the Secret Service's calls, as the test support's in-memory one. A connection made with one
/// (`SecretServiceConnection(backend:)`) checks its arguments as over D-Bus, then hands each call
/// to it; the answers must be what a provider's would be once the connection has read them (the
/// test support's contract test compares one with gnome-keyring, KeePassXC and KWallet).
package protocol SecretServiceBackend: Sendable {
    /// `Collection.SearchItems` of `collection` and its `Locked` property.
    func search(_ attributes: [String: String], in collection: CollectionPath)
        throws(SecretServiceError) -> SearchResult
    /// A collection's `Items` property.
    func items(in collection: CollectionPath) throws(SecretServiceError) -> [ItemPath]
    /// An item's `xdg:schema`, out of its `Attributes` property ("" for none).
    func schema(of path: ItemPath) throws(SecretServiceError) -> String
    /// `Service.GetSecrets`: the paths that exist, with their secrets.
    func secrets(at paths: [ItemPath]) throws(SecretServiceError) -> [ItemPath: Data]
    /// `Collection.CreateItem`, replacing an item with exactly these attributes when asked.
    func createItem(
        label: String, attributes: [String: String], secret: Data, replacing: Bool,
        in collection: CollectionPath
    ) throws(SecretServiceError) -> ItemPath
    /// `Item.SetSecret`, with the `Attributes` and `Label` properties when `attributes` is given.
    func replaceItem(
        at path: ItemPath, secret: Data, label: String?, attributes: [String: String]?
    ) throws(SecretServiceError)
    /// `Item.Delete`.
    func deleteItem(at path: ItemPath) throws(SecretServiceError)
    /// `Service.Lock` of one collection.
    func lock(_ collection: CollectionPath) throws(SecretServiceError)
    /// A collection's `Locked` property.
    func isLocked(_ collection: CollectionPath) throws(SecretServiceError) -> Bool
    /// Unlocks a collection with its master password.
    func unlock(_ collection: CollectionPath, masterPassword: Data) throws(SecretServiceError)
}
