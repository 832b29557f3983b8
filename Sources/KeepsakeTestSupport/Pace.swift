import Foundation
import Synchronization

/// How slow this machine is right now, so that a test's bound tells a hang from a busy machine.
///
/// A test that checks "the call comes back within its bound, never hangs" allows the bound plus
/// slack; the slack is what that test needs on a quiet machine, scaled by how busy the machine is
/// now: the larger of how much longer a reference job (starting a process and some arithmetic,
/// what the tests do most) takes than on a quiet machine of this kind, and the load average per
/// core. A hang still fails: it outlasts any slack. Timing goals (how fast something is) belong in
/// the benchmark, never here.
package enum Pace {
    /// The reference job on a quiet 2-core machine (median of five runs, debug build: 23–26 ms
    /// measured).
    static let quiet: Duration = .milliseconds(25)

    /// How many times slower than quiet the machine runs now (at least 1).
    package static func factor() -> Double {
        let runs = (0..<5).map { _ in referenceJob() }.sorted()
        return max(1, runs[2] / quiet, loadPerCore())
    }

    /// The last minute's load average per core (`/proc/loadavg`), 0 where it cannot be read.
    private static func loadPerCore() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8),
            let first = text.split(separator: " ").first, let load = Double(first)
        else { return 0 }
        return load / Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// `slack` (enough on a quiet machine) scaled by the machine's current pace.
    package static func scaled(_ slack: Duration) -> Duration {
        slack * factor()
    }

    /// The longest a call bounded by `bound` may take here now: the bound plus `slack` scaled.
    package static func allowance(bound: Duration, slack: Duration = .seconds(1)) -> Duration {
        bound + scaled(slack)
    }

    /// Starting a process (`Spawn`: Foundation's `Process` once left a reaped-too-late
    /// `/bin/true` waited on for good here, under a run of parallel suites) and some arithmetic.
    package static func referenceJob() -> Duration {
        let start = ContinuousClock.now
        _ = try? Spawn.run("/bin/true", [], environment: [:])
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<5_000_000 { state = (state ^ (state >> 31)) &* 0xBF58_476D_1CE4_E5B9 }
        withExtendedLifetime(state) {}
        return ContinuousClock.now - start
    }
}

/// Runs `body(0..<count)` all at once, each on a thread of its own (`DispatchQueue.concurrentPerform`
/// runs only as many at a time as there are cores), and returns when every one has.
package func allAtOnce(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.start()
    }
    group.wait()
}

/// Runs `body(0..<count)` on `threads` threads at once, each taking the next index as it is
/// done with one (a load of `count` requests from `threads` clients), and returns when every
/// index was run.
package func onThreads(_ threads: Int, _ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let next = Mutex(0)
    allAtOnce(threads) { _ in
        while true {
            let index = next.withLock { (value: inout Int) -> Int in
                defer { value += 1 }
                return value
            }
            guard index < count else { return }
            body(index)
        }
    }
}
