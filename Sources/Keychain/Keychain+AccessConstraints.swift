import CloudAccount
import Device
import Foundation
import Platform
import Sealing
import SecretService
import Synchronization

/// Items with access constraints (`kSecAttrAccessControl`): sealed to the device's presence key,
/// opened with the passcode or the caller's credentials at each use; and what goes with the
/// passcode.
extension Keychain {
    // MARK: - Access constraints

    /// `data` as a record of an item with `constraints` holds it: itself when there are none,
    /// else sealed for them (`ProtectedData`).
    func protect(
        _ data: Data, _ constraints: AccessConstraints, _ authentication: ItemAuthentication
    ) throws(KeychainError) -> Data {
        guard !constraints.uses.isEmpty else { return data }
        var credentials = ProtectedData.Credentials(
            applicationPassword: authentication.applicationPassword)
        if constraints.needsPasscode {
            do { credentials.presencePublicKey = try device.presencePublicKey() } catch {
                throw KeychainError(error)
            }
        }
        return try ProtectedData.seal(
            data, constraints: constraints, credentials: credentials, cost: device.passcodeCost)
    }

    /// Now, at the millisecond precision items are stored with, and after every time this
    /// process gave before: two adds within one millisecond keep their order (creation order is
    /// the creation date, then a random id), on a provider fast enough to answer within one.
    static func now() -> Date {
        if let pinned = SyncClock.pinned {
            return Date(timeIntervalSince1970: Double(pinned) / 1000)
        }
        let milliseconds = (Date().timeIntervalSince1970 * 1000).rounded(.down)
        let stamp = lastStamp.withLock { last in
            last = max(milliseconds, last + 1)
            return last
        }
        return Date(timeIntervalSince1970: stamp / 1000)
    }

    private static let lastStamp = Mutex<Double>(0)

    static let duplicate = KeychainError(
        KeychainStatus.duplicateItem, "an item with this primary key already exists")
    static let notFound = KeychainError(KeychainStatus.itemNotFound, "no item matches the query")
    static let locked = KeychainError(
        KeychainStatus.interactionNotAllowed, SecretServiceError.lockedCollection)
}

extension Keychain {
    /// Deletes every `WhenPasscodeSetThisDeviceOnly` item of every app on the device, as Apple
    /// does when the passcode is removed. (Their class key is already destroyed by then.)
    public static func deleteItemsRequiringPasscode(on device: Device) throws(KeychainError) {
        do {
            for itemClass in ItemClass.allCases {
                let attributes = SecretServiceSchema.attributes(
                    itemClass: itemClass, accessGroup: nil, service: nil, account: nil,
                    synchronizable: nil, accessible: .whenPasscodeSetThisDeviceOnly)
                for path in try device.secretService.search(attributes).unlocked {
                    try device.secretService.deleteItem(at: path)
                }
            }
        } catch {
            throw KeychainError(error)
        }
    }

    #if KEEPSAKE_TEST_HOOKS
        /// Test hook (debug builds only): makes the hot-read cache point `query` at `path`, as a
        /// stale or reused path would, so tests can show such a path never yields another item's
        /// secret.
        func rememberPath(_ path: ItemPath, for query: GenericPasswordQuery) {
            pathCache.withLock { $0[query] = (path, .whenUnlocked) }
        }
    #endif
}

extension SecretServiceConnection {
    /// Rewrites the item at `path` from `old` to `new` in place, its index unchanged: the sealed
    /// secret (Item.SetSecret), and the label when it changed. No provider answers this with a
    /// prompt; CreateItem with replace makes KeePassXC 2.7.4 ask the user.
    func rewrite(at path: ItemPath, from old: StoredRecord, to new: StoredRecord, secret: Data)
        throws(SecretServiceError)
    {
        precondition(old.secretServiceAttributes == new.secretServiceAttributes)
        try replaceItem(
            at: path, secret: secret, label: new.secretServiceLabel,
            attributes: new.secretServiceLabel != old.secretServiceLabel
                ? new.secretServiceAttributes : nil)
    }
}

/// Turns records into items for one call: opens protected secrets with the call's
/// credentials, proving the passcode at most once.
struct ItemOpener {
    let keychain: Keychain
    let authentication: ItemAuthentication
    var presence: (publicKey: Data, secretKey: SecureBytes)?

    init(keychain: Keychain, authentication: ItemAuthentication) {
        self.keychain = keychain
        self.authentication = authentication
    }

    /// The item, its secret opened when asked for; nil when it needs a credential not given
    /// and the caller said to skip such items.
    mutating func item(_ record: StoredRecord, returnData: Bool) throws(KeychainError)
        -> GenericPasswordItem?
    {
        var data: Data?
        if returnData {
            do {
                // Opened even without data: its access constraints are checked all the same.
                let opened = try open(record)
                data = record.dataAbsent ? nil : opened
            } catch {
                if error.status == KeychainStatus.interactionNotAllowed,
                    authentication.skipItemsNeedingAuthentication
                {
                    return nil
                }
                throw error
            }
        }
        return GenericPasswordItem(
            attributes: record.attributes, data: data, persistentID: record.id)
    }

    /// The record's secret in clear.
    mutating func open(_ record: StoredRecord) throws(KeychainError) -> Data {
        let constraints = record.attributes.accessControl
        guard !constraints.uses.isEmpty else { return record.data }
        let needsPasscode = constraints.needsPasscode
        let needsPassword = constraints.needsApplicationPassword
        let given =
            (needsPasscode && authentication.passcode != nil)
            || (needsPassword && authentication.applicationPassword != nil)
        let enough =
            constraints.contains(.or)
            ? given
            : (!needsPasscode || authentication.passcode != nil)
                && (!needsPassword || authentication.applicationPassword != nil)
        if !enough && (needsPasscode || needsPassword) {
            throw KeychainError(
                KeychainStatus.interactionNotAllowed,
                "this item needs \(needsPasscode ? "the device passcode" : "the app's password") at each use (LAContext), and no one can be asked"
            )
        }
        var credentials = ProtectedData.Credentials(
            applicationPassword: authentication.applicationPassword)
        if needsPasscode, let passcode = authentication.passcode {
            if presence == nil {
                let device = keychain.device
                do {
                    let publicKey = try device.presencePublicKey()
                    let proved = try device.presenceSecretKey(passcode: passcode)
                    presence = (publicKey, proved.key)
                    if let wrong = proved.wrongPasscodes {
                        authentication.reportWrongPasscodes?(wrong)
                    }
                } catch { throw KeychainError(error) }
            }
            credentials.presencePublicKey = presence?.publicKey
            credentials.presenceSecretKey = presence?.secretKey
        }
        return try ProtectedData.open(
            record.data, constraints: constraints, credentials: credentials)
    }
}
