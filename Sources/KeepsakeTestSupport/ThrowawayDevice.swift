import Device
import Foundation

extension PrivateSecretService {
    /// A device for tests on this Secret Service: its directory `name` under the service's
    /// throwaway root (never the user's `$XDG_DATA_HOME`) — or, during the suite-wide sweep, kept
    /// for it, since everything Keepsake writes there is sealed — the cheapest Argon2id cost, and
    /// the given cloud account, call timeout and retry delays. The same name gives the same
    /// directory.
    package func device(
        _ name: String = "device", cloud: URL? = nil, timeout: Duration = .seconds(5),
        retryPolicy: RetryPolicy = RetryPolicy(), tpm: PrivateTPM? = nil
    ) -> Device {
        let device = Device(
            secretService: connection(timeout: timeout), directory: deviceDirectory(name),
            cloud: cloud.map(CloudDirectory.init), tpm: tpm?.configuration,
            escrow: cloud.flatMap { try? PrivateEscrow.of($0).configuration },
            tuning: DeviceTuning(passcodeCost: .minimum, retryPolicy: retryPolicy))
        // Its runtime keys are kernel state that outlives the test: a reboot at the end.
        atStop { try? device.reboot() }
        return device
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
    /// The cheapest Argon2id cost and `RetryPolicy.fast`: for test devices and the development
    /// tool's CLI runs. The shipped `keepsake` never uses it.
    package static let fast = DeviceTuning(passcodeCost: .minimum, retryPolicy: .fast)
}
