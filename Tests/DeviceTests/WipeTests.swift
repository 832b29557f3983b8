import Device
import Foundation
import KeepsakeTestSupport
import SecretService
import Testing

/// What a wipe does where it cannot delete (on a Secret Service in memory, which can lock its
/// collection without a person).
@Suite(
    "A wipe where the Secret Service cannot delete",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct WipeTests {
    @Test(
        "a wipe of a locked collection is refused with errSecInteractionNotAllowed and erases nothing: once the collection is unlocked, the lock screen, its passcode and its keys are all there"
    )
    func lockedCollection() throws {
        let service = InMemorySecretService()
        let device = service.device("locked-wipe")
        try device.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
        let key = try device.classKey(.afterFirstUnlock)
        try service.connection().lock(.default)
        #expect(throws: DeviceError(.interactionNotAllowed)) { try device.wipe() }
        try service.connection().unlock(.default, masterPassword: Data())
        #expect(try device.lockScreenKind() == .pin)
        #expect(try device.classKey(.afterFirstUnlock) == key)
        try device.reboot()
        try device.unlock(passcode: "482916")
        #expect(try device.classKey(.afterFirstUnlock) == key)
    }
}
