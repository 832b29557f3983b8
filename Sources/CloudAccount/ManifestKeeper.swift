import Device
import Foundation
import Sealing

/// The account's manifest as this device reads it: checked against the highest version it saw
/// (noted in its directory, so an older copy is refused as a rollback), and this device entered
/// in its devices with the public key rotations seal the account's new key to.
struct ManifestKeeper {
    /// The account whose manifest this is.
    let account: CloudAccount

    /// The highest manifest version this device has seen, in its directory.
    var seen: SeenManifest {
        SeenManifest(file: account.device.directory.appendingPathComponent("account-manifest-seen"))
    }

    /// The account's manifest, checked against the highest version this device saw (which it
    /// then remembers); a first, empty one (to be written) when the account has none yet and
    /// this device never saw one.
    func read(key: SecureBytes, epoch: Int, cloud: any CloudStorage, seen: SeenManifest)
        throws(DeviceError) -> (
            manifest: AccountManifest, dirty: Bool, version: CloudObjectVersion?
        )
    {
        let owner = SeenManifest.account(key)
        let highest = seen.read(account: owner)
        guard let found = try cloud.checked.readVersioned(AccountManifest.name) else {
            if let highest {
                throw DeviceError(
                    .corrupt,
                    "the cloud account's manifest is gone (this device saw version \(highest.version)): deleted by the cloud"
                )
            }
            return (
                AccountManifest(
                    version: 0, epoch: epoch, objects: [:], devices: [:],
                    layout: AccountManifest.layout), true, nil
            )
        }
        let manifest = try AccountManifest.open(found.data, under: key)
        _ = try seen.refuseOlder(manifest, account: owner)
        if highest.map({ $0.epoch != manifest.epoch || $0.version != manifest.version }) ?? true {
            try seen.write(account: owner, epoch: manifest.epoch, version: manifest.version)
        }
        return (manifest, false, found.version)
    }

    /// Lists this device in the manifest's devices (under the account's lock), when it is not.
    func enter(_ deviceRecord: HeldAccountState, key: SecureBytes) throws(DeviceError) {
        guard let cloud = account.cloud, let accountRecord = try account.keys.readAccount() else {
            return
        }
        let lock = try cloud.checked.lock()
        defer { withExtendedLifetime(lock) {} }
        var (manifest, _, version) = try read(
            key: key, epoch: accountRecord.epoch ?? 0, cloud: cloud, seen: seen)
        let publicKey = Self.boxKeyPair(deviceRecord).publicKey
        guard manifest.devices[deviceRecord.deviceID] != publicKey else { return }
        manifest.devices[deviceRecord.deviceID] = publicKey
        manifest.version += 1
        let swapped = try cloud.checked.write(
            AccountManifest.name, manifest.sealed(under: key), ifVersion: version)
        // Another writer got there first: this device is entered at its next sync.
        guard swapped else { return }
        try seen.write(
            account: SeenManifest.account(key),
            epoch: manifest.epoch, version: manifest.version)
    }

    /// This device's id and the public half of its X25519 key pair (derived from the device
    /// secret): rotations seal the account's new key to it. From `read` when the caller read the
    /// device's state already.
    func deviceBoxPublicKey(_ read: HeldAccountState? = nil) throws(DeviceError) -> (
        id: String, publicKey: Data
    ) {
        let record = if let read { read } else { try account.device.accountState() }
        return (record.deviceID, Self.boxKeyPair(record).publicKey)
    }

    static func boxKeyPair(_ record: HeldAccountState) -> (publicKey: Data, secretKey: SecureBytes)
    {
        SealedBox.keyPair(seed: record.keyedHash(context: "keepsake.device.box.v1"))
    }
}

extension CloudAccount {
    /// The account's manifest as this device reads it.
    var manifests: ManifestKeeper { ManifestKeeper(account: self) }
}
