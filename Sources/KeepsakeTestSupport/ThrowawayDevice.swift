import CloudAccount
import Device
import Foundation

extension PrivateSecretService {
    /// The test device: the one way tests make a `Device`. It lives on this Secret Service, in
    /// the directory `name` under the service's throwaway root (or `directory`; never the user's
    /// `$XDG_DATA_HOME`; during the suite-wide sweep kept for it, since everything Keepsake writes
    /// there is sealed), on `tpm`, its passcode guesses counted by `counter`, its calls bounded by
    /// `timeout`, and tuned by `tuning` (the cheapest Argon2id cost, short delays sat out on a
    /// clock of its own: `DeviceTuning.fast`). Its runtime keys (kernel state that outlives a
    /// test) go when the service stops, unless it stops keeping them: a reboot.
    /// The same name gives the same directory.
    package func device(
        _ name: String = "device", directory: URL? = nil, tpm: TPMConfiguration? = nil,
        counter: EscrowConfiguration? = nil, timeout: Duration = .seconds(5), tuning: DeviceTuning
    ) -> Device {
        let device = Device(
            secretService: connection(timeout: timeout),
            directory: directory ?? deviceDirectory(name), tpm: tpm, counter: counter,
            tuning: tuning)
        rebootAtStop(device)
        return device
    }

    /// A test device (`device(_:directory:…)`) signed in to `cloud` with the account's `escrow`:
    /// the one way tests make a `CloudAccount`.
    package func account(
        _ name: String = "device", directory: URL? = nil, cloud: (any CloudStorage)?,
        tpm: TPMConfiguration? = nil, escrow: EscrowConfiguration? = nil,
        counter: EscrowConfiguration? = nil, timeout: Duration = .seconds(5), tuning: DeviceTuning
    ) -> CloudAccount {
        CloudAccount(
            device(
                name, directory: directory, tpm: tpm, counter: counter, timeout: timeout,
                tuning: tuning),
            cloud: cloud, escrow: escrow)
    }

    /// `device(_:directory:…)` for the common cases: `retryPolicy`'s delays sat out on `clock`
    /// (a `ManualClock` of its own unless given: they advance it instead of sleeping), a private
    /// TPM's direct slots, a private guess counter service.
    package func device(
        _ name: String = "device", timeout: Duration = .seconds(5),
        retryPolicy: RetryPolicy = RetryPolicy(), tpm: PrivateTPM? = nil,
        counter: PrivateEscrow? = nil, clock: ManualClock = ManualClock()
    ) -> Device {
        device(
            name, tpm: tpm?.directSlots, counter: counter?.configuration, timeout: timeout,
            tuning: DeviceTuning(
                passcodeCost: .minimum, retryPolicy: retryPolicy, clock: clock.guessClock))
    }

    /// `account(_:directory:cloud:…)` for the common cases: signed in to the account at `cloud`
    /// (a directory, with its private escrow when it has one; nil: signed out), the rest as
    /// `device(_:timeout:…)`.
    package func account(
        _ name: String = "device", cloud: URL?, timeout: Duration = .seconds(5),
        retryPolicy: RetryPolicy = RetryPolicy(), tpm: PrivateTPM? = nil,
        counter: PrivateEscrow? = nil, clock: ManualClock = ManualClock()
    ) -> CloudAccount {
        CloudAccount(
            device(
                name, timeout: timeout, retryPolicy: retryPolicy, tpm: tpm, counter: counter,
                clock: clock),
            cloud: cloud.map(CloudDirectory.init),
            escrow: cloud.flatMap { try? PrivateEscrow.of($0).configuration })
    }

    /// Where `device(name)` keeps its files.
    package func deviceDirectory(_ name: String = "device") -> URL {
        guard let kept = SuiteSweep.atRestRoot else { return root.appendingPathComponent(name) }
        return Throwaway.kept(kept.appendingPathComponent("\(root.lastPathComponent)-\(name)"))
    }
}

extension RetryPolicy {
    /// Short delays (300 ms doubling, at most 5 s waited in a call), so tests of wrong passcodes
    /// run fast.
    package static let fast = RetryPolicy(base: .milliseconds(300), longestWait: .seconds(5))
}

extension DeviceTuning {
    /// The cheapest Argon2id cost and `RetryPolicy.fast` on a `ManualClock` of its own (delays
    /// advance it instead of sleeping): for test devices. The shipped `keepsake` never uses it.
    package static var fast: DeviceTuning {
        DeviceTuning(passcodeCost: .minimum, retryPolicy: .fast, clock: ManualClock().guessClock)
    }

    /// `fast` on the wall clock: the development tool's CLI runs, each a process of its own, whose
    /// delays must really pass between processes. The shipped `keepsake` never uses it.
    package static let fastOnWallClock = DeviceTuning(passcodeCost: .minimum, retryPolicy: .fast)
}

extension CloudAccount {
    /// A whole approval join, as a user does it between two devices: `joiner` posts a request,
    /// this account's device answers it, `joiner` shows its code, the user types it here, and `joiner`
    /// takes the approval. Returns the code.
    @discardableResult
    package func approve(_ joiner: CloudAccount, timeout: Duration = .seconds(10)) throws
        -> String
    {
        let ticket = try joiner.requestJoin()
        guard let code = try joiner.awaitCode(of: ticket, timeout: timeout) else {
            throw HarnessError("the joining device shows no code")
        }
        try approveJoin(code: code)
        guard try joiner.awaitApproval(of: ticket, timeout: timeout) else {
            throw HarnessError("the joining device saw no approval within \(timeout)")
        }
        return code
    }
}
