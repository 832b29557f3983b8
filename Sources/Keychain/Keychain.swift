import Device
import Foundation
import Platform
import Sealing
import SecretService
import Synchronization

/// Apple's keychain for generic and internet passwords (`kSecClassGenericPassword`,
/// `kSecClassInternetPassword`), rule for rule, stored in the freedesktop Secret Service.
///
/// Thread-safe: one instance may be shared by every thread of a process. Several processes may use
/// the same items at once; concurrent adds of one primary key leave exactly one item (the first
/// created, by the Secret Service's own creation order) and every query returns that one.
///
/// Items are described by ``GenericPasswordAttributes``, found by ``GenericPasswordQuery`` and
/// changed by ``GenericPasswordChanges``; every failure is a ``KeychainError`` carrying Apple's
/// ``KeychainStatus``.
public final class Keychain: Sendable {
    /// The largest secret an item may hold. Apple documents none; 64 KiB is far beyond any
    /// password or key and keeps gnome-keyring's whole-file rewrites cheap.
    public static let maximumDataSize = 64 * 1024
    /// The largest string attribute (service, account, label, …) and `generic`, in UTF-8 bytes.
    public static let maximumAttributeSize = 4096

    /// The app whose access groups the Keychain serves; it never reaches an item of another group.
    public let app: App
    /// Where class keys come from; its Secret Service is where items live.
    public let device: Device
    let secretService: SecretServiceConnection
    /// Query → object path of the item it last found, so a hot read is one `GetSecrets` round
    /// trip. Validated on every use: the record read back must match the query (and names its own
    /// primary key), so a stale or reused path can never yield another item's secret.
    let pathCache = Mutex<[GenericPasswordQuery: (path: ItemPath, class: ProtectionClass)]>(
        [:])

    /// The Keychain of `app` on `device`, whose Secret Service holds the items.
    public init(app: App, device: Device) {
        self.app = app
        self.device = device
        self.secretService = device.secretService
    }

    /// A Keychain on the device whose Secret Service is `secretService`.
    public convenience init(app: App, secretService: SecretServiceConnection = .shared()) {
        self.init(app: app, device: Device(secretService: secretService))
    }

    // MARK: - Add

    /// Adds one item. Mirrors `SecItemAdd`.
    ///
    /// - Throws: `errSecDuplicateItem` when the primary key exists, `errSecMissingEntitlement` for
    ///   a group the app is not entitled to, `errSecParam` for bad input, and nothing is written.
    ///   An item with access constraints is sealed for them (`ProtectedData`): a passcode
    ///   constraint needs no passcode to add (the device must have one), an app-password
    ///   constraint needs `authentication.applicationPassword`.
    /// - Returns: the new item's persistent id.
    @discardableResult
    public func add(
        _ attributes: GenericPasswordAttributes, data given: Data?,
        authentication: ItemAuthentication = .none
    ) throws(KeychainError) -> String {
        var attributes = attributes
        let data = given ?? Data()
        try Validation.check(attributes)
        try Validation.check(data: data)
        let group = attributes.accessGroup ?? app.accessGroups[0]
        try checkEntitlement(group)
        attributes.accessGroup = group
        try Validation.checkClass(attributes)
        let now = Self.now()
        attributes.creationDate = now
        attributes.modificationDate = now
        var record = StoredRecord(
            id: UUID().uuidString, attributes: attributes,
            data: try protect(data, attributes.accessControl, authentication))
        record.dataAbsent = given == nil
        let keyAttributes = record.key.searchAttributes
        let classKey = try classKey(attributes.accessible)

        // The Secret Service has no unique constraint: the device's processes add (and rename
        // onto a primary key) one at a time, so a search and the create after it see every other
        // Keepsake write whole. Should another program put a second item under one primary key,
        // every reader still picks the same one (`creationOrder`), never by item path.
        let lock = try primaryKeyLock()
        // Held to the end of the add: an unused binding may otherwise be released (and the flock
        // dropped) right after it is made.
        defer { withExtendedLifetime(lock) {} }
        // A miss in a locked collection is refused here, before a create that some providers
        // (KeePassXC) would answer with an unlock prompt.
        if !(try unlockedItems(keyAttributes)).isEmpty {
            throw Self.duplicate
        }

        _ = try create(record, sealedWith: classKey)
        return record.id
    }

