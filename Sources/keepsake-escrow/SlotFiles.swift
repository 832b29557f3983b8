import Escrow
import Foundation
import Platform
import Synchronization

/// The escrow's slots as files in its state directory (one per slot, named by its ID in hex),
/// each written atomically and synced (`Files.writeAtomically`) before a count is answered.
final class SlotFiles: SlotStorage {
    private let directory: URL
    private let known: Mutex<Int>
    /// Held for the process's life: two escrows never share one state directory.
    private let lock: Int32

    init(_ directory: URL) throws {
        lock = try lockStateDirectory(directory)
        guard !FileManager.default.fileExists(atPath: SealedSlots.handlesFile(directory).path)
        else {
            throw ListenerError(
                "\(directory.path) was made with a TPM (--tpm): start keepsake-escrow with it")
        }
        self.directory = directory
        known = Mutex(Files.list(directory).count)
    }

    private func file(_ slot: Data) -> URL {
        directory.appendingPathComponent(slot.map { String(format: "%02x", $0) }.joined())
    }

    func load(_ slot: Data) throws -> Data? { try Files.read(file(slot), limit: 8192) }

    func save(_ slot: Data, _ record: Data) throws {
        let target = file(slot)
        let isNew = !FileManager.default.fileExists(atPath: target.path)
        try Files.writeAtomically(record, to: target)
        if isNew { known.withLock { $0 += 1 } }
    }

    func delete(_ slot: Data) throws {
        let target = file(slot)
        guard FileManager.default.fileExists(atPath: target.path) else { return }
        try Files.remove(target)
        known.withLock { $0 -= 1 }
    }

    func count() -> Int { known.withLock { $0 } }

    /// Every record's ID (its file's name read back: 32 hex digits).
    func ids() -> [Data] {
        Files.list(directory).compactMap { name in
            guard name.count == 2 * EscrowProtocol.slotIDLength else { return nil }
            return Data(hexString: name)
        }
    }
}

/// Makes the state directory when needed (0700), checks it is this user's alone, and takes its
/// lock for the process's life: two escrows never share one state directory.
func lockStateDirectory(_ directory: URL) throws -> Int32 {
    try Files.checkOwnedByUser(directory)
    try Files.ensureDirectory(directory)
    try Files.checkOwnedByUser(directory)
    let lockFile = directory.appendingPathComponent(".lock")
    let lock = open(lockFile.path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard lock >= 0, flock(lock, LOCK_EX | LOCK_NB) == 0 else {
        throw ListenerError("\(directory.path) is in use by another keepsake-escrow")
    }
    return lock
}
