import Device
import Foundation
import Platform
import Sealing

/// Where one store's data stands between this device and the cloud account (`keepsake status`):
/// what is here, what the cloud holds as the account's manifest vouches for it, what has not gone
/// up yet, and — when nothing goes up — why. Never "backed up" while sync is off.
public struct StoreStatus: Sendable, Equatable {
    /// How many items of the store this device holds (its local copy).
    public var local: Int
    /// How many objects of the store the cloud account holds, as its manifest lists and vouches
    /// for them; nil when the cloud was not read (signed out, not joined, unreachable, or its
    /// copy refused: `CloudAccountStatus.problem`).
    public var cloud: Int?
    /// Local changes the cloud copy does not have yet; nil when they cannot be told now (the
    /// device locked, the cloud not read).
    public var pending: Int?
    /// When a sync of this store last reached the cloud account from this device.
    public var lastSync: Date?
    /// Why nothing of this store goes to the cloud now; nil when it does.
    public var notSyncing: String?

    /// A store's status with each field as given.
    public init(
        local: Int, cloud: Int?, pending: Int?, lastSync: Date?, notSyncing: String?
    ) {
        self.local = local
        self.cloud = cloud
        self.pending = pending
        self.lastSync = lastSync
        self.notSyncing = notSyncing
    }
}

/// The cloud account as this device sees it now.
public struct CloudAccountStatus: Sendable, Equatable {
    /// Signed in to a cloud account (`--cloud`).
    public var signedIn: Bool
    /// An end-to-end-encryption-capable lock screen is set: the condition for anything to go up.
    public var endToEndEncryption: Bool
    /// This device holds the account's current key (made the account, or joined it).
    public var joined: Bool
    /// The account manifest's version, once read and checked against the highest this device saw.
    public var manifestVersion: UInt64?
    /// Why the cloud's copy could not be read or was refused (unreachable, rolled back, planted
    /// objects); nil when it was read and verified, or not asked for.
    public var problem: String?
    /// Why nothing goes to the cloud now; nil when copies do go up.
    public var notSyncing: String?
}

/// The cloud account's verified listing, shared by every store's status (one read of the
/// manifest for all of them).
package struct CloudListing {
    package var status: CloudAccountStatus
    /// The store objects the verified manifest lists; nil when it was not read.
    package var names: Set<String>?
    /// The account key the names derive from; nil when not held.
    package var key: SecureBytes?

    /// The count of `names` a store owns.
    package func count(_ owns: (String) -> Bool) -> Int? { names.map { $0.filter(owns).count } }
}

extension CloudAccount {
    /// Reads the cloud account once for a status: signed in, E2EE, joined, and the manifest's
    /// listing, checked against the highest version this device saw. Reads only: no lock taken,
    /// no rotation followed, nothing written on either side. Never throws: what went wrong is
    /// `problem`.
    package func cloudListing() -> CloudListing {
        var status = CloudAccountStatus(
            signedIn: cloud != nil,
            endToEndEncryption: (try? device.isEndToEndEncryptionAvailable()) ?? false,
            joined: false)
        guard let cloud else {
            status.notSyncing = "signed out"
            return CloudListing(status: status)
        }
        do throws(any Error) {
            guard let (key, record) = try self.keys.heldCloudKey(forUpload: false) else {
                status.notSyncing = try self.keys.whyNoCloudSession()
                return CloudListing(status: status)
            }
            guard let account = try self.keys.readAccount() else {
                status.notSyncing =
                    "the cloud account has no account record (never made there, or deleted)"
                return CloudListing(status: status)
            }
            guard constantTimeEquals(account.check, AccountRecord.check(key)) else {
                let next = AccountObjects.rekey(
                    record.deviceID, epoch: (record.account.cloudEpoch ?? 0) + 1)
                status.notSyncing =
                    try cloud.checked.read(next) != nil
                    ? "the account key was rotated on another device since this one last synced: its next sync follows it"
                    : try self.keys.whyNoCloudSession()
                return CloudListing(status: status)
            }
            status.joined = true
            if !status.endToEndEncryption { status.notSyncing = try self.keys.whyNoCloudSession() }
            guard let found = try cloud.checked.read(AccountManifest.name) else {
                status.problem = "the cloud account has no manifest: nothing in it is vouched for"
                return CloudListing(status: status, names: [], key: key)
            }
            let manifest = try AccountManifest.open(found, under: key)
            _ = try manifests.seen.refuseOlder(manifest, account: SeenManifest.account(key))
            status.manifestVersion = manifest.version
            let listed = Set(try cloud.checked.list())
            let present = manifest.names.filter {
                manifest.storedName(of: $0).map(listed.contains) ?? false
            }
            let missing = manifest.names.count - present.count
            if missing > 0 {
                status.problem =
                    "\(missing) objects the account manifest lists are gone from the cloud (deleted behind it)"
            }
            return CloudListing(status: status, names: present, key: key)
        } catch {
            status.problem = (error as? DeviceError)?.message ?? "\(error)"
            status.notSyncing = status.notSyncing ?? "the cloud account could not be read"
            return CloudListing(status: status)
        }
    }

    /// When each store last reached the account from this device.
    package var syncTimes: SyncTimes {
        SyncTimes(file: device.directory.appendingPathComponent("cloud-synced"))
    }
}

/// When each store's sync last reached the cloud account from this device (`StoreStatus`'s
/// `lastSync`), kept in the device directory's `cloud-synced`.
package struct SyncTimes {
    /// The file that keeps them.
    let file: URL

    /// Notes that a sync of `store` reached the cloud account now (`last(of:)`).
    package func note(_ store: String) {
        var times = read()
        times[store] = Int64(Date().timeIntervalSince1970 * 1000)
        guard let data = try? JSONSerialization.data(withJSONObject: times, options: .sortedKeys)
        else { return }
        try? Files.writeAtomically(data, to: file)
    }

    /// When a sync of `store` last reached the cloud account from this device.
    package func last(of store: String) -> Date? {
        read()[store].map { Date(timeIntervalSince1970: TimeInterval($0) / 1000) }
    }

    private func read() -> [String: Int64] {
        guard let bytes = (try? Files.read(file, limit: 64 * 1024)) ?? nil,
            let object = try? JSONSerialization.jsonObject(with: bytes) as? [String: Any]
        else { return [:] }
        return object.compactMapValues { ($0 as? NSNumber)?.int64Value }
    }
}
