import Foundation
import Platform
import SecretService

/// Reads and writes the device record in the Secret Service's persistent collection: the one
/// owner of the record.
///
/// Every replacement is made holding the device's lock (`exclusively`, a `flock` every process of
/// the user takes on `lockscreen.lock` in the device directory) by a writer that read the record
/// it replaces under that same lock: `store` takes the `DeviceLock` only `exclusively` hands out,
/// so no write can go around it. Within one holding the record read is the record stored, so a
/// write that read an older generation (a slow wrong guess against a passcode changed meanwhile)
/// cannot happen. The signed-in account's own bytes are replaced by a compare-and-swap on the
/// device's state as the account read it (`replaceAccountState(since:_:)`): applied only while
/// that state still holds.
///
/// A provider killed before it saved can come back with the record's item but not its secret
/// (kwalletd5 writes a wallet to disk when it closes it; its item list reaches the disk before the
/// secrets do). That state is gone for good: the record is made anew in the same item, its
/// predecessor's runtime keys are dropped (its device ID is kept, public, in the device directory),
/// and the one call that found it says so — every later call works on the new, empty device.
package struct DeviceRecordStore: Sendable {
    package let secretService: SecretServiceConnection
    /// The device directory: `device-id` there names the record's device (not secret).
    package let directory: URL

    /// Where the current record's device ID is noted.
    private var idFile: URL { directory.appendingPathComponent("device-id") }
    /// Where the record's item was last found (an object path: not secret), so a cold read can
    /// fetch the record in the same `GetSecrets` as the items it reads instead of searching for
    /// it first (`recordAt(noted:)`).
    private var pathFile: URL { directory.appendingPathComponent("record-path") }

    package static let collection = CollectionPath.default
    package static let attributes = [
        "xdg:schema": "org.keepsake.Device", "keepsake-device": "state",
    ]

    /// The device's lock: every replacement of the record is made holding it.
    private var lockFile: URL { directory.appendingPathComponent("lockscreen.lock") }

    /// Proof that the device's lock is held: handed out by `exclusively` alone, and asked for by
    /// every replacement of the record.
    package struct DeviceLock: Sendable { fileprivate init() {} }

    /// Runs `body` holding the device's lock (every process of the user takes the same). A
    /// holder reads the record it replaces inside `body`: what it read is the record as stored.
    package func exclusively<R>(_ body: (DeviceLock) throws(DeviceError) -> R) throws(DeviceError)
        -> R
    {
        let lock = try DeviceError.lock(lockFile, "the device's lock")
        defer { withExtendedLifetime(lock) {} }
        return try body(DeviceLock())
    }

    /// Taken around a first use's search-and-create, so the processes of the user that share the
    /// device directory make one record between them (hidden: a wipe keeps it).
    private var creationLock: URL { directory.appendingPathComponent(".record.lock") }

    /// The record, made on first use. Concurrent first uses are serialized by the device
    /// directory's creation lock: one of them makes the record, the others find it. Without the
    /// lock (processes given different directories on one Secret Service) several may be made;
    /// the smallest path wins and the others are deleted (whatever order a provider gives its
    /// paths in, every process makes the same comparison) — and what a loser sealed under its
    /// own record's keys meanwhile is lost, which is why the lock is there.
    package func load() throws(DeviceError) -> (path: ItemPath, record: DeviceRecord) {
        if let found = try read() { return found }
        let lock = try DeviceError.lock(creationLock, "the device record's creation lock")
        defer { withExtendedLifetime(lock) {} }
        for _ in 0..<3 {
            if let found = try read() { return found }
            // None (yet, or no more: a provider that lost the item itself). A device noted here
            // before has no state left: its runtime keys go with it.
            forgetNotedDevice()
            let fresh = DeviceRecord.fresh()
            // A creation replaces nothing: the creation lock serializes it, not the device's (a
            // reader may hold that already).
            try store(fresh, replacing: nil, DeviceLock())
            noteDeviceID(fresh.deviceID)
        }
        throw DeviceError(.notAvailable, "the device state could not be read")
    }

    /// The record the search finds; nil when there is none (or its item went away meanwhile).
    private func read() throws(DeviceError) -> (path: ItemPath, record: DeviceRecord)? {
        let found = try call { () throws(SecretServiceError) in
            try secretService.search(Self.attributes)
        }
        // Locked: KeePassXC finds nothing in a locked database, and a record made then would
        // be a second one (and its create an unlock dialog).
        if found.collectionLocked {
            throw DeviceError(.interactionNotAllowed, SecretServiceError.lockedCollection)
        }
        guard let first = found.unlocked.min() else { return nil }
        for other in found.unlocked where other != first {
            try? secretService.deleteItem(at: other)
        }
        guard
            let bytes = try call({ () throws(SecretServiceError) in
                try secretService.secrets(at: [first])
            })[first]
        else { return nil }
        if bytes.isEmpty { try startOverAfterLoss(at: first) }
        let record = try DeviceRecord.decode(bytes)
        noteDeviceID(record.deviceID)
        notePath(first)
        return (first, record)
    }

    /// The path the record was last found at, when one is noted in a directory of the user's
    /// own (and reads as an object path).
    package var notedPath: ItemPath? {
        guard (try? DeviceError.checkOwnedByUser([directory, pathFile])) != nil,
            let data = try? Files.read(pathFile, limit: 512),
            let text = String(data: data, encoding: .utf8), text.hasPrefix("/"),
            text.unicodeScalars.allSatisfy({
                $0.isASCII
                    && ($0 == "/" || $0 == "_" || $0.properties.isAlphabetic
                        || ("0"..."9").contains($0))
            })
        else { return nil }
        return ItemPath(text)
    }

    /// The record in `bytes`, the secret read at `notedPath`: nil when there was none there, it
    /// is not a device record (the item went, or a provider gave its path to another item) or
    /// not the record of the device noted here (another record the path came to name, on another
    /// collection or a duplicate): the caller then finds the record by its search (`load`), which
    /// also deals with a lost one and with duplicates.
    package func recordAt(noted bytes: Data?) -> DeviceRecord? {
        guard let bytes, !bytes.isEmpty, let record = try? DeviceRecord.decode(bytes),
            (try? Files.read(idFile, limit: 64)) == Data(record.deviceID.utf8)
        else { return nil }
        return record
    }

    /// Notes `path` as the record's (`note`).
    private func notePath(_ path: ItemPath) { note(path.rawValue, in: pathFile) }

    /// The record's item came back empty: makes the record anew in it, drops the lost device's
    /// runtime keys, and throws what happened and what to do.
    private func startOverAfterLoss(at path: ItemPath) throws(DeviceError) -> Never {
        forgetNotedDevice()
        let fresh = DeviceRecord.fresh()
        // Nothing was there to have been read: refilled without the device's lock (a reader
        // may hold it already).
        try store(fresh, replacing: path, DeviceLock())
        noteDeviceID(fresh.deviceID)
        throw DeviceError(
            .corrupt,
            "the Secret Service lost the device state (it kept the item but not its contents: the provider stopped before it saved). The device starts anew without a lock screen: set it again (lockscreen set); items written before cannot be opened any more (delete and add them again); this call was not made: make it again"
        )
    }

    /// Drops the runtime keys of the device noted in the device directory.
    private func forgetNotedDevice() {
        if let noted = notedDeviceID { RuntimeKeys(deviceID: noted).forgetAll() }
    }

    /// The device ID noted in the device directory (written at every read of the record): what
    /// forgetting the runtime keys needs without asking the Secret Service.
    package var notedDeviceID: String? {
        guard let data = try? Files.read(idFile, limit: 64), data.count == 32,
            let noted = String(data: data, encoding: .utf8), noted.allSatisfy(\.isHexDigit)
        else { return nil }
        return noted
    }

    /// Notes `id` as the record's device (`note`): a lost state's clean-up reads it, and a cold
    /// read checks the record at the noted path against it.
    private func noteDeviceID(_ id: String) { note(id, in: idFile) }

    /// Writes `text` to `file` in the device directory when it does not hold it yet. Best
    /// effort: both notes are hints that a search can do without.
    private func note(_ text: String, in file: URL) {
        guard (try? Files.checkOwnedByUser(directory)) != nil,
            (try? Files.read(file, limit: 512)) != Data(text.utf8)
        else { return }
        try? Files.ensureDirectory(directory)
        try? Files.writeAtomically(Data(text.utf8), to: file)
    }

    /// Writes `record` (in place when `path` is given), holding the device's lock (`held`).
    @discardableResult
    package func store(_ record: DeviceRecord, replacing path: ItemPath?, _ held: DeviceLock)
        throws(DeviceError) -> ItemPath
    {
        let bytes = record.encoded()
        return try call { () throws(SecretServiceError) in
            if let path {
                // In place (Item.SetSecret): no provider asks the user for that.
                try secretService.replaceItem(at: path, secret: bytes)
                return path
            }
            return try secretService.createItem(
                label: "Keepsake device state", attributes: Self.attributes, secret: bytes,
                in: Self.collection)
        }
    }

    /// One Secret Service call, its failure in the device's terms.
    package func call<R>(_ body: () throws(SecretServiceError) -> R) throws(DeviceError) -> R {
        do { return try body() } catch {
            if error.code == .locked || error.code == .promptRequired {
                throw DeviceError(.interactionNotAllowed, "\(error)", underlying: error)
            }
            throw DeviceError(.notAvailable, "\(error)", underlying: error)
        }
    }
}
