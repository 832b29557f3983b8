import Device
import Foundation
import KeepsakeTestSupport
import Testing

/// The device record is read once per operation: what a lock-screen call costs a provider is its
/// one search and one `GetSecrets`, plus the writes the guess limit makes.
@Suite(
    "The device record is read once per lock-screen operation (on a Secret Service in memory)",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct RecordReadsTests {
    @Test(
        "an unlock in a new process reads the record once and writes it twice (the guess counted, then cleared); status reads it once and writes nothing; lock and reboot never call the Secret Service"
    )
    func oneReadPerOperation() throws {
        let service = InMemorySecretService()
        try service.device("reads").setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
        try service.device("reads").reboot()
        let device = service.device("reads")  // a new process's device
        let read = ["search org.keepsake.Device", "secrets 1"]

        service.forgetCalls()
        try device.unlock(passcode: "482916")
        #expect(service.calls == read + ["replace", "replace"])

        service.forgetCalls()
        #expect(try device.status().state == .unlocked)
        #expect(service.calls == read)

        service.forgetCalls()
        try device.lock()
        #expect(service.calls == [])
        // Another process's device, which never read the record: neither does its lock or reboot.
        try service.device("reads").lock()
        try service.device("reads").reboot()
        #expect(service.calls == [])
    }
}
