import Device
import SecretService

extension KeychainError {
    /// How a Device failure looks to a keychain caller (and on the command line).
    public init(_ error: DeviceError) {
        let status: Int32 =
            switch error.code {
            case .authFailed: KeychainError.authFailed
            case .interactionNotAllowed: KeychainError.interactionNotAllowed
            case .invalidPasscode: KeychainError.param
            case .corrupt: KeychainError.decode
            default: KeychainError.notAvailable
            }
        self.init(status, error.message, underlying: error.underlying)
    }

    /// How a Secret Service failure looks to a keychain caller.
    init(_ error: SecretServiceError) {
        let status: Int32 =
            switch error.code {
            case .locked, .promptRequired: KeychainError.interactionNotAllowed
            case .invalidArgument: KeychainError.param
            case .noSuchObject: KeychainError.itemNotFound
            default: KeychainError.notAvailable
            }
        self.init(status, "\(error.code): \(error.message)", underlying: error)
    }
}
