import CloudAccount
import Device
import Foundation

extension PrivateSecretService {
    /// The test device: the one way tests make a `Device`. It lives on this Secret Service, in
    /// the directory `name` under the service's throwaway root (or `directory`; never the user's
    /// `$XDG_DATA_HOME`; during the suite-wide sweep kept for it, since everything Keepsake writes
    /// there is sealed), on `tpm`, signed in to `cloud` with the account's `escrow`, its passcode
    /// guesses counted by `counter`, its calls bounded by `timeout`, and tuned by `tuning` (the
    /// cheapest Argon2id cost, short delays sat out on a clock of its own: `DeviceTuning.fast`).
    /// Its runtime keys (kernel state that outlives a test) go when the service stops, unless it
    /// stops keeping them: a reboot.
    /// The same name gives the same directory.
    package func device(
        _ name: String = "device", directory: URL? = nil, cloud: (any CloudStorage)? = nil,
        tpm: TPMConfiguration? = nil, escrow: EscrowConfiguration? = nil,
        counter: EscrowConfiguration? = nil, timeout: Duration = .seconds(5), tuning: DeviceTuning
    ) -> Device {
        let device = CloudAccount(
            secretService: connection(timeout: timeout),
            directory: directory ?? deviceDirectory(name), cloud: cloud, tpm: tpm,
            escrow: escrow, counter: counter, tuning: tuning
        ).device
        rebootAtStop(device)
        return device
    }

    /// `device(_:cloud:…)` for the common cases: signed in to the account at `cloud` (a
    /// directory, with its private escrow when it has one), `retryPolicy`'s delays sat out on
    /// `clock` (a `ManualClock` of its own unless given: they advance it instead of sleeping),
    /// a private TPM's direct slots, a private guess counter service.
    package func device(
        _ name: String = "device", cloud: URL? = nil, timeout: Duration = .seconds(5),
        retryPolicy: RetryPolicy = RetryPolicy(), tpm: PrivateTPM? = nil,
        counter: PrivateEscrow? = nil, clock: ManualClock = ManualClock()
    ) -> Device {
        device(
            name, cloud: cloud.map(CloudDirectory.init),
            tpm: tpm?.directSlots,
            escrow: cloud.flatMap { try? PrivateEscrow.of($0).configuration },
            counter: counter?.configuration, timeout: timeout,
            tuning: DeviceTuning(
                passcodeCost: .minimum, retryPolicy: retryPolicy, clock: clock.guessClock))
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
    package func approve(_ joiner: Device, timeout: Duration = .seconds(10)) throws -> String {
        let ticket = try CloudAccount(joiner).requestJoin()
        guard let code = try CloudAccount(joiner).awaitCode(of: ticket, timeout: timeout) else {
            throw HarnessError("the joining device shows no code")
        }
        try approveJoin(code: code)
        guard try CloudAccount(joiner).awaitApproval(of: ticket, timeout: timeout) else {
            throw HarnessError("the joining device saw no approval within \(timeout)")
        }
        return code
    }
}
