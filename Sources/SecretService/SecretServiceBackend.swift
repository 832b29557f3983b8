import Foundation

/// The Secret Service's calls, as a `SecretServiceConnection` makes them once it has checked their
/// arguments: over D-Bus (`DBusSecretService`, every shipped connection) or by another
/// implementation (the test support's in-memory one, `SecretServiceConnection(backend:)`). Every
/// conformer answers as a provider would once the connection has read the answer (the test
/// support's contract test compares the in-memory one with gnome-keyring, KeePassXC and KWallet).
package protocol SecretServiceBackend: Sendable {
    /// The bus the calls go over; nil for none.
    var busAddress: String? { get }
    /// `Collection.SearchItems` of `collection` and its `Locked` property.
    func search(_ attributes: [String: String], in collection: CollectionPath)
        throws(SecretServiceError) -> SearchResult
    /// A collection's `Items` property.
    func items(in collection: CollectionPath) throws(SecretServiceError) -> [ItemPath]
    /// An item's `xdg:schema`, out of its `Attributes` property ("" for none).
    func schema(of path: ItemPath) throws(SecretServiceError) -> String
    /// `Service.GetSecrets`: the paths that exist, with their secrets (a provider that fails the
    /// whole batch for one path gone is asked path by path, unless `oneByOneOnMissing` is false).
    func secrets(at paths: [ItemPath], oneByOneOnMissing: Bool) throws(SecretServiceError)
        -> [ItemPath: Data]
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
    /// Creates a collection protected by a master password, without a prompt.
    func createCollection(label: String, masterPassword: Data) throws(SecretServiceError)
        -> CollectionPath
}
