import Device
import Foundation
import Sealing
import SecretService
import Synchronization

/// A device's sign-in to a cloud account: the storage, the account's escrow service, and what
/// went wrong at the last unlock. The device holds it as the account it is signed in to
/// (`SignedInAccount`) and tells it of each new passcode and unlock; everything the account does
/// then (make, join, re-register, rotate its key) is this module's.
final class CloudSignIn: SignedInAccount {
    let storage: any CloudStorage
    /// The cloud account's escrow service, when the account uses one: it holds the account key
    /// for joining with a passcode, and counts the claims.
    let escrow: EscrowConfiguration?
    private let problem = Mutex<String?>(nil)

    init(storage: any CloudStorage, escrow: EscrowConfiguration?) {
        self.storage = storage
        self.escrow = escrow
    }

    var lastProblem: String? {
        get { problem.withLock { $0 } }
        set { problem.withLock { $0 = newValue } }
    }

    func passcodeDidUnlock(
        _ device: Device, record: DeviceRecord, passcode: SecureBytes, passcodeChanged: Bool
    ) -> (recoveryKey: SecureBytes?, problem: String?) {
        var kept = record
        let keys = CloudAccount(device).keys
        let upkeep: (changed: Bool, recoveryKey: SecureBytes?)
        do {
            upkeep = try keys.maintainCloudKey(
                &kept, passcode: passcode, passcodeChanged: passcodeChanged)
        } catch {
            // What was done before the failure (an escrow registered under a new passcode while
            // the rotation could not go through) is kept.
            if kept.escrowGeneration != record.escrowGeneration {
                try? keys.storeAfterCloud(kept, read: record)
            }
            return (nil, error.message)
        }
        // The account exists once a recovery key is made: the key is shown even when the
        // record's write fails (the next unlock stores the account key again).
        do {
            if upkeep.changed { try keys.storeAfterCloud(kept, read: record) }
        } catch {
            return (upkeep.recoveryKey, error.message)
        }
        return (upkeep.recoveryKey, nil)
    }
}

extension CloudAccount {
    /// A device at the real cost and delays, signed in to `cloud` (nil: signed out); see
    /// `Device(secretService:directory:)`.
    public init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil,
        cloud: (any CloudStorage)?
    ) {
        self.init(
            secretService: secretService, directory: directory, cloud: cloud,
            tpm: TPMConfiguration.machine, tuning: .real)
    }

    /// A device signed in to `cloud` (nil: signed out) whose account joins with a passcode
    /// through `escrow`, with the guess counter that holds its passcode slot; see
    /// `Device(secretService:directory:tpm:counter:)`.
    public init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil,
        cloud: (any CloudStorage)?, tpm: String?, escrow: EscrowConfiguration? = nil,
        counter: EscrowConfiguration? = nil
    ) {
        self.init(
            secretService: secretService, directory: directory, cloud: cloud,
            tpm: tpm.map(TPMConfiguration.init(tcti:)), escrow: escrow, counter: counter,
            tuning: .real)
    }

    /// A device signed in to `cloud` at another cost and delays: for the test support target and
    /// the development tool only.
    package init(
        secretService: SecretServiceConnection = .shared(), directory: URL? = nil,
        cloud: (any CloudStorage)?, tpm: TPMConfiguration? = nil,
        escrow: EscrowConfiguration? = nil, counter: EscrowConfiguration? = nil,
        tuning: DeviceTuning
    ) {
        let device = Device(
            secretService: secretService, directory: directory, tpm: tpm, counter: counter,
            tuning: tuning, account: cloud.map { CloudSignIn(storage: $0, escrow: escrow) })
        // A lock left on the server by a process of this device that died is released by the
        // next one, not waited out (WebDAV locks last two minutes).
        (cloud?.underlying as? WebDAVCloud)?.keepLockTokens(
            in: device.directory.appendingPathComponent("cloud-locks"))
        self.init(device)
    }
}
