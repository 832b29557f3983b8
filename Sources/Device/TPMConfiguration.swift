import Foundation
import TPM

/// The TPM that counts this device's passcode guesses, reached through a TCTI.
public struct TPMConfiguration: Sendable, Hashable {
    /// A tpm2-tss TCTI string: `device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`, …
    public let tcti: String

    /// Whether a lock screen set on this TPM falls back to the software path when the TPM's
    /// lockout authorization is empty (the machine's TPM, taken by default) instead of being
    /// refused (a TPM named explicitly).
    let softwareWhenOpen: Bool

    public init(tcti: String) {
        self.tcti = tcti
        softwareWhenOpen = false
    }

    private init(machineTCTI tcti: String) {
        self.tcti = tcti
        softwareWhenOpen = true
    }

    /// The machine's TPM (`/dev/tpmrm0`, the kernel's resource manager) when it has one. A lock
    /// screen is set on it only when its lockout authorization is set (otherwise any process could
    /// clear the lockout that counts guesses made around Keepsake): on a machine whose TPM has
    /// none, as most have, the software path is used and `lockscreen status` says so.
    public static var machine: TPMConfiguration? {
        FileManager.default.fileExists(atPath: "/dev/tpmrm0")
            ? TPMConfiguration(machineTCTI: "device:/dev/tpmrm0") : nil
    }

    /// Whether a new lock-screen slot goes to this TPM: false for the machine's default TPM when
    /// its lockout authorization is empty (and for one that does not answer the question).
    func takesNewSlots() -> Bool {
        guard softwareWhenOpen else { return true }
        return (try? context().lockoutAuthorizationIsSet()) ?? false
    }

    /// A fresh ESAPI context (one per operation: a TPM that went away is found again).
    package func context() throws(TPMError) -> TPMContext { try TPMContext(tcti: tcti) }
}
