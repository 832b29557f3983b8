import Foundation
import Sealing
import SecretService
import Synchronization

/// The device the apps run on: its lock screen, lock state and data-protection class keys.
///
/// Key hierarchy: one random 32-byte key per protection class. At rest (in the Secret Service's
/// persistent `default` collection) each class key is sealed under a key-encryption key: with a
/// knowledge factor, BLAKE2b(device secret, Argon2id(passcode)); without one, BLAKE2b(device
/// secret) alone. Unwrapped class keys live only in runtime state — the Secret Service's
/// memory-only `session` collection — so a reboot (daemon restart, or `reboot()`) forgets them.
/// `WhenUnlocked…` keys are dropped at lock, `AfterFirstUnlock…` keys stay until reboot. Changing
/// the passcode rewraps the class keys; no item is re-encrypted.
///
/// The passcode is never stored: an Argon2id verifier (salt and cost beside it) is. Wrong
/// passcodes wait `retryPolicy` delays that are stored with the verifier, so they hold across
/// processes and restarts.
///
/// Thread-safe; several processes may share one device.
public final class Device: Sendable {
    package let secretService: SecretServiceConnection
    /// The device directory (owned by the "OS", outside every app): settings and the stores'
    /// per-app data that survives uninstall.
    public let directory: URL
    /// The signed-in cloud account, or nil when signed out.
    public let cloud: (any CloudStorage)?
    /// Argon2id cost for a newly set passcode (a stored verifier keeps its own cost).
    package var passcodeCost: Argon2Cost { tuning.passcodeCost }
    package var retryPolicy: RetryPolicy { tuning.retryPolicy }
    /// The real device's cost and delays; only the test support target passes others.
    package let tuning: DeviceTuning

    private let runtimePaths = Mutex<[ProtectionClass: ItemPath]>([:])
    /// The last class keys read from runtime state, so that reading the same key again does not
    /// allocate owned memory each time. Never used without reading the runtime item first: a key
    /// dropped at lock is gone from the read, and so from the result.
    private let recentKeys = Mutex<[ProtectionClass: SecureBytes]>([:])
    private let dataKeyCache = Mutex<[String: SecureBytes]>([:])

    static let persistentCollection = CollectionPath.default
    static let runtimeCollection = CollectionPath("/org/freedesktop/secrets/aliases/session")
    static let stateAttributes = ["xdg:schema": "org.keepsake.Device", "keepsake-device": "state"]
    static let runtimeAttributes = [
        "xdg:schema": "org.keepsake.Runtime", "keepsake-runtime": "class-key",
    ]
    static let runtimeMagic = Data("KRK1".utf8)

