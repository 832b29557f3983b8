import Foundation
import KeepsakeTestSupport
import Testing

@testable import CloudAccount
@testable import Device

// Shared by the cloud account suites (joins, rotation, sync sessions).

/// A device of its own (private Secret Service) signed in to `cloud`, with the account's escrow.
func member(_ cloud: URL) throws -> (PrivateSecretService, Device) {
    let service = try PrivateSecretService.start()
    return (service, service.device(cloud: cloud, retryPolicy: quick))
}

/// A phone (a private Secret Service of its own) with the pin 4711, which made the cloud account
/// on `cloud`. Its Secret Service lives as long as the returned value.
func phoneWithPin(on cloud: any CloudStorage) throws -> (
    phone: Device, service: PrivateSecretService
) {
    let service = try PrivateSecretService.start()
    let phone = service.device(directory: Throwaway.directory("phone"), cloud: cloud, tuning: .fast)
    try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
    // The account is made by the pin's cloud work, which a busy machine can cut short (the pin
    // is set all the same): each unlock takes it up again, as the device's own next unlock does.
    for _ in 0..<5 where (try? CloudAccount(phone).keys.cloudKey(forUpload: false)) == nil {
        try phone.lock()
        _ = try? phone.unlock(passcode: "4711")
    }
    return (phone, service)
}

/// `phoneWithPin`, its account holding one key-value object whose name is returned.
func phoneWithOneObject(on cloud: any CloudStorage, saying text: String = "mine") throws -> (
    phone: Device, storeObject: String, service: PrivateSecretService
) {
    let (phone, service) = try phoneWithPin(on: cloud)
    let session = try #require(try CloudAccount(phone).cloudSession())
    let objects = CloudObjects(cloudKey: session.key, kind: CloudObjects.kind("kv-"))
    let name = objects.name("com.example.wallet")
    try session.write(name, objects.seal(Data(text.utf8), name: name))
    try session.commit()
    return (phone, name, service)
}
