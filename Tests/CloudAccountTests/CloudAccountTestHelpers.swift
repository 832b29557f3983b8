import Foundation
import KeepsakeTestSupport
import Sealing
import Testing

@testable import CloudAccount
@testable import Device

// Shared by the cloud account suites (joins, rotation, sync sessions).

/// A device of its own (private Secret Service) signed in to `cloud`, with the account's escrow.
func member(_ cloud: URL) throws -> (PrivateSecretService, CloudAccount) {
    let service = try PrivateSecretService.start()
    return (service, service.account(cloud: cloud, retryPolicy: quick))
}

/// A phone (a private Secret Service of its own) with the pin 4711, which made the cloud account
/// on `cloud`. Its Secret Service lives as long as the returned value.
func phoneWithPin(on cloud: any CloudStorage) throws -> (
    phone: CloudAccount, service: PrivateSecretService
) {
    let service = try PrivateSecretService.start()
    let phone = service.account(
        directory: Throwaway.directory("phone"), cloud: cloud, tuning: .fast)
    try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
    // The account is made by the pin's cloud work, which a busy machine can cut short (the pin
    // is set all the same): each unlock takes it up again, as the device's own next unlock does.
    for _ in 0..<5 where (try? phone.keys.cloudKey(forUpload: false)) == nil {
        try phone.device.lock()
        _ = try? phone.unlock(passcode: "4711")
    }
    return (phone, service)
}

/// `phoneWithPin`, its account holding one key-value object whose name is returned.
func phoneWithOneObject(on cloud: any CloudStorage, saying text: String = "mine") throws -> (
    phone: CloudAccount, storeObject: String, service: PrivateSecretService
) {
    let (phone, service) = try phoneWithPin(on: cloud)
    let session = try #require(try phone.cloudSession())
    let objects = CloudObjects(cloudKey: session.key, kind: CloudObjects.kind("kv-"))
    let name = objects.name("com.example.wallet")
    try session.write(name, objects.seal(Data(text.utf8), name: name))
    try session.commit()
    return (phone, name, service)
}

/// A new device of the account at `cloud` joins with a passcode: `old` is refused (a wrong
/// passcode, counted by the escrow) and `new` joins, holding `key` when given — the escrow
/// answers the new passcode only.
func expectEscrowAnswersOnly(
    _ new: SecureBytes, not old: SecureBytes, key: SecureBytes? = nil, on cloud: URL,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let (service, newcomer) = try member(cloud)
    defer { withExtendedLifetime(service) {} }
    #expect(
        code { try newcomer.join(passcode: old) } == .authFailed, sourceLocation: sourceLocation)
    try newcomer.join(passcode: new)
    if let key {
        #expect(
            try newcomer.keys.cloudKey(forUpload: false) == key, sourceLocation: sourceLocation)
    }
}
