import Foundation

/// The one rule by which two writes to the same synced item are ordered, on every device: the
/// later modification (milliseconds since 1970, as the writing device's clock read it) wins, and
/// at the same millisecond the write whose writer ID sorts higher. A deletion is a write like any
/// other — a tombstone carrying its own version — so a delete later than an update wins, and an
/// update (or a re-add) later than a delete wins. Nothing else decides: not which sync reached
/// the cloud first, not which device syncs last. Apple's iCloud Keychain resolves per item by
/// modification date the same way (docs/stores.md, "Conflicts").
package struct SyncVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// When the write was made: milliseconds since 1970.
    package var modified: Int64
    /// Which device made it (its device ID; "" for a write from before writers were recorded).
    package var writer: String

    package init(modified: Int64, writer: String) {
        self.modified = modified
        self.writer = writer
    }

    package static func < (a: SyncVersion, b: SyncVersion) -> Bool {
        (a.modified, a.writer) < (b.modified, b.writer)
    }

    package var description: String { "\(modified)@\(writer.isEmpty ? "?" : writer)" }
}

/// The clock every synced store dates its writes by (milliseconds since 1970). A test pins it with
/// `SyncClock.$pinned.withValue(ms) { … }` to make two devices write at the same millisecond —
/// the one case the writer decides; no environment or flag of a shipped binary reaches it.
package enum SyncClock {
    @TaskLocal package static var pinned: Int64?

    /// Now, or the pinned millisecond.
    package static func now() -> Int64 { pinned ?? Int64(Date().timeIntervalSince1970 * 1000) }
}
