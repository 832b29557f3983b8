import BlockStore
import CloudAccount
import Device
import Foundation
import KeyValueStore
import Keychain
import Platform
import Preferences

/// Which two stores keep the hint.
public enum HintProfile: String, Sendable, CaseIterable {
    /// Keychain item on the Secret Service, Block Store as fallback.
    case linux
    /// Key-value store primary, synchronizable AfterFirstUnlock Keychain item fallback.
    case apple
    /// Block Store primary, preferences + Auto Backup fallback.
    case android
}

/// What happened to one store in a `set` or `clear`.
public struct StoreOutcome: Sendable, Hashable {
    /// The store's name (`HintStore.name`).
    public var store: String
    /// nil on success; otherwise what failed, in words (never the hint).
    public var error: String?
    /// Whether the store did what was asked.
    public var succeeded: Bool { error == nil }
}

/// The throwing core of the recovery hint: dual write, read either, clear both. Tests and tools use
/// it; apps use the never-throwing ``RecoveryHints`` facade.
///
/// Process-safe: `update` reads, merges and writes under the app's hint lock (flock), so two
/// processes setting different fields at once both keep their field. Every store write is atomic,
/// so a reader never sees a torn hint.
public final class RecoveryHintService: Sendable {
    /// Which platform's pair of stores these are.
    public let profile: HintProfile
    /// Read first; nil when the device lacks it (android without Block Store).
    public let primary: (any HintStore)?
    /// Read when the primary has no hint or fails; written beside it.
    public let fallback: any HintStore
    private let lockFile: URL

    /// A service over `primary` (nil: the fallback alone) and `fallback`, its updates serialized by
    /// a flock on `lockFile`.
    public init(
        primary: (any HintStore)?, fallback: any HintStore, lockFile: URL, profile: HintProfile
    ) {
        self.primary = primary
        self.fallback = fallback
        self.lockFile = lockFile
        self.profile = profile
    }

    /// The stores of `profile` for `app` on `device`, signed out (nothing syncs); see
    /// `make(profile:app:account:)`.
    public static func make(profile: HintProfile, app: App, device: Device) throws(HintError)
        -> RecoveryHintService
    {
        try make(profile: profile, app: app, account: CloudAccount(device, cloud: nil))
    }

    /// The stores of `profile` for `app` on `account`'s device, their cloud copies in `account`.
    public static func make(profile: HintProfile, app: App, account: CloudAccount)
        throws(HintError) -> RecoveryHintService
    {
        let device = account.device
        let lockFile = device.appDataDirectory(app, store: "recovery-hint").appendingPathComponent(
            "lock")
        switch profile {
        case .linux:
            return RecoveryHintService(
                primary: KeychainHintStore(keychain: Keychain(app: app, device: device)),
                fallback: BlockStoreHintStore(client: BlockStoreClient(app: app, device: device)),
                lockFile: lockFile, profile: profile)
        case .apple:
            return RecoveryHintService(
                primary: KeyValueHintStore(
                    store: UbiquitousKeyValueStore(app: app, account: account)),
                fallback: KeychainHintStore(
                    keychain: Keychain(app: app, device: device), synchronizable: true),
                lockFile: lockFile, profile: profile)
        case .android:
            // A device without Block Store (no Play services) uses the fallback alone.
            let blockStore = (try? device.settings().blockStoreAvailable) ?? true
            let preferences: PreferencesHintStore
            do { preferences = try PreferencesHintStore(app: app, account: account) } catch {
                throw HintError(
                    .allStoresFailed, "the preferences store could not be set up: \(error)")
            }
            return RecoveryHintService(
                primary: blockStore
                    ? BlockStoreHintStore(client: BlockStoreClient(app: app, device: device)) : nil,
                fallback: preferences, lockFile: lockFile, profile: profile)
        }
    }

    private var stores: [any HintStore] { (primary.map { [$0] } ?? []) + [fallback] }

    /// The hint from the primary store, else the fallback, else empty — with the store it came
    /// from. Throws only when every store failed to read.
    public func get() throws(HintError) -> (hint: RecoveryHint, source: String?) {
        var failures: [String] = []
        for store in stores {
            do {
                if let hint = try store.read() { return (hint, store.name) }
            } catch {
                failures.append("\(store.name): \(Self.describe(error))")
            }
        }
        if failures.count == stores.count {
            throw HintError(.allStoresFailed, failures.joined(separator: "; "))
        }
        return (.empty, nil)
    }

    /// Writes `hint` to both stores (it replaces what was there). Refuses an empty hint without
    /// touching anything. Succeeds when at least one store was written; reports each.
    @discardableResult
    public func set(_ hint: RecoveryHint) throws(HintError) -> [StoreOutcome] {
        guard !hint.isEmpty else {
            throw HintError(.empty, "Refusing to persist an empty recovery hint")
        }
        try hint.validate()
        return try locked { () throws(HintError) in try write(hint) }
    }

