import Foundation
import Synchronization

/// The threads Keepsake's blocking calls run on for an `async` caller: a bounded pool of its own
/// (as swift-nio's `NIOThreadPool`), so a call never holds one of Swift concurrency's cooperative
/// threads (there are as many as cores: two blocked calls would stall every task of the process
/// on a two-core machine), and a burst of calls never makes a thread each. At most `size` run at
/// once; the rest wait their turn in order. Each call is bounded where it always is (the Secret
/// Service's timeout, the cloud's), so a worker always comes back.
package final class BlockingPool: Sendable {
    /// The process's pool: 16 workers, started as they are first needed.
    package static let shared = BlockingPool(size: 16)

    private struct State {
        var waiting: [@Sendable () -> Void] = []
        var workers = 0
        var idle = 0
    }

    private let size: Int
    private let state = Mutex(State())
    private let ready = DispatchSemaphore(value: 0)

    package init(size: Int) {
        precondition(size > 0)
        self.size = size
    }

    /// Runs `work` on a worker of the pool.
    package func run(_ work: @escaping @Sendable () -> Void) {
        enum Next { case wake, start, queued }
        let next = state.withLock { state -> Next in
            state.waiting.append(work)
            if state.idle > 0 {
                state.idle -= 1
                return .wake
            }
            guard state.workers < size else { return .queued }  // a busy worker takes it next
            state.workers += 1
            return .start
        }
        switch next {
        case .wake: ready.signal()
        case .start:
            let thread = Thread { [self] in serve() }
            thread.stackSize = 1 << 20
            thread.start()
        case .queued: break
        }
    }

    /// A worker: runs what waits, then sleeps until more comes.
    private func serve() {
        while true {
            let next = state.withLock { state -> (@Sendable () -> Void)? in
                state.waiting.isEmpty ? nil : state.waiting.removeFirst()
            }
            if let next {
                next()
                continue
            }
            let sleeps = state.withLock { state -> Bool in
                // Work that came meanwhile is taken at once; otherwise this worker is idle.
                guard state.waiting.isEmpty else { return false }
                state.idle += 1
                return true
            }
            if sleeps { ready.wait() }
        }
    }
}

/// Runs a blocking call for an `async` caller on the pool (`BlockingPool.shared`). Every `async`
/// form of a blocking Keepsake call goes through here; cancelling the task does not interrupt the
/// call.
package func offThePool<R: Sendable, E: Error>(
    _ body: @escaping @Sendable () throws(E) -> R
) async throws(E) -> R {
    let result: Result<R, E> = await withCheckedContinuation { continuation in
        BlockingPool.shared.run {
            do throws(E) { continuation.resume(returning: .success(try body())) } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}
