import BlockStore
import CloudAccount
import Device
import Foundation
import KeyValueStore
import Keychain
import LocalAuthentication
import Preferences
import RecoveryHint
import Sealing
import SecretService
import Testing

@Suite("Errors read the same everywhere")
struct ErrorMessageTests {
    @Test(
        "every public error type's localizedDescription is its own sentence (what the command line prints), never Foundation's \"The operation could not be completed\""
    )
    func localizedDescriptions() {
        let errors: [any Error & CustomStringConvertible] = [
            DeviceError(.authFailed, "wrong passcode"),
            KeychainError(.itemNotFound, "no item matches the query"),
            BlockStoreError(.tooManyEntries, "16 entries per app"),
            KeyValueStoreError(.quotaViolation, "1 MB in all"),
            PreferencesError(.invalidInput, "not a preferences file"),
            HintError(.invalidField, "lastWallet must be an address"),
            SealingError(.authentication, "the tag did not verify"),
            SecretServiceError(.locked, message: "the collection is locked"),
            LAError(.userCancel, "cancelled"),
            CloudError("the WebDAV server refused the credentials", isTemporary: false),
        ]
        for error in errors {
            let localized = (error as Error).localizedDescription
            #expect(localized == error.description, "\(type(of: error))")
            #expect(!localized.contains("could not be completed"), "\(type(of: error))")
        }
    }

    @Test(
        "the kernel keyring's refusal says what to do: in a container (seccomp's EPERM or ENOSYS) which system calls to allow, with a full key quota where the quota is"
    )
    func kernelKeyringRefusal() {
        for code in [EPERM, ENOSYS] {
            let message = RuntimeKeys.refused("a keyring", errno: code).message
            #expect(message.hasPrefix("the kernel keyring refused a keyring: "), "\(message)")
            #expect(message.contains("allow the keyctl, add_key and request_key system calls"))
        }
        #expect(RuntimeKeys.refused("a class key", errno: EDQUOT).message.contains("quota is full"))
    }
}
