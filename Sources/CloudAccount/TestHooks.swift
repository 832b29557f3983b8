// The module's test hooks, gathered: compiled only into debug builds (`KEEPSAKE_TEST_HOOKS`,
// Package.swift), as swift-system's `Mocking.swift`.
#if KEEPSAKE_TEST_HOOKS
    import Device
    import Foundation

    /// Test hook (debug builds only): a cloud account whose process is killed (SIGKILL, as a
    /// user's `kill -9` or a power cut) just before its `dieAfter`-th-and-one change of the cloud —
    /// a write of one object, a compare-and-swap, a deletion — and that notes each change's kind
    /// in `trace`, so that a test kills a sync at every point of its own recorded sequence.
    ///
    /// The command line wraps its cloud in one when `KEEPSAKE_TEST_CLOUD_DIE_AFTER` or
    /// `KEEPSAKE_TEST_CLOUD_TRACE` is set; a release build has neither the type nor the lookup.
    package final class MortalCloud: WrappedCloud, @unchecked Sendable {
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
        package func willChange(_ change: CloudChange, _ name: String) {
            counting.lock()
            defer { counting.unlock() }
            if let dieAfter, changes >= dieAfter { kill(getpid(), SIGKILL) }
            changes += 1
            if let trace {
                // The kind of object only (`kc-`, `account-manifest`, …): no name of the account.
                let what =
                    CloudObjects.kind(ofObjectNamed: name)?.prefix
                    ?? (name.hasPrefix("account") ? name : String(name.prefix { $0 != "-" }))
                let line = Data("\(change.rawValue) \(what)\n".utf8)
                if let handle = try? FileHandle(forWritingTo: trace) {
                    _ = try? handle.seekToEnd()
                    try? handle.write(contentsOf: line)
                    try? handle.close()
                } else {
                    try? line.write(to: trace)
                }
            }
        }

        package func write(_ objects: [(name: String, data: Data)]) throws {
            // One at a time, so that a death falls between two of them.
            for object in objects { try write(object.name, object.data) }
        }
    }
#endif

#if KEEPSAKE_TEST_HOOKS
    extension CloudAccount {
        /// Test hook: re-writes the account manifest to vouch for the store objects the cloud
        /// holds now, as only a holder of the account key could — so a test reaches each store's
        /// own checks (sealing bound to name, kind and account) behind the manifest.
        package func vouchForCloudAsIs() throws(DeviceError) {
            guard let cloud, let key = try self.keys.cloudKey(forUpload: false) else { return }
            let account = SeenManifest.account(key)
            let seen = manifests.seen
            let current = try cloud.checked.read(AccountManifest.name).flatMap {
                try? AccountManifest.open($0, under: key)
            }
            var manifest =
                current ?? AccountManifest(version: 0, epoch: 0, objects: [:], devices: [:])
            manifest.version = max(manifest.version, seen.read(account: account)?.version ?? 0) + 1
            manifest.objects = [:]
            manifest.layout = AccountManifest.layout
            // Each copy is vouched for under its object's name, and moved to the stored name
            // that its MAC gives (a test puts bytes under either).
            for stored in try cloud.checked.list()
            where CloudObjects.kind(ofObjectNamed: stored) != nil {
                guard let bytes = try cloud.checked.read(stored) else { continue }
                let name = AccountManifest.objectName(ofStored: stored)
                let mac = AccountManifest.mac(bytes, name: name, under: key)
                manifest.objects[Data(name.utf8)] = mac
                let target = AccountManifest.storedName(name, mac: mac, layout: manifest.layout)
                if target != stored {
                    try cloud.checked.write(target, bytes)
                    try cloud.checked.delete(stored)
                }
            }
            try cloud.checked.write(AccountManifest.name, manifest.sealed(under: key))
            try seen.write(account: account, epoch: manifest.epoch, version: manifest.version)
        }
    }
#endif
