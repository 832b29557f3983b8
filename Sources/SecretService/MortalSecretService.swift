#if KEEPSAKE_TEST_HOOKS
    import Foundation

    /// Test hook (debug builds only): a Secret Service whose process is killed (SIGKILL, as a
    /// user's `kill -9` or a power cut) just before its `dieAfter`-th-and-one write — an item
    /// created, replaced or deleted — so that a soak kills an add, an update, a delete or a
    /// passcode change mid-way. The command line wraps its connection in one when
    /// `KEEPSAKE_TEST_SECRETS_DIE_AFTER` is set; a release build has neither the type nor the
    /// lookup.
    package final class MortalSecretService: SecretServiceBackend, @unchecked Sendable {
        // @unchecked Sendable: `writes` is guarded by `counting`.
        private let inner: any SecretServiceBackend
        private let dieAfter: Int
        private let counting = NSLock()
        private var writes = 0

        package init(_ inner: any SecretServiceBackend, dieAfter: Int) {
            self.inner = inner
            self.dieAfter = dieAfter
        }

        /// The process's connection, wrapped as the environment asks, or as it is.
        package static func fromEnvironment(_ connection: SecretServiceConnection)
            -> SecretServiceConnection
        {
            guard
                let dieAfter = ProcessInfo.processInfo.environment[
                    "KEEPSAKE_TEST_SECRETS_DIE_AFTER"
                ].flatMap({ Int($0) })
            else { return connection }
            return SecretServiceConnection(
                backend: MortalSecretService(connection.backend, dieAfter: dieAfter),
                timeout: connection.timeout)
        }

        private func willWrite() {
            counting.lock()
            defer { counting.unlock() }
            if writes >= dieAfter { kill(getpid(), SIGKILL) }
            writes += 1
        }

        package var busAddress: String? { inner.busAddress }

        package func search(_ attributes: [String: String], in collection: CollectionPath)
            throws(SecretServiceError) -> SearchResult
        { try inner.search(attributes, in: collection) }

        package func items(in collection: CollectionPath) throws(SecretServiceError) -> [ItemPath] {
            try inner.items(in: collection)
        }

        package func schema(of path: ItemPath) throws(SecretServiceError) -> String {
            try inner.schema(of: path)
        }

        package func secrets(at paths: [ItemPath], oneByOneOnMissing: Bool)
            throws(SecretServiceError) -> [ItemPath: Data]
        { try inner.secrets(at: paths, oneByOneOnMissing: oneByOneOnMissing) }

        package func createItem(
            label: String, attributes: [String: String], secret: Data, replacing: Bool,
            in collection: CollectionPath
        ) throws(SecretServiceError) -> ItemPath {
            willWrite()
            return try inner.createItem(
                label: label, attributes: attributes, secret: secret, replacing: replacing,
                in: collection)
        }

        package func replaceItem(
            at path: ItemPath, secret: Data, label: String?, attributes: [String: String]?
        ) throws(SecretServiceError) {
            willWrite()
            try inner.replaceItem(at: path, secret: secret, label: label, attributes: attributes)
        }

        package func deleteItem(at path: ItemPath) throws(SecretServiceError) {
            willWrite()
            try inner.deleteItem(at: path)
        }

        package func lock(_ collection: CollectionPath) throws(SecretServiceError) {
            try inner.lock(collection)
        }

        package func isLocked(_ collection: CollectionPath) throws(SecretServiceError) -> Bool {
            try inner.isLocked(collection)
        }

        package func unlock(_ collection: CollectionPath, masterPassword: Data)
            throws(SecretServiceError)
        { try inner.unlock(collection, masterPassword: masterPassword) }

        package func createCollection(label: String, masterPassword: Data)
            throws(SecretServiceError) -> CollectionPath
        { try inner.createCollection(label: label, masterPassword: masterPassword) }
    }
#endif