    /// A device at the real cost and delays (Argon2id `moderate`, delays from one second).
    public convenience init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil,
        cloud: (any CloudStorage)? = nil
    ) {
        self.init(secretService: secretService, directory: directory, cloud: cloud, tuning: .real)
    }

    /// A device at another cost and delays: for the test support target and the development
    /// tool only (`package`), never reachable from an app or the shipped command line.
    package init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil,
        cloud: (any CloudStorage)? = nil, tuning: DeviceTuning
    ) {
        self.secretService = secretService
        self.directory = directory ?? Self.defaultDirectory
        self.cloud = cloud
        self.tuning = tuning
    }

    /// `$XDG_DATA_HOME/keepsake/device`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let dataHome =
            environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(
                ".local/share")
        return dataHome.appendingPathComponent("keepsake/device")
    }

    // MARK: - Settings, apps and per-app device data

    private var settingsFile: URL { directory.appendingPathComponent("settings.json") }

    public func settings() throws(DeviceError) -> DeviceSettings {
        do {
            guard let bytes = try Files.read(settingsFile) else { return DeviceSettings() }
            return try JSONDecoder().decode(DeviceSettings.self, from: bytes)
        } catch {
            throw DeviceError(.corrupt, "device settings: \(error)")
        }
    }

    public func updateSettings(_ change: (inout DeviceSettings) -> Void) throws(DeviceError) {
        var current = try settings()
        change(&current)
        do {
            try Files.writeAtomically(try JSONEncoder().encode(current), to: settingsFile)
        } catch {
            throw DeviceError(.notAvailable, "device settings: \(error)")
        }
    }

    /// Where a store keeps an app's data outside the app's container (it survives uninstall while
    /// the device's backup setting is on).
    package func appDataDirectory(_ app: App, store: String) -> URL {
        directory.appendingPathComponent("apps").appendingPathComponent(app.id)
            .appendingPathComponent(store)
    }

    /// Every app id with data in the device directory.
    package func appsWithData() -> [String] { Files.list(directory.appendingPathComponent("apps")) }

    /// Uninstall: the container is deleted; with backup off, the app's device data goes too.
    public func uninstall(_ app: App) throws(DeviceError) {
        let backup = try settings().backupEnabled
        do {
            try app.uninstall()
            if !backup {
                let data = directory.appendingPathComponent("apps").appendingPathComponent(app.id)
                if FileManager.default.fileExists(atPath: data.path) {
                    try FileManager.default.removeItem(at: data)
                }
            }
        } catch {
            throw DeviceError(.notAvailable, "uninstall: \(error)")
        }
    }

    /// The device's Block Store key: derived from the device secret held in the Secret Service,
    /// available in every lock state (Block Store data is readable whenever the app runs).
    ///
    /// Remembered for the process's life once derived: the device secret never changes.
    package func blockStoreKey() throws(DeviceError) -> SecureBytes { try dataKey("blockstore") }

    /// A store's key for its data in the device directory (`blockstore`, `kvstore`, …): derived
    /// from the device secret held in the Secret Service, available in every lock state, and
    /// remembered for the process's life once derived (the device secret never changes).
    package func dataKey(_ store: String) throws(DeviceError) -> SecureBytes {
        if let known = dataKeyCache.withLock({ $0[store] }) { return known }
        let key = KeyDerivation.keyedHash(
            key: SecureBytes(copying: try loadRecord().record.deviceSecret),
            context: "keepsake.\(store).v1")
        dataKeyCache.withLock { $0[store] = key }
        return key
    }

    // MARK: - End-to-end encryption and the cloud account

    /// End-to-end encryption is available only with a knowledge factor.
    public func isEndToEndEncryptionAvailable() throws(DeviceError) -> Bool {
        try lockScreenKind().hasKnowledgeFactor
    }

    /// The account's cloud key, when this device holds the key the account uses (set up here, or
    /// joined), is signed in and unlocked since boot. For uploads E2EE must be available too
    /// (`forUpload`); restoring needs only the key, which a join proved the passcode for.
    /// nil otherwise — nothing is exchanged then.
    package func cloudKey(forUpload: Bool = true) throws(DeviceError) -> SecureBytes? {
        guard let cloud else { return nil }
        let record = try loadRecord().record
        if forUpload && !record.kind.hasKnowledgeFactor { return nil }
        guard let wrapped = record.wrappedCloudKey else { return nil }
        let key = try openCloudKey(wrapped)
        guard let blobBytes = try cloudCall({ try cloud.read(AccountKeyBlob.name) }) else {
            return nil
        }
        let blob = try AccountKeyBlob.decode(blobBytes)
        return constantTimeEquals(blob.check, AccountKeyBlob.check(key)) ? key : nil
    }

    /// Joins the signed-in cloud account by proving the passcode of a device that set it up.
    /// Wrong passcodes answer authFailed with the same growing delays as unlock.
    public func join(passcode: String) throws(DeviceError) {
        guard let cloud else { throw DeviceError(.notAvailable, "signed out: no cloud account") }
        guard let bytes = try cloudCall({ try cloud.read(AccountKeyBlob.name) }) else {
            throw DeviceError(.notAvailable, "the cloud account has no key to join")
        }
        let blob = try AccountKeyBlob.decode(bytes)
        var (path, record) = try loadRecord()
        try waitForRetry(record)
        let kek = try derive(passcode, salt: blob.salt, cost: blob.cost)
        guard
            let cloudKey = try? Envelope.open(
                blob.wrappedKey, key: kek, associatedData: AccountKeyBlob.associatedData()),
            constantTimeEquals(blob.check, AccountKeyBlob.check(cloudKey))
        else {
            try recordFailure(&record, at: path)
            throw DeviceError(.authFailed, "wrong passcode for the cloud account")
        }
        record.failures = 0
        record.notBefore = 0
        record.wrappedCloudKey = try sealCloudKey(cloudKey)
        _ = try store(record, replacing: path)
    }

    private func sealCloudKey(_ cloudKey: SecureBytes) throws(DeviceError) -> Data {
        let classKey = try classKey(.afterFirstUnlock)
        return cloudKey.withUnsafeBytes {
            Envelope.seal($0, key: classKey, associatedData: Data("keepsake.cloudkey.v1".utf8))
        }
    }

    private func openCloudKey(_ wrapped: Data) throws(DeviceError) -> SecureBytes {
        let classKey = try classKey(.afterFirstUnlock)
        do {
            return try Envelope.open(
                wrapped, key: classKey, associatedData: Data("keepsake.cloudkey.v1".utf8))
        } catch {
            throw DeviceError(.corrupt, "the cloud key does not open")
        }
    }

    /// With the passcode at hand (set or unlock): creates the account key when neither this
    /// device nor the cloud has one, and (re)writes the cloud's account-key blob when this device
    /// holds the account's key.
    private func maintainCloudKey(_ record: inout DeviceRecord, passcode: String)
        throws(DeviceError) -> Bool
    {
        guard record.kind.hasKnowledgeFactor else { return false }
        var changed = false
        let blob = try cloud.flatMap { cloud throws(DeviceError) in
            try cloudCall({ try cloud.read(AccountKeyBlob.name) }).map {
                bytes throws(DeviceError) in try AccountKeyBlob.decode(bytes)
            }
        }
        var cloudKey = try record.wrappedCloudKey.map { wrapped throws(DeviceError) in
            try openCloudKey(wrapped)
        }
        if cloudKey == nil && blob == nil {
            let key = SecureBytes(randomCount: Envelope.keyLength)
            record.wrappedCloudKey = try sealCloudKey(key)
            cloudKey = key
            changed = true
        }
        guard let cloud, let cloudKey else { return changed }
        let check = AccountKeyBlob.check(cloudKey)
        if let blob, !constantTimeEquals(blob.check, check) { return changed }  // another account key: join first
        if let blob,
            (try? Envelope.open(
                blob.wrappedKey, key: try derive(passcode, salt: blob.salt, cost: blob.cost),
                associatedData: AccountKeyBlob.associatedData())) != nil
        {
            return changed  // already wrapped under this passcode
        }
        let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
        let kek = try derive(passcode, salt: salt, cost: passcodeCost)
        let wrapped = cloudKey.withUnsafeBytes {
            Envelope.seal($0, key: kek, associatedData: AccountKeyBlob.associatedData())
        }
        let newBlob = AccountKeyBlob(
            salt: salt, cost: passcodeCost, wrappedKey: wrapped, check: check)
        try cloudCall { try cloud.write(AccountKeyBlob.name, newBlob.encoded()) }
        return changed
    }

    private func cloudCall<R>(_ body: () throws -> R) throws(DeviceError) -> R {
        do { return try body() } catch let error as DeviceError { throw error } catch {
            throw DeviceError(.notAvailable, "cloud account unreachable: \(error)")
        }
    }

    // MARK: - Lock screen

    public func lockScreenKind() throws(DeviceError) -> LockScreenKind {
        try loadRecord().record.kind
    }

    /// The lock state. Without a knowledge factor the device is always unlocked.
    public func state() throws(DeviceError) -> LockState {
        guard try loadRecord().record.kind.hasKnowledgeFactor else { return .unlocked }
        let keys = try read([]).classKeys
        if keys[.whenUnlocked] != nil { return .unlocked }
        if keys[.afterFirstUnlock] != nil { return .locked }
        return .beforeFirstUnlock
    }

    /// What changing the lock screen did.
    public struct LockScreenChange: Sendable {
        /// The knowledge factor was removed: `WhenPasscodeSetThisDeviceOnly` key is destroyed, so
        /// the caller deletes those items.
        public var knowledgeFactorRemoved: Bool
    }

    /// Sets, changes or removes the lock screen. With a knowledge factor set, `currentPasscode`
    /// must prove it (wrong → errSecAuthFailed, rate-limited). Afterwards the device is unlocked.
    @discardableResult
    public func setLockScreen(_ kind: LockScreenKind, passcode: String?, currentPasscode: String?)
        throws(DeviceError) -> LockScreenChange
    {
        let newPasscode: String?
        if kind.hasKnowledgeFactor {
            guard let passcode else {
                throw DeviceError(.invalidPasscode, "a \(kind.rawValue) needs a passcode")
            }
            newPasscode = try kind.validate(passcode)
        } else {
            newPasscode = nil
        }
        var (path, record) = try loadRecord()
        let hadKnowledgeFactor = record.kind.hasKnowledgeFactor
        var keys: [ProtectionClass: SecureBytes]
        if hadKnowledgeFactor {
            guard let currentPasscode else {
                throw DeviceError(.authFailed, "the current passcode is required")
            }
            keys = try unwrap(record, kek: try verify(currentPasscode, &record, at: path))
        } else {
            keys = try unwrap(record, kek: deviceKEK(record))
        }

        record.kind = kind
        record.failures = 0
        record.notBefore = 0
        let kek: SecureBytes
        if let newPasscode {
            let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
            let passcodeKey = try derive(newPasscode, salt: salt, cost: passcodeCost)
            record.salt = salt
            record.cost = passcodeCost
            record.verifier = Self.verifier(passcodeKey).unsafeData()
            kek = Self.passcodeKEK(record, passcodeKey: passcodeKey)
            if keys[.whenPasscodeSetThisDeviceOnly] == nil {
                keys[.whenPasscodeSetThisDeviceOnly] = SecureBytes(randomCount: Envelope.keyLength)
            }
        } else {
            record.salt = nil
            record.cost = nil
            record.verifier = nil
            kek = deviceKEK(record)
            keys[.whenPasscodeSetThisDeviceOnly] = nil
        }
        record.wrappedKeys = Self.wrap(keys, kek: kek)
        if newPasscode == nil { record.wrappedCloudKey = nil }  // no E2EE: the cloud key goes
        _ = try store(record, replacing: path)
        try forgetRuntime(ProtectionClass.allCases)
        try provisionRuntime(keys)
        if let newPasscode, try maintainCloudKey(&record, passcode: newPasscode) {
            _ = try store(record, replacing: path)
        }
        return LockScreenChange(knowledgeFactorRemoved: hadKnowledgeFactor && newPasscode == nil)
    }

    /// Unlocks with the passcode: every class key becomes available. Without a knowledge factor
    /// there is nothing to unlock.
    public func unlock(passcode: String) throws(DeviceError) {
        var (path, record) = try loadRecord()
        guard record.kind.hasKnowledgeFactor else { return }
        let kek = try verify(passcode, &record, at: path)
        try provisionRuntime(try unwrap(record, kek: kek))
        if cloud != nil, try maintainCloudKey(&record, passcode: passcode) {
            _ = try store(record, replacing: path)
        }
    }

    /// Locks: the `WhenUnlocked…` class keys are dropped from runtime state.
    public func lock() throws(DeviceError) {
        guard try loadRecord().record.kind.hasKnowledgeFactor else { return }
        try forgetRuntime(ProtectionClass.allCases.filter(\.isDroppedAtLock))
    }

    /// A reboot: all runtime state is forgotten; the device is `beforeFirstUnlock` again.
    public func reboot() throws(DeviceError) {
        try forgetRuntime(ProtectionClass.allCases)
    }

    // MARK: - Class keys

    /// Secrets of `paths` and the class keys available now, in one `GetSecrets` round trip.
    package struct KeyedRead: Sendable {
        package var secrets: [ItemPath: Data]
        package var classKeys: [ProtectionClass: SecureBytes]
    }

    /// Reads `paths` together with the runtime class keys (only those of `classes` when the
    /// caller knows which it needs). Paths that no longer exist are absent.
    package func read(_ paths: [ItemPath], classes: Set<ProtectionClass>? = nil) throws(DeviceError)
        -> KeyedRead
    {
        var known = runtimePaths.withLock { $0 }
        let all = known
        var extra = known.filter { classes?.contains($0.key) ?? true }.map(\.value)
        if known.isEmpty {
            extra = try call { () throws(SecretServiceError) in
                try secretService.search(Self.runtimeAttributes)
            }.unlocked
        }
        let secrets = try call { () throws(SecretServiceError) in
            try secretService.secrets(at: paths + extra)
        }
        var keys: [ProtectionClass: SecureBytes] = [:]
        known = all.filter { !extra.contains($0.value) }
        for path in extra {
            guard let bytes = secrets[path], let (protection, key) = parseRuntime(bytes) else {
                continue
            }
            keys[protection] = key
            known[protection] = path
        }
        runtimePaths.withLock { $0 = known }
        var itemSecrets = secrets
        for path in extra where !paths.contains(path) { itemSecrets[path] = nil }
        return KeyedRead(secrets: itemSecrets, classKeys: keys)
    }

    /// The key of `protection`, when the lock state allows it.
    ///
    /// - Throws: `.interactionNotAllowed` when locked or before first unlock; `.authFailed` for
    ///   `WhenPasscodeSetThisDeviceOnly` on a device without a knowledge factor.
    package func classKey(_ protection: ProtectionClass) throws(DeviceError) -> SecureBytes {
        if let key = try read([]).classKeys[protection] { return key }
        // Another process may have unlocked since the runtime paths were remembered: look again.
        runtimePaths.withLock { $0 = [:] }
        if let key = try read([]).classKeys[protection] { return key }
        let record = try loadRecord().record
        if protection.requiresPasscode && !record.kind.hasKnowledgeFactor {
            throw DeviceError(.authFailed, "this class needs a passcode to be set")
        }
        if record.kind.hasKnowledgeFactor {
            throw DeviceError(.interactionNotAllowed, "the device is locked")
        }
        // No knowledge factor: always unlocked; after a reboot the keys come back from the
        // device secret alone.
        let keys = try unwrap(record, kek: deviceKEK(record))
        try provisionRuntime(keys)
        guard let key = keys[protection] else {
            throw DeviceError(.corrupt, "no key for class \(protection.rawValue)")
        }
        return key
    }

    // MARK: - Stored state

    private func loadRecord() throws(DeviceError) -> (path: ItemPath, record: DeviceRecord) {
        for _ in 0..<3 {
            let found = try call { () throws(SecretServiceError) in
                try secretService.search(Self.stateAttributes)
            }
            if !found.locked.isEmpty {
                throw DeviceError(.interactionNotAllowed, "the Secret Service collection is locked")
            }
            if let first = found.unlocked.min() {
                // Concurrent first uses may have created several; the first created wins.
                for other in found.unlocked where other != first {
                    try? secretService.deleteItem(at: other)
                }
                if let bytes = try call({ () throws(SecretServiceError) in
                    try secretService.secrets(at: [first])
                })[first] {
                    return (first, try DeviceRecord.decode(bytes))
                }
                continue
            }
            _ = try store(DeviceRecord.fresh(), replacing: nil)
        }
        throw DeviceError(.notAvailable, "the device state could not be read")
    }

    private func store(_ record: DeviceRecord, replacing path: ItemPath?) throws(DeviceError)
        -> ItemPath
    {
        let bytes = record.encoded()
        // Same attributes, replace: the state item is updated in place.
        return try call { () throws(SecretServiceError) in
            try secretService.createItem(
                label: "Keepsake device state", attributes: Self.stateAttributes, secret: bytes,
                replacing: path != nil, in: Self.persistentCollection)
        }
    }

    /// Checks `passcode` against the verifier, honouring and updating the retry delays. Returns
    /// the key-encryption key on success.
    private func verify(_ passcode: String, _ record: inout DeviceRecord, at path: ItemPath)
        throws(DeviceError) -> SecureBytes
    {
        try waitForRetry(record)
        guard let salt = record.salt, let cost = record.cost, let verifier = record.verifier else {
            throw DeviceError(.corrupt, "no passcode verifier")
        }
        let passcodeKey = try derive(passcode, salt: salt, cost: cost)
        guard constantTimeEquals(Self.verifier(passcodeKey).unsafeData(), verifier) else {
            try recordFailure(&record, at: path)
            throw DeviceError(.authFailed, "wrong passcode")
        }
        if record.failures != 0 {
            record.failures = 0
            record.notBefore = 0
            _ = try store(record, replacing: path)
        }
        return Self.passcodeKEK(record, passcodeKey: passcodeKey)
    }

    /// Sits out the delay earned by earlier wrong passcodes (or refuses at once when it is long).
    private func waitForRetry(_ record: DeviceRecord) throws(DeviceError) {
        let now = Self.milliseconds()
        guard record.notBefore > now else { return }
        if Duration.milliseconds(record.notBefore - now) > retryPolicy.longestWait {
            throw DeviceError(
                .authFailed, "too many wrong passcodes; try again in \(record.notBefore - now) ms")
        }
        Thread.sleep(forTimeInterval: Double(record.notBefore - now) / 1000)
    }

    private func recordFailure(_ record: inout DeviceRecord, at path: ItemPath) throws(DeviceError)
    {
        record.failures += 1
        record.notBefore =
            Self.milliseconds()
            + Self.milliseconds(retryPolicy.delay(afterFailures: record.failures))
        _ = try store(record, replacing: path)
    }

    private func derive(_ passcode: String, salt: Data, cost: Argon2Cost) throws(DeviceError)
        -> SecureBytes
    {
        do {
            return try KeyDerivation.argon2id(
                passcode: SecureBytes(copying: Data(passcode.utf8)), salt: salt, cost: cost)
        } catch {
            throw DeviceError(.corrupt, "\(error)")
        }
    }

    private static func verifier(_ passcodeKey: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(key: passcodeKey, context: "keepsake.passcode.verifier.v1")
    }

    private static func passcodeKEK(_ record: DeviceRecord, passcodeKey: SecureBytes) -> SecureBytes
    {
        passcodeKey.withUnsafeBytes { bytes in
            KeyDerivation.keyedHash(
                key: SecureBytes(copying: record.deviceSecret), context: "keepsake.kek.passcode.v1",
                Data(bytes))
        }
    }

    private func deviceKEK(_ record: DeviceRecord) -> SecureBytes {
        Self.deviceKEK(SecureBytes(copying: record.deviceSecret))
    }

    static func deviceKEK(_ deviceSecret: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(key: deviceSecret, context: "keepsake.kek.device.v1")
    }

    private static func associatedData(_ protection: ProtectionClass) -> Data {
        Data("keepsake.classkey.v1\0\(protection.rawValue)".utf8)
    }

    static func wrap(_ keys: [ProtectionClass: SecureBytes], kek: SecureBytes) -> [String: Data] {
        var wrapped: [String: Data] = [:]
        for (protection, key) in keys {
            wrapped[protection.rawValue] = key.withUnsafeBytes {
                Envelope.seal($0, key: kek, associatedData: associatedData(protection))
            }
        }
        return wrapped
    }

    private func unwrap(_ record: DeviceRecord, kek: SecureBytes) throws(DeviceError)
        -> [ProtectionClass: SecureBytes]
    {
        var keys: [ProtectionClass: SecureBytes] = [:]
        for (raw, envelope) in record.wrappedKeys {
            guard let protection = ProtectionClass(rawValue: raw) else {
                throw DeviceError(.corrupt, "unknown class in device state")
            }
            do {
                keys[protection] = try Envelope.open(
                    envelope, key: kek, associatedData: Self.associatedData(protection))
            } catch {
                throw DeviceError(.corrupt, "a class key does not open: \(error)")
            }
        }
        return keys
    }

    // MARK: - Runtime state

    private func provisionRuntime(_ keys: [ProtectionClass: SecureBytes]) throws(DeviceError) {
        var known: [ProtectionClass: ItemPath] = [:]
        for (protection, key) in keys {
            var attributes = Self.runtimeAttributes
            attributes["class"] = protection.rawValue
            let secret = key.withUnsafeBytes {
                Self.runtimeMagic + Data(protection.rawValue.utf8) + [0] + Data($0)
            }
            known[protection] = try call { () throws(SecretServiceError) in
                try secretService.createItem(
                    label: "Keepsake class key", attributes: attributes, secret: secret,
                    replacing: true, in: Self.runtimeCollection)
            }
        }
        runtimePaths.withLock { $0 = known }
    }

    private func forgetRuntime(_ classes: [ProtectionClass]) throws(DeviceError) {
        runtimePaths.withLock { $0 = [:] }
        for protection in classes {
            var attributes = Self.runtimeAttributes
            attributes["class"] = protection.rawValue
            for path in try call({ () throws(SecretServiceError) in
                try secretService.search(attributes)
            }).unlocked {
                try? secretService.deleteItem(at: path)
            }
        }
    }

    private func parseRuntime(_ bytes: Data) -> (ProtectionClass, SecureBytes)? {
        guard bytes.starts(with: Self.runtimeMagic),
            let zero = bytes.dropFirst(4).firstIndex(of: 0),
            let protection = ProtectionClass(
                rawValue: String(decoding: bytes[(bytes.startIndex + 4)..<zero], as: UTF8.self)),
            bytes.endIndex - zero - 1 == Envelope.keyLength
        else { return nil }
        let keyBytes = bytes[(zero + 1)...]
        return recentKeys.withLock { recent in
            if let known = recent[protection],
                known.withUnsafeBytes({ constantTimeEquals($0, keyBytes) })
            {
                return (protection, known)
            }
            let key = SecureBytes(copying: keyBytes)
            recent[protection] = key
            return (protection, key)
        }
    }

    // MARK: - Helpers

    /// One Secret Service call, its failure in the device's terms.
    private func call<R>(_ body: () throws(SecretServiceError) -> R) throws(DeviceError) -> R {
        do { return try body() } catch {
            if error.code == .locked || error.code == .promptRequired {
                throw DeviceError(.interactionNotAllowed, "\(error)", underlying: error)
            }
            throw DeviceError(.notAvailable, "\(error)", underlying: error)
        }
    }

    static func milliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

