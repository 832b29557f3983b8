#if KEEPSAKE_TEST_HOOKS
    import Foundation

    /// Test hook (debug builds only): a cloud account whose process is killed (SIGKILL, as a
    /// user's `kill -9` or a power cut) just before its `dieAfter`-th-and-one change of the cloud —
    /// a write of one object, a compare-and-swap, a deletion — and that notes each change's kind
    /// in `trace`, so that a test kills a sync at every point of its own recorded sequence.
    ///
    /// The command line wraps its cloud in one when `KEEPSAKE_TEST_CLOUD_DIE_AFTER` or
    /// `KEEPSAKE_TEST_CLOUD_TRACE` is set; a release build has neither the type nor the lookup.
    package final class MortalCloud: CloudStorage, WrappedCloud, @unchecked Sendable {
        // @unchecked Sendable: `changes` is guarded by `counting`.
        package let inner: any CloudStorage
        private let dieAfter: Int?
        private let trace: URL?
        private let counting = NSLock()
        private var changes = 0

        package init(_ inner: any CloudStorage, dieAfter: Int?, trace: URL?) {
            self.inner = inner
            self.dieAfter = dieAfter
            self.trace = trace
        }

        /// `cloud` wrapped as the environment asks, or as it is.
        package static func fromEnvironment(_ cloud: any CloudStorage) -> any CloudStorage {
            let environment = ProcessInfo.processInfo.environment
            let dieAfter = environment["KEEPSAKE_TEST_CLOUD_DIE_AFTER"].flatMap { Int($0) }
            let trace = environment["KEEPSAKE_TEST_CLOUD_TRACE"].map { URL(fileURLWithPath: $0) }
            guard dieAfter != nil || trace != nil else { return cloud }
            return MortalCloud(cloud, dieAfter: dieAfter, trace: trace)
        }

        /// Counts one change of `name`: notes it, or dies where the test said.
        private func change(_ kind: String, _ name: String) {
            counting.lock()
            defer { counting.unlock() }
            if let dieAfter, changes >= dieAfter { kill(getpid(), SIGKILL) }
            changes += 1
            if let trace {
                // The kind of object only (`kc-`, `account-manifest`, …): no name of the account.
                let what =
                    CloudObjects.kind(ofObjectNamed: name)?.prefix
                    ?? (name.hasPrefix("account") ? name : String(name.prefix { $0 != "-" }))
                let line = Data("\(kind) \(what)\n".utf8)
                if let handle = try? FileHandle(forWritingTo: trace) {
                    _ = try? handle.seekToEnd()
                    try? handle.write(contentsOf: line)
                    try? handle.close()
                } else {
                    try? line.write(to: trace)
                }
            }
        }

        package func read(_ name: String) throws -> Data? { try inner.read(name) }
        package func write(_ name: String, _ data: Data) throws {
            change("write", name)
            try inner.write(name, data)
        }
        package func delete(_ name: String) throws {
            change("delete", name)
            try inner.delete(name)
        }
        package func list() throws -> [String] { try inner.list() }
        package func lock() throws -> AnyObject { try inner.lock() }
        package func readVersioned(_ name: String) throws -> VersionedObject? {
            try inner.readVersioned(name)
        }
        package func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?)
            throws -> Bool
        {
            change("swap", name)
            return try inner.write(name, data, ifVersion: expected)
        }
        package func write(_ objects: [(name: String, data: Data)]) throws {
            // One at a time, so that a death falls between two of them.
            for object in objects { try write(object.name, object.data) }
        }
        package func read(_ names: [String]) throws -> [String: Data] { try inner.read(names) }
    }
#endif