    /// The device's lock for writes that could give two items one primary key (an flock in the
    /// device directory, shared by every process of the user).
    private func primaryKeyLock() throws(KeychainError) -> FileLock {
        do { return try FileLock(device.directory.appendingPathComponent("keychain.lock")) } catch {
            throw KeychainError(KeychainStatus.notAvailable, "the keychain lock: \(error)")
        }
    }

    // MARK: - Query

    /// The items matching `query`. Mirrors `SecItemCopyMatching`.
    ///
    /// - Parameters:
    ///   - query: what to match (nil fields match anything).
    ///   - limit: `.one` returns the first match (`kSecMatchLimitOne`), `.all` every match.
    ///   - returnData: whether to include each item's secret.
    ///   - authentication: the credentials for the secrets of items with access constraints
    ///     (read only when `returnData`; one counted passcode attempt per call).
    /// - Throws: `errSecItemNotFound` when nothing matches; for a secret whose constraints need a
    ///   credential that was not given `errSecInteractionNotAllowed` (nobody can be asked), or
    ///   the item is left out under `skipItemsNeedingAuthentication`; `errSecAuthFailed` for a
    ///   wrong credential.
    public func items(
        matching query: GenericPasswordQuery, limit: MatchLimit = .one, returnData: Bool = true,
        authentication: ItemAuthentication = .none
    ) throws(KeychainError) -> [GenericPasswordItem] {
        var opener = ItemOpener(keychain: self, authentication: authentication)
        if limit == .one, let hot = try hotRead(query) {
            if let item = try opener.item(hot, returnData: returnData) { return [item] }
            throw Self.notFound
        }
        let matches = Self.winners(try find(query))
        guard let first = matches.first else { throw Self.notFound }
        if Self.isCacheable(query) {
            let protection = first.record.attributes.accessible.protectionClass
            pathCache.withLock { $0[query] = (first.path, protection) }
        }
        var items: [GenericPasswordItem] = []
        for match in matches {
            guard let item = try opener.item(match.record, returnData: returnData) else { continue }
            items.append(item)
            if limit == .one { break }
        }
        guard !items.isEmpty else { throw Self.notFound }
        return items
    }

    /// The first item matching `query`, with its secret.
    public func item(
        matching query: GenericPasswordQuery, authentication: ItemAuthentication = .none
    ) throws(KeychainError) -> GenericPasswordItem {
        try items(matching: query, limit: .one, returnData: true, authentication: authentication)[
            0]
    }

    /// The secret of the first item matching `query`.
    public func data(
        matching query: GenericPasswordQuery, authentication: ItemAuthentication = .none
    ) throws(KeychainError) -> Data {
        try item(matching: query, authentication: authentication).data ?? Data()
    }

    /// The secret of the first item matching `query`, or nil when there is none.
    public func dataIfPresent(
        matching query: GenericPasswordQuery, authentication: ItemAuthentication = .none
    ) throws(KeychainError) -> Data? {
        do {
            return try data(matching: query, authentication: authentication)
        } catch {
            if error.status == KeychainStatus.itemNotFound { return nil }
            throw error
        }
    }

    // MARK: - Update

