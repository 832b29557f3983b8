import Device
import Keychain

/// The Apple status a call ends with: 0 on success, the `OSStatus` of a `KeychainError` (or of a
/// `DeviceError`, as the Keychain would report it), `Int32.min` for anything else.
func status(_ body: () throws -> Void) -> KeychainStatus {
    do {
        try body()
        return .success
    } catch let error as KeychainError {
        return error.status
    } catch let error as DeviceError {
        return KeychainError(error).status
    } catch {
        return KeychainStatus(Int32.min)
    }
}
