import Foundation
import TPM

/// A TPM the device reaches through a TCTI: where a device's direct TPM slot (a passcode slot held
/// by the TPM itself) is kept. Records may hold one; outside tests, no new lock screen makes one.
///
/// No new lock-screen slot goes to a TPM that the device's own processes reach: any other process
/// of the same user reaches it too, and with the owner authorization empty (most Linux machines)
/// can increment Keepsake's counter or undefine the slot (disabling the device without a wrong
/// guess) and, while the lockout authorization is empty, clear the lockout that counts guesses
/// made around Keepsake's counter. Guesses are counted by a TPM only through a guess counter
/// service that owns it (`keepsake-escrow --tpm`, run as a user of its own; `Device(counter:)`).
/// A device whose passcode slot is on a TPM keeps unlocking with it: its next right unlock moves
/// the slot to the guess counter service when the device names one (or to the software path when
/// the TPM's lockout authorization is empty), its next passcode change to the software path.
public struct TPMConfiguration: Sendable, Hashable {
    /// A tpm2-tss TCTI string: `device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`, …
    public let tcti: String

    /// What setting a lock screen does with this TPM.
    enum NewSlots: Sendable, Hashable {
        /// Refused, naming the guess counter service: the TPM was named explicitly, so the user
        /// asked for a TPM's count and would otherwise get the software path unawares.
        case refused
        /// The software path (the machine's TPM, taken by default: it keeps only the direct
        /// slots records hold, never a new one).
        case software
        /// A direct slot on the TPM: only the test support target makes one, to test devices
        /// whose record holds one.
        case made
    }

    let newSlots: NewSlots

    /// The TPM at `tcti`, named explicitly: direct slots on it unlock; a new passcode on a device
    /// that names no guess counter service is refused, naming one.
    public init(tcti: String) {
        self.init(tcti: tcti, newSlots: .refused)
    }

    init(tcti: String, newSlots: NewSlots) {
        self.tcti = tcti
        self.newSlots = newSlots
    }

    /// The machine's TPM (`/dev/tpmrm0`, the kernel's resource manager) when it has one: a
    /// direct passcode slot on it unlocks; a new lock screen uses the software path (or the guess
    /// counter service, when the device names one).
    public static var machine: TPMConfiguration? {
        FileManager.default.fileExists(atPath: "/dev/tpmrm0")
            ? TPMConfiguration(tcti: "device:/dev/tpmrm0", newSlots: .software) : nil
    }

    /// A TPM that new lock screens make a direct slot on: only for tests of devices whose record
    /// holds one, never reachable from an app or the shipped command line.
    package static func makingDirectSlots(tcti: String) -> TPMConfiguration {
        TPMConfiguration(tcti: tcti, newSlots: .made)
    }

    /// A fresh ESAPI context (one per operation: a TPM that went away is found again).
    package func context() throws(TPMError) -> TPMContext { try TPMContext(tcti: tcti) }
}
