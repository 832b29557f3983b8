import Device
import SecretService
import Foundation

// Shared by the device, passcode and cloud account suites.

/// The DeviceError code `body` throws, or nil when it throws nothing (or something else).
package func code(_ body: () throws -> Void) -> DeviceError.Code? {
    thrownCode(body, otherwise: nil)
}

/// Like `code`, but any other error reads as `.notAvailable`.
package func codeOrUnavailable(_ body: () throws -> Void) -> DeviceError.Code? {
    thrownCode(body, otherwise: .notAvailable)
}

private func thrownCode(_ body: () throws -> Void, otherwise: DeviceError.Code?)
    -> DeviceError.Code?
{
    do {
        try body()
        return nil
    } catch {
        return (error as? DeviceError)?.code ?? otherwise
    }
}

/// Retry delays short enough for a test, the same shape as the real ones.
package let quick = RetryPolicy(
    base: .milliseconds(1), maximum: .milliseconds(4), longestWait: .seconds(5))

/// The device record as stored: read the way another process of the user can, for tests that
/// check what a lock screen change or an unlock wrote.
package func storedRecord(_ device: Device) throws -> DeviceRecord {
    try device.records.load().record
}

/// What another process of the user can do to the software count: set the stored record's wrong
/// passcodes and delay back to none, in the Secret Service.
package func resetStoredFailures(_ device: Device) throws {
    let loaded = try device.records.load()
    var record = loaded.record
    record.failures = 0
    record.notBefore = 0
    try writeStoredRecord(device, record, at: loaded.path)
}

/// What another process of the user can do to the record: write `record` over the item at `path`
/// straight through the Secret Service, around the device's lock (as any process of the user
/// reaches it). Returns the path.
@discardableResult
package func writeStoredRecord(_ device: Device, _ record: DeviceRecord, at path: ItemPath) throws
    -> ItemPath
{
    try device.secretService.replaceItem(at: path, secret: record.encoded())
    return path
}
