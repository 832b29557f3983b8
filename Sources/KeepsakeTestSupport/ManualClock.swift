import Device
import Foundation
import Synchronization

/// A clock for the lock screen's wrong-passcode delays that moves only when told: sitting out a
/// delay advances it at once and adds to `slept`, so a test checks that a delay was earned and
/// sat out without waiting for it (swift-nio's `EmbeddedEventLoop.advanceTime`, for Keepsake). It
/// starts at the wall clock's time, since the delays are kept in the device record.
package final class ManualClock: Sendable {
    private let state: Mutex<(now: Int64, slept: Int64)>

    package init() {
        state = Mutex((GuessClock.system.now(), 0))
    }

    /// The clock a device is tuned with (`DeviceTuning.clock`).
    package var guessClock: GuessClock {
        GuessClock(
            now: { [self] in state.withLock { $0.now } },
            sleep: { [self] milliseconds in
                state.withLock {
                    $0.now += milliseconds
                    $0.slept += milliseconds
                }
            })
    }

    /// Moves the clock on, as if `duration` had passed.
    package func advance(by duration: Duration) {
        let milliseconds =
            duration.components.seconds * 1000
            + duration.components.attoseconds / 1_000_000_000_000_000
        state.withLock { $0.now += milliseconds }
    }

    /// Every delay sat out on this clock so far.
    package var slept: Duration { .milliseconds(state.withLock { $0.slept }) }
}

/// Returns as soon as the wall clock's millisecond has moved on (a spin of at most a millisecond):
/// the stores stamp writes in milliseconds, so a write after this is stamped later than every
/// write before it — what a last-writer-wins test needs, without a fixed sleep.
package func waitForTheNextMillisecond() {
    let start = GuessClock.system.now()
    while GuessClock.system.now() <= start { sched_yield() }
}
