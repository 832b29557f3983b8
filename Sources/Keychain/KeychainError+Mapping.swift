import Device
import SecretService

extension KeychainError {
    /// How a Device failure looks to a keychain caller (and on the command line).
    public init(_ error: DeviceError) {
        let status: KeychainStatus =
            switch error.code {
            case .authFailed, .disabled: KeychainStatus.authFailed
            case .interactionNotAllowed: KeychainStatus.interactionNotAllowed
            case .invalidPasscode: KeychainStatus.param
            case .corrupt: KeychainStatus.decode
            default: KeychainStatus.notAvailable
            }
        self.init(status, error.message, underlying: error)
    }

    /// How a Secret Service failure looks to a keychain caller.
    init(_ error: SecretServiceError) {
        let status: KeychainStatus =
            switch error.code {
            case .locked, .promptRequired: KeychainStatus.interactionNotAllowed
            case .invalidArgument: KeychainStatus.param
            case .noSuchObject: KeychainStatus.itemNotFound
            default: KeychainStatus.notAvailable
            }
        self.init(status, "\(error.code): \(error.message)", underlying: error)
    }
}
