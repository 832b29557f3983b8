import Foundation

/// Runs a blocking call for an `async` caller on a thread of its own, so it never holds one of
/// Swift concurrency's cooperative threads (there are as many as cores: two blocked calls would
/// stall every task of the process on a two-core machine). Every `async` form of a blocking
/// Keepsake call goes through here. The call itself is bounded where it always is (the Secret
/// Service's timeout, the cloud's); cancelling the task does not interrupt it.
package func offThePool<R: Sendable, E: Error>(
    _ body: @escaping @Sendable () throws(E) -> R
) async throws(E) -> R {
    let result: Result<R, E> = await withCheckedContinuation { continuation in
        let thread = Thread {
            do throws(E) { continuation.resume(returning: .success(try body())) } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    return try result.get()
}
