import Device
import Foundation
import Sealing
import SecretService

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
        self.init(
            Device(
                secretService: secretService, directory: directory, tpm: tpm, counter: counter,
                tuning: tuning),
            cloud: cloud, escrow: escrow)
    }
}

// MARK: - Unlocking and the lock screen, through the account

extension CloudAccount {
    /// What an unlock did and has to tell the owner.
    public struct UnlockReport: Sendable {
        /// Wrong passcodes since the last unlock (`Device.UnlockReport`): tell the owner.
        public var wrongPasscodes: WrongPasscodes?
        /// Wrong passcode claims at the account's escrow by devices trying to join
        /// (`escrowWrongClaims`): tell the owner.
        public var escrowWrongClaims: WrongPasscodes?
        /// The account's recovery key when this unlock created the account: show it once.
        public var recoveryKey: SecureBytes?
        /// Why the account could not be kept up to date (the device unlocked all the same; it is
        /// tried again at the next unlock); nil when it could or had nothing to do.
        public var problem: String?
    }

    /// What changing the lock screen did.
    public struct LockScreenChange: Sendable {
        /// The knowledge factor was removed (`Device.LockScreenChange`): the account's key went
        /// with it, and `WhenPasscodeSetThisDeviceOnly` items are to be deleted.
        public var knowledgeFactorRemoved: Bool
        /// Wrong passcodes since the owner was last told, reported by the proof of the current
        /// passcode (`Device.LockScreenChange`): tell the owner.
        public var wrongPasscodes: WrongPasscodes?
        /// This change created the account: its recovery key, to show the user once.
        public var recoveryKey: SecureBytes?
        /// Signed in, but the account could not be made, joined or kept up to date (the server
        /// unreachable, or refusing what it needs): why. The lock screen is changed all the same;
        /// the account is tried again at the next unlock.
        public var problem: String?
    }

    /// Unlocks the device (`Device.unlock(passcode:)`), then keeps the account up to date with
    /// the passcode at hand. Returns the recovery key when this unlock created the account
    /// (signed in since the lock screen was set), to show the user once.
    @discardableResult
    public func unlock(passcode: SecureBytes) throws(DeviceError) -> SecureBytes? {
        try unlockReporting(passcode: passcode).recoveryKey
    }

    /// `unlock`, with what the owner is to be told.
    public func unlockReporting(passcode: SecureBytes) throws(DeviceError) -> UnlockReport {
        let unlocked = try device.unlockReporting(passcode: passcode)
        guard let record = unlocked.account else {
            return UnlockReport(wrongPasscodes: unlocked.wrongPasscodes)
        }
        let upkeep = keepUp(after: record, passcode: passcode)
        return UnlockReport(
            wrongPasscodes: unlocked.wrongPasscodes, escrowWrongClaims: escrowWrongClaims(),
            recoveryKey: upkeep.recoveryKey, problem: upkeep.problem)
    }

    /// Sets, changes or removes the device's lock screen (`Device.setLockScreen`), then keeps
    /// the account up to date with the new passcode: a first passcode makes or joins the
    /// account's key, a new one rotates it. What goes wrong at the account does not undo the
    /// change.
    @discardableResult
    public func setLockScreen(
        _ kind: LockScreenKind, passcode: SecureBytes?, currentPasscode: SecureBytes?
    ) throws(DeviceError) -> LockScreenChange {
        let changed = try device.setLockScreen(
            kind, passcode: passcode, currentPasscode: currentPasscode)
        var change = LockScreenChange(
            knowledgeFactorRemoved: changed.knowledgeFactorRemoved,
            wrongPasscodes: changed.wrongPasscodes)
        if let passcode, kind.hasKnowledgeFactor {
            let upkeep = keepUp(after: changed.account, passcode: passcode)
            (change.recoveryKey, change.problem) = (upkeep.recoveryKey, upkeep.problem)
        }
        return change
    }

    /// After a passcode was set (a first one, or one replacing another) or the device unlocked
    /// with it (`record`: the device record as that change or unlock stored it), after
    /// the device's lock was released (a slow or hostile cloud never holds up another
    /// process's unlock): the account makes, joins, re-registers or rotates its key. Returns the
    /// recovery key it made, if it made the account (even when something failed after), and what
    /// stopped it, for the caller to say.
    private func keepUp(after record: HeldAccountState, passcode: SecureBytes)
        -> (recoveryKey: SecureBytes?, problem: String?)
    {
        guard cloud != nil else { return (nil, nil) }
        var kept = record
        let upkeep: (changed: Bool, recoveryKey: SecureBytes?)
        do {
            upkeep = try keys.maintainCloudKey(
                &kept, passcode: passcode)
        } catch {
            // What was done before the failure (an escrow registered under a new passcode while
            // the rotation could not go through) is kept; nothing else of a failed upkeep is.
            if kept.account.escrowGeneration != record.account.escrowGeneration {
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