    /// Changes every item matching `query`. Mirrors `SecItemUpdate`: the creation date is kept,
    /// the modification date moves; a change that would give two items one primary key fails
    /// with `errSecDuplicateItem` and changes nothing.
    ///
    /// New data for an item with access constraints needs its credentials, as a read does.
    public func update(
        matching query: GenericPasswordQuery, with changes: GenericPasswordChanges,
        authentication: ItemAuthentication = .none
    ) throws(KeychainError) {
        guard !changes.isEmpty else {
            throw KeychainError(KeychainStatus.param, "nothing to update")
        }
        try Validation.check(changes)
        if let group = changes.accessGroup { try checkEntitlement(group) }
        let matches = try find(query)
        guard !matches.isEmpty else { throw Self.notFound }
        // The old secrets were read only to be replaced (or carried into records already
        // written by then): none is left in freed memory.
        defer { for match in matches { match.record.data.wipeShared() } }

        let now = Self.now()
        var planned: [(old: Match, new: StoredRecord)] = []
        var newKeys = Set<PrimaryKey>()
        var opener = ItemOpener(keychain: self, authentication: authentication)
        for match in matches {
            try Validation.check(changes, for: match.record.attributes)
            var attributes = changes.applied(to: match.record.attributes)
            try Validation.checkClass(attributes)
            attributes.modificationDate = now
            var data = match.record.data
            var dataAbsent = match.record.dataAbsent
            if let newData = changes.data {
                dataAbsent = false
                let constraints = attributes.accessControl
                if !constraints.uses.isEmpty {
                    // The credentials are proved on the old secret before a new one is sealed.
                    _ = try opener.open(match.record)
                }
                data = try protect(newData, constraints, authentication)
            }
            var record = StoredRecord(id: match.record.id, attributes: attributes, data: data)
            record.dataAbsent = dataAbsent
            guard newKeys.insert(record.key).inserted else { throw Self.duplicate }
            planned.append((match, record))
        }
        let matchedPaths = Set(matches.map(\.path))
        // A rename onto another primary key takes the add lock, as an add does.
        let lock =
            planned.contains(where: { $0.1.key != $0.0.record.key }) ? try primaryKeyLock() : nil
        defer { withExtendedLifetime(lock) {} }
        for (old, new) in planned where new.key != old.record.key {
            let existing: SearchResult
            do { existing = try secretService.search(new.key.searchAttributes) } catch {
                throw KeychainError(error)
            }
            if existing.collectionLocked { throw Self.locked }
            if existing.unlocked.contains(where: { !matchedPaths.contains($0) }) {
                throw Self.duplicate
            }
        }

        var classKeys: [Accessibility: SecureBytes] = [:]
        for (_, new) in planned where classKeys[new.attributes.accessible] == nil {
            classKeys[new.attributes.accessible] = try classKey(new.attributes.accessible)
        }
        for (old, new) in planned {
            let classKey = classKeys[new.attributes.accessible]!
            if new.secretServiceAttributes == old.record.secretServiceAttributes {
                // Same index: rewritten in place.
                let secret = SealedItem.seal(new, key: classKey)
                do {
                    try secretService.rewrite(
                        at: old.path, from: old.record, to: new, secret: secret)
                } catch { throw KeychainError(error) }
            } else {
                var moved = new
                moved.id = UUID().uuidString
                _ = try create(moved, sealedWith: classKey)
                do { try secretService.deleteItem(at: old.path) } catch {
                    throw KeychainError(error)
                }
            }
        }
    }

    // MARK: - Delete

    /// Deletes every item matching `query`. Mirrors `SecItemDelete`: `errSecItemNotFound` when
    /// nothing matched, or when every match was deleted by a concurrent call first.
    public func delete(matching query: GenericPasswordQuery) throws(KeychainError) {
        // Found and deleted under the device's keychain lock (every process of the device takes
        // it): of concurrent deletes of one item, the first finds and deletes it, the others
        // find nothing — whatever the provider answers for a second delete of a gone item
        // (KWallet answers success).
        let lock = try primaryKeyLock()
        defer { withExtendedLifetime(lock) {} }
        let paths = try findPaths(query)
        guard !paths.isEmpty else { throw Self.notFound }
        // Dated for the next sync's tombstones (`KeychainSync`), before anything goes.
        if query.synchronizable != .no {
            let deletions = DeletionTimes(device: device)
            deletions.note(paths)
            // A deletion by primary key also stands against other devices' writes of that item
            // that this device never held.
            if let service = query.fields.service, let account = query.fields.account,
                query.isByPrimaryKey
            {
                deletions.note(
                    service: service, account: account, accessGroup: query.fields.accessGroup)
            }
        }
        // One answer per deletion, as Apple's: of concurrent deletes of one item, the one whose
        // call removed it succeeds and the others find nothing (errSecItemNotFound).
        var deleted = 0
        for path in paths {
            do {
                try secretService.deleteItem(at: path)
                deleted += 1
            } catch  where error.code == .noSuchObject {
                continue  // deleted concurrently, by that other call
            } catch {
                throw KeychainError(error)
            }
        }
        guard deleted > 0 else { throw Self.notFound }
    }

