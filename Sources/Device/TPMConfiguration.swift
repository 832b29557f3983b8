import Foundation
import TPM

/// The TPM that counts this device's passcode guesses, reached through a TCTI.
public struct TPMConfiguration: Sendable, Hashable {
    /// A tpm2-tss TCTI string: `device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`, …
    public let tcti: String

    public init(tcti: String) { self.tcti = tcti }

    /// The machine's TPM (`/dev/tpmrm0`, the kernel's resource manager) when it has one.
    public static var machine: TPMConfiguration? {
        FileManager.default.fileExists(atPath: "/dev/tpmrm0")
            ? TPMConfiguration(tcti: "device:/dev/tpmrm0") : nil
    }

    /// A fresh ESAPI context (one per operation: a TPM that went away is found again).
    package func context() throws(TPMError) -> TPMContext { try TPMContext(tcti: tcti) }
}
