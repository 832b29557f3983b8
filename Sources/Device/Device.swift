import Foundation
import Platform
import Sealing
import SecretService
import Synchronization

/// The device the apps run on: its places and settings, its lock screen and the data-protection
/// class keys. It knows nothing of a cloud account: the `CloudAccount` module's `CloudAccount` is
/// built from a device, and acts on what the device's unlocks and lock-screen changes return.
///
/// Each concern lives in a file of its own:
/// - the record and its storage in the Secret Service: `DeviceRecord.swift`;
/// - the lock screen and lock states: `Device+LockScreen.swift`; proving the passcode and sealing
///   the class keys in the record: `Device+Passcode.swift`;
/// - the class keys: `Device+ClassKeys.swift`; runtime state, the unwrapped class keys in the
///   kernel keyring: `RuntimeKeys.swift`.
///
/// The passcode itself — its kinds, the key derivations and where its guesses are counted — is in
/// `Passcode/`: rules that hold no storage of their own (the record keeps what they return).
///
/// Thread-safe; several processes may share one device.
public final class Device: Sendable {
    package let secretService: SecretServiceConnection
    /// The device directory (owned by the "OS", outside every app): settings and the stores'
    /// per-app data that survives uninstall.
    public let directory: URL
    /// The real device's cost and delays; only the test support target passes others.
    package let tuning: DeviceTuning
    /// The TPM that holds the device's direct TPM slot (a passcode slot held by the TPM itself),
    /// when it has one (`TPMConfiguration`); new slots go to `counter` or the software path.
    package let tpm: TPMConfiguration?
    /// The guess counter that holds this device's passcode slot, when the device uses one: a
    /// `keepsake-escrow` service that owns its state (run as a user of its own), so no process of
    /// the device's user can reset, skip or rewrite its count.
    package let counter: EscrowConfiguration?

    package let records: DeviceRecordStore
    let runtimeCache = Mutex<RuntimeKeys?>(nil)
    private let dataKeyCache = Mutex<[String: SecureBytes]>([:])

