import AppWiring
import BlockStore
import Device
import Keychain
import Sealing
import Platform

/// The one mapping from a failure to what the command line prints on standard error (the status
/// name, then the message) and its exit status: 2 for a usage error, 1 for every other failure.
struct Failure {
    let statusName: String
    let message: String
    let exitCode: Int32

    init(_ error: any Error) {
        switch error {
        case let error as CommandError:
            (statusName, message, exitCode) = (error.statusName, error.message, error.exitCode)
        case let error as OptionError:
            let param = CommandError.param(error.description)
            (statusName, message, exitCode) = (param.statusName, param.message, param.exitCode)
        case let error as KeychainError:
            (statusName, message, exitCode) = (error.statusName, error.message, 1)
        case let error as DeviceError:
            (statusName, message, exitCode) = (KeychainError(error).statusName, error.message, 1)
        case let error as BlockStoreError:
            // A wrong (or impossible) passcode at join is the device's errSecAuthFailed
            // (errSecParam); the rest are Google's.
            if let device = error.underlying as? DeviceError,
                device.code == .authFailed || device.code == .invalidPasscode
            {
                statusName = KeychainError(device).statusName
            } else {
                statusName = error.code.description
            }
            (message, exitCode) = (error.message, 1)
        case let error as any KeepsakeError:  // HintError, KeyValueStoreError, PreferencesError
            (statusName, message, exitCode) = ("\(error.code)", error.message, 1)
        default:
            (statusName, message, exitCode) = ("error", "\(error)", 1)
        }
    }
}
