import Foundation
import Platform
import Sealing

/// `async` forms of the facade's calls (which never throw): each runs on a thread of its own
/// (`offThePool`), never on one of Swift concurrency's cooperative threads — an app's first
/// screen can `await hints.get()` without stalling its other tasks.
extension RecoveryHints {
    public func get() async -> RecoveryHint {
        await offThePool { () throws(Never) in self.get() }
    }

    public func set(_ changes: RecoveryHint) async {
        await offThePool { () throws(Never) in self.set(changes) }
    }
}