/// The device's persistent state, stored as one Secret Service item.
struct DeviceRecord: Codable, Sendable {
    var version = 1
    var deviceSecret: Data
    var kind: LockScreenKind
    var salt: Data?
    var cost: Argon2Cost?
    var verifier: Data?
    var wrappedKeys: [String: Data]
    /// The cloud account's key, sealed under the AfterFirstUnlock class key.
    var wrappedCloudKey: Data?
    var failures: Int
    var notBefore: Int64

    /// A new device: no lock screen, a random device secret, a random key per class (none for
    /// `WhenPasscodeSetThisDeviceOnly`, which needs a passcode).
    static func fresh() -> DeviceRecord {
        let secret = SecureBytes(randomCount: 32)
        var record = DeviceRecord(
            deviceSecret: secret.unsafeData(), kind: .none, wrappedKeys: [:], failures: 0,
            notBefore: 0)
        var keys: [ProtectionClass: SecureBytes] = [:]
        for protection in ProtectionClass.allCases where !protection.requiresPasscode {
            keys[protection] = SecureBytes(randomCount: Envelope.keyLength)
        }
        record.wrappedKeys = Device.wrap(keys, kek: Device.deviceKEK(secret))
        return record
    }

    func encoded() -> Data { Data("KDS1".utf8) + (try! JSONEncoder().encode(self)) }

    static func decode(_ bytes: Data) throws(DeviceError) -> DeviceRecord {
        guard bytes.starts(with: Data("KDS1".utf8)),
            let record = try? JSONDecoder().decode(DeviceRecord.self, from: bytes.dropFirst(4)),
            record.version == 1, record.deviceSecret.count == 32
        else { throw DeviceError(.corrupt, "the device state does not decode") }
        return record
    }
}