    // MARK: - Engine

    struct Match {
        var path: ItemPath
        var record: StoredRecord
    }

    /// The groups a query searches, and the Secret Service attributes that select its items.
    private func index(_ query: GenericPasswordQuery) throws(KeychainError)
        -> (groups: [String], attributes: [String: String])
    {
        try Validation.check(query)
        let groups: [String]
        if let group = query.accessGroup {
            try checkEntitlement(group)
            groups = [group]
        } else {
            groups = app.accessGroups
        }
        let attributes = SecretServiceSchema.attributes(
            itemClass: query.itemClass, accessGroup: groups.count == 1 ? groups[0] : nil,
            service: query.service, account: query.account,
            synchronizable: query.synchronizable == .any ? nil : query.synchronizable == .yes,
            accessible: query.accessible,
            internet: query.fields.location)
        var indexed = attributes
        indexed[SecretServiceSchema.itemID] = query.persistentID
        return (groups, indexed)
    }

    /// The paths of every item matching `query`. When the clear index alone decides the match
    /// (one group, no label/comment/description/generic condition) no secret is read.
    private func findPaths(_ query: GenericPasswordQuery) throws(KeychainError) -> [ItemPath] {
        let (groups, attributes) = try index(query)
        guard Self.indexDecides(query, groups: groups) else { return try find(query).map(\.path) }
        return try unlockedItems(attributes)
    }

    /// Whether the clear index alone decides whether an item matches `query`: one group and no
    /// condition on a field the index does not hold (`ItemAttribute.indexed`).
    private static func indexDecides(_ query: GenericPasswordQuery, groups: [String]) -> Bool {
        groups.count == 1
            && ItemAttribute.all.allSatisfy { $0.indexed || !$0.isGiven(in: query.fields) }
    }

    /// The items matching `attributes`. A locked collection is `errSecInteractionNotAllowed`,
    /// whether the provider lists its items as locked or hides them (KeePassXC): headless, nobody
    /// can unlock it.
    private func unlockedItems(_ attributes: [String: String]) throws(KeychainError) -> [ItemPath] {
        let found: SearchResult
        do { found = try secretService.search(attributes) } catch { throw KeychainError(error) }
        if found.collectionLocked { throw Self.locked }
        return found.unlocked
    }

    /// Every item (duplicates included) matching `query` in the app's groups, in a stable order:
    /// the app's group order, then creation order.
    private func find(_ query: GenericPasswordQuery) throws(KeychainError) -> [Match] {
        let (groups, attributes) = try index(query)
        let found = try unlockedItems(attributes)
        // The class keys the items need are read as they come up (one each, usually one).
        var read: Device.KeyedRead
        do { read = try device.read(found, classes: []) } catch { throw KeychainError(error) }
        var sealed: [(path: ItemPath, item: SealedItem)] = []
        for path in found {
            // Absent: deleted (or locked) between the search and the read.
            guard let bytes = read.secrets[path] else { continue }
            let item = try SealedItem.parse(bytes)
            try ensureKey(item.protectionClass, in: &read.classKeys)
            sealed.append((path, item))
        }
        let opened = SealedItem.openAll(sealed.map(\.item), keys: read.classKeys)
        // A record that matches the index matches the query too when the index decides.
        let indexDecides = Self.indexDecides(query, groups: groups)
        var matches: [Match] = []
        for (index, (path, _)) in sealed.enumerated() {
            let record = try opened[index].get()
            // The index found it for these attributes: a record that says otherwise was moved
            // or edited.
            guard record.matchesIndex(attributes) else {
                throw KeychainError(
                    KeychainStatus.decode, "an item's record does not match its index")
            }
            guard ExactNames.contains(groups, record.key.accessGroup),
                indexDecides || query.matches(record.attributes)
            else { continue }
            matches.append(Match(path: path, record: record))
        }
        // Sorted by key, through indices (comparing the matches themselves copied each one).
        let groupOrder = Dictionary(uniqueKeysWithValues: groups.enumerated().map { ($1, $0) })
        let keys = matches.map { match in
            (
                group: groups.count > 1 ? groupOrder[match.record.key.accessGroup]! : 0,
                created: Self.creationOrder(match.record)
            )
        }
        return matches.indices.sorted { a, b in
            let (ka, kb) = (keys[a], keys[b])
            return (ka.group, ka.created.date, ka.created.id)
                < (kb.group, kb.created.date, kb.created.id)
        }.map { matches[$0] }
    }

