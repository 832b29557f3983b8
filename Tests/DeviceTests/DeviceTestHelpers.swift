import Foundation
import KeepsakeTestSupport

@testable import Device

// Shared by the device suites (guess limit, joins, rotation).

/// The DeviceError code `body` throws, or nil when it throws nothing (or something else).
func code(_ body: () throws -> Void) -> DeviceError.Code? {
    do {
        try body()
        return nil
    } catch let error as DeviceError {
        return error.code
    } catch {
        return nil
    }
}

/// Retry delays short enough for a test, the same shape as the real ones.
let quick = RetryPolicy(
    base: .milliseconds(1), maximum: .milliseconds(4), longestWait: .seconds(5))

/// A device of its own (private Secret Service) signed in to `cloud`, with the account's escrow.
func member(_ cloud: URL) throws -> (PrivateSecretService, Device) {
    let service = try PrivateSecretService.start()
    return (service, service.device(cloud: cloud, retryPolicy: quick))
}
