import Foundation
import Platform
import Sealing

/// `async` forms of the facade's calls (which never throw): each runs on a thread of its own
/// (`offThePool`), never on one of Swift concurrency's cooperative threads — an app's first
/// screen can `await hints.get()` without stalling its other tasks.
extension RecoveryHints {
    /// `get()`, run off Swift concurrency's cooperative threads.
    public func get() async -> RecoveryHint {
        await offThePool { () throws(Never) in self.get() }
    }

    /// `set(_:)`, run off Swift concurrency's cooperative threads.
    public func set(_ changes: RecoveryHint) async {
        await offThePool { () throws(Never) in self.set(changes) }
    }
}