    /// Creation order as every process and every provider sees it: the record's creation time
    /// (sealed with the item), then its random id. Not the object path: paths are in creation
    /// order on gnome-keyring and KWallet only (KeePassXC's are random UUIDs).
    private static func creationOrder(_ record: StoredRecord) -> (date: Date, id: String) {
        (record.attributes.creationDate ?? .distantPast, record.id)
    }

    /// The rule for duplicates of one primary key, for every reader (the Keychain's own, and
    /// the sync's): whether `record` was created before `other` — it wins.
    static func createdBefore(_ record: StoredRecord, _ other: StoredRecord) -> Bool {
        let (a, b) = (creationOrder(record), creationOrder(other))
        return (a.date, a.id) < (b.date, b.id)
    }

    /// One item per primary key: the first created. `matches` is in `find`'s order, where the
    /// items of one primary key (one access group) are in `creationOrder`, so the first of
    /// each key is its winner.
    private static func winners(_ matches: [Match]) -> [Match] {
        var seen = Set<PrimaryKey>(minimumCapacity: matches.count)
        return matches.filter { seen.insert($0.record.key).inserted }
    }

    private static func isCacheable(_ query: GenericPasswordQuery) -> Bool {
        query.service != nil && query.account != nil && query.synchronizable != .any
    }

    /// One `GetSecrets` round trip on the path this query found last time, validated.
    private func hotRead(_ query: GenericPasswordQuery) throws(KeychainError) -> StoredRecord? {
        guard Self.isCacheable(query), let (path, protection) = pathCache.withLock({ $0[query] })
        else {
            return nil
        }
        try Validation.check(query)
        var read: Device.KeyedRead
        do { read = try device.read([path], classes: [protection]) } catch {
            throw KeychainError(error)
        }
        guard let bytes = read.secrets[path],
            let record = try? open(bytes, keys: &read.classKeys),
            ExactNames.contains(app.accessGroups, record.key.accessGroup),
            query.matches(record.attributes)
        else {
            pathCache.withLock { _ = $0.removeValue(forKey: query) }
            return nil
        }
        return record
    }

    private func create(
        _ record: StoredRecord, sealedWith classKey: SecureBytes, replacing: Bool = false
    )
        throws(KeychainError) -> ItemPath
    {
        let secret = SealedItem.seal(record, key: classKey)
        do {
            return try secretService.createItem(
                label: record.secretServiceLabel, attributes: record.secretServiceAttributes,
                secret: secret, replacing: replacing)
        } catch { throw KeychainError(error) }
    }

    /// Opens a stored secret with its class key, asking the Device for keys `keys` lacks.
    private func open(_ bytes: Data, keys: inout [ProtectionClass: SecureBytes])
        throws(KeychainError)
        -> StoredRecord
    {
        let sealed = try SealedItem.parse(bytes)
        try ensureKey(sealed.protectionClass, in: &keys)
        return try sealed.open(key: keys[sealed.protectionClass]!)
    }

    /// Asks the Device for the key of `protection` when `keys` lacks it.
    private func ensureKey(
        _ protection: ProtectionClass, in keys: inout [ProtectionClass: SecureBytes]
    )
        throws(KeychainError)
    {
        guard keys[protection] == nil else { return }
        do { keys[protection] = try device.classKey(protection) } catch {
            throw KeychainError(error)
        }
    }

    private func classKey(_ accessible: Accessibility) throws(KeychainError) -> SecureBytes {
        do { return try device.classKey(accessible.protectionClass) } catch {
            throw KeychainError(error)
        }
    }

    private func checkEntitlement(_ group: String) throws(KeychainError) {
        guard ExactNames.contains(app.accessGroups, group) else {
            throw KeychainError(
                KeychainStatus.missingEntitlement,
                "the app is not entitled to access group \(group)")
        }
    }

}