    /// Merges `changes` into the current hint and writes the result, under the hint lock.
    @discardableResult
    public func update(_ changes: RecoveryHint) throws(HintError) -> (
        hint: RecoveryHint, outcomes: [StoreOutcome]
    ) {
        guard !changes.isEmpty else {
            throw HintError(.empty, "Refusing to persist an empty recovery hint")
        }
        try changes.validate()
        return try locked { () throws(HintError) in
            let current = (try? get().hint) ?? .empty
            let merged = current.merging(changes)
            return (merged, try write(merged))
        }
    }

    /// Removes the hint from both stores; reports each.
    @discardableResult
    public func clear() -> [StoreOutcome] {
        (try? locked { () throws(HintError) in
            stores.map { store in
                do {
                    try store.clear()
                    return StoreOutcome(store: store.name, error: nil)
                } catch {
                    return StoreOutcome(store: store.name, error: Self.describe(error))
                }
            }
        }) ?? stores.map { StoreOutcome(store: $0.name, error: "the hint lock could not be taken") }
    }

    private func write(_ hint: RecoveryHint) throws(HintError) -> [StoreOutcome] {
        let outcomes = stores.map { store in
            do {
                try store.write(hint)
                return StoreOutcome(store: store.name, error: nil)
            } catch {
                return StoreOutcome(store: store.name, error: Self.describe(error))
            }
        }
        guard outcomes.contains(where: \.succeeded) else {
            throw HintError(
                .allStoresFailed,
                outcomes.map { "\($0.store): \($0.error ?? "")" }.joined(separator: "; "))
        }
        return outcomes
    }

    private func locked<R>(_ body: () throws(HintError) -> R) throws(HintError) -> R {
        let lock: FileLock
        do { lock = try FileLock(lockFile) } catch {
            throw HintError(.allStoresFailed, "the hint lock could not be opened")
        }
        return try withExtendedLifetime(lock) { () throws(HintError) in try body() }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as KeychainError: error.description
        case let error as BlockStoreError: error.description
        case let error as HintError: error.message
        case let error as DeviceError: error.description
        case let error as PreferencesError: error.description
        default: "\(error)"
        }
    }
}

/// The app-facing recovery hint: never throws. `get` answers the empty hint on failure; `set`
/// merges the given fields into the current hint (fields not given stay); `clear` always returns.
/// What it swallows it logs (errors only, never the hint). Built on ``RecoveryHintService``, which
/// throws ``HintError`` where this answers empty.
public final class RecoveryHints: Sendable {
    /// The throwing service underneath; nil makes every call a logged no-op.
    public let service: RecoveryHintService?
    private let log: @Sendable (String) -> Void

    /// A facade over `service`; `nil` (the service could not be built) makes every call a logged
    /// no-op.
    public init(
        service: RecoveryHintService?,
        log: @escaping @Sendable (String) -> Void = {
            FileHandle.standardError.write(Data("keepsake: recovery hint: \($0)\n".utf8))
        }
    ) {
        self.service = service
        self.log = log
    }

    /// The hint from the first store that has one; the empty hint, logged, when every store fails.
    public func get() -> RecoveryHint {
        guard let service else {
            log("get: no hint service")
            return .empty
        }
        do { return try service.get().hint } catch {
            log("get failed, answering the empty hint: \(error.message)")
            return .empty
        }
    }

    /// Merges the given fields into the hint (fields not given stay); a failure is logged.
    public func set(
        lastAuthenticatorId: String? = nil, lastWallet: String? = nil, lastLoginAt: Int64? = nil
    ) {
        set(
            RecoveryHint(
                lastAuthenticatorId: lastAuthenticatorId, lastWallet: lastWallet,
                lastLoginAt: lastLoginAt))
    }

    /// Merges the fields `changes` sets into the hint; an empty `changes` or a failure is logged.
    public func set(_ changes: RecoveryHint) {
        guard let service else { return log("set: no hint service") }
        do {
            let (_, outcomes) = try service.update(changes)
            for failed in outcomes where !failed.succeeded {
                log("set: \(failed.store) failed (the other store kept it): \(failed.error ?? "")")
            }
        } catch {
            log("set failed: \(error.message)")
        }
    }

    /// Removes the hint from both stores; each store that fails is logged.
    public func clear() {
        guard let service else { return log("clear: no hint service") }
        for failed in service.clear() where !failed.succeeded {
            log("clear: \(failed.store) failed: \(failed.error ?? "")")
        }
    }
}