    /// A device at the real cost and delays (Argon2id `moderate`, delays from one second) on the
    /// software guess limit; a direct TPM slot on the machine's TPM (`/dev/tpmrm0`; records may
    /// hold one, new lock screens never make one) unlocks. `CloudAccount` (its own module) signs
    /// a device in.
    public convenience init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil
    ) {
        self.init(
            secretService: secretService, directory: directory, tpm: TPMConfiguration.machine,
            tuning: .real)
    }

    /// A device with the guess counter that holds its passcode slot (`counter`, a
    /// `keepsake-escrow` service of its own user, which counts every guess where no process of
    /// the device's user reaches it) or none (the software guess limit, delays only). `tpm` (a
    /// TCTI such as `device:/dev/tpmrm0`) names the TPM of a direct TPM slot (a passcode slot held
    /// by the TPM itself); without `counter`, a new lock screen on a device that names one is
    /// refused, since a TPM that the user's processes reach cannot count their guesses
    /// (`TPMConfiguration`).
    public convenience init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil, tpm: String?,
        counter: EscrowConfiguration? = nil
    ) {
        self.init(
            secretService: secretService, directory: directory,
            tpm: tpm.map(TPMConfiguration.init(tcti:)), counter: counter, tuning: .real)
    }

    /// A device at another cost and delays: for the test support target and the development
    /// tool only (`package`), never reachable from an app or the shipped command line.
    package init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil,
        tpm: TPMConfiguration? = nil, counter: EscrowConfiguration? = nil, tuning: DeviceTuning
    ) {
        self.counter = counter
        self.secretService = secretService
        self.directory = directory ?? Self.defaultDirectory
        self.tuning = tuning
        self.tpm = tpm
        records = DeviceRecordStore(secretService: secretService, directory: self.directory)
    }

    package var passcodeCost: Argon2Cost { tuning.passcodeCost }
    package var retryPolicy: RetryPolicy { tuning.retryPolicy }

    /// `$XDG_DATA_HOME/keepsake/device` (`~/.local/share/keepsake/device`).
    public static var defaultDirectory: URL { UserDirectories.device }

    /// The device's stable public identifier (also the writer of its synced changes,
    /// `SyncVersion.writer`): the one noted in the device directory, else the record's.
    package func deviceID() throws(DeviceError) -> String {
        if let noted = records.notedDeviceID { return noted }
        return try records.load().record.deviceID
    }

    /// This device's runtime state (its keyring in the kernel), found through the record's
    /// device id once per process.
    /// Forgets the runtime state of the device whose record `secretService` holds, if it holds
    /// one (never making one): for the test harness, whose throwaway devices would otherwise
    /// leave keyrings in the user keyring, each making every later key lookup slower.
    package static func forgetRuntimeState(on secretService: SecretServiceConnection) {
        guard let found = try? secretService.search(DeviceRecordStore.attributes).unlocked,
            let path = found.min(), let bytes = try? secretService.secrets(at: [path])[path],
            let record = try? DeviceRecord.decode(bytes)
        else { return }
        RuntimeKeys(deviceID: record.deviceID).forgetAll()
    }

    /// This device's runtime state, found through the device id once per process: from
    /// `record` when the caller holds the record already (it is not read again), else from the
    /// record as stored.
    package func runtime(_ record: DeviceRecord? = nil) throws(DeviceError) -> RuntimeKeys {
        if let known = runtimeCache.withLock({ $0 }) { return known }
        let record = if let record { record } else { try records.load().record }
        let keys = RuntimeKeys(
            deviceID: record.deviceID,
            checks: record.keyChecks.map { stored in
                stored.reduce(into: [:]) { checks, entry in
                    if let protection = ProtectionClass(rawValue: entry.key) {
                        checks[protection] = entry.value
                    }
                }
            },
            deviceSecret: SecureBytes(copying: record.deviceSecret))
        runtimeCache.withLock { $0 = keys }
        return keys
    }

    // MARK: - Settings, apps and per-app device data

    private var settingsFile: URL { directory.appendingPathComponent("settings.json") }

    /// The device settings, read from `settings.json` in the device directory; the defaults when
    /// none were saved.
    public func settings() throws(DeviceError) -> DeviceSettings {
        try DeviceError.checkOwnedByUser([directory, settingsFile])
        do {
            guard let bytes = try Files.read(settingsFile) else {
                return DeviceSettings()
            }
            return try JSONDecoder().decode(DeviceSettings.self, from: bytes)
        } catch {
            throw DeviceError(.corrupt, "device settings: \(error)", underlying: error)
        }
    }

    /// Reads the device settings, applies `change` to them and writes the result back atomically.
    public func updateSettings(_ change: (inout DeviceSettings) -> Void) throws(DeviceError) {
        var current = try settings()
        change(&current)
        do {
            try Files.writeAtomically(try JSONEncoder().encode(current), to: settingsFile)
        } catch {
            throw DeviceError(.notAvailable, "device settings: \(error)", underlying: error)
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
            throw DeviceError(.notAvailable, "uninstall: \(error)", underlying: error)
        }
    }

    /// A store's key for its data in the device directory, named by the store: derived
    /// from the device secret held in the Secret Service, available in every lock state, and
    /// remembered for the process's life once derived (the device secret never changes).
    package func dataKey(_ store: String) throws(DeviceError) -> SecureBytes {
        if let known = dataKeyCache.withLock({ $0[store] }) { return known }
        let key = KeyDerivation.keyedHash(
            key: SecureBytes(copying: try records.load().record.deviceSecret),
            context: "keepsake.\(store).v1")
        dataKeyCache.withLock { $0[store] = key }
        return key
    }

    /// End-to-end encryption is available only with a knowledge factor.
    public func isEndToEndEncryptionAvailable() throws(DeviceError) -> Bool {
        try lockScreenKind().hasKnowledgeFactor
    }
}
