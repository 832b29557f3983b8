internal import CSodium
import Foundation
import Synchronization

/// Key material in memory the project owns: allocated with `sodium_malloc` (guard pages, locked
/// against swapping), wiped with `sodium_memzero` when released, reachable only inside
/// `withUnsafeBytes`. Compared in constant time.
///
/// Copies escape only where a caller asks for one (`init(copying:)` reads from a `Data`, and
/// `unsafeData()` hands one out); both say so.
public final class SecureBytes: @unchecked Sendable, Equatable {
    // Sendable: the buffer is written only in init; afterwards it is read-only until deinit.
    private let pointer: UnsafeMutableRawPointer
    public let count: Int

    /// `count` random bytes (`randombytes_buf`).
    public init(randomCount count: Int) {
        Sodium.initialize()
        self.count = count
        pointer = sodium_malloc(max(count, 1))!
        randombytes_buf(pointer, count)
    }

    /// Takes `count` bytes written by `fill` into the owned buffer.
    public init(count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        Sodium.initialize()
        self.count = count
        pointer = sodium_malloc(max(count, 1))!
        do {
            try fill(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            sodium_memzero(pointer, count)
            sodium_free(pointer)
            throw error
        }
    }

    /// Copies `bytes` in. The caller's `bytes` is an ordinary copy it remains responsible for.
    public convenience init(copying bytes: some DataProtocol) {
        let array = Array(bytes)
        self.init(count: array.count) { buffer in
            array.withUnsafeBytes { buffer.copyMemory(from: $0) }
        }
    }

    deinit {
        sodium_memzero(pointer, count)
        SecureBytes.releaseObserver.withLock { $0 }?(
            UnsafeRawBufferPointer(start: pointer, count: count))
        sodium_free(pointer)
    }

    /// Test hook: sees each buffer after it was wiped and before it is freed, so a test can check
    /// the wipe. Internal; nil outside tests.
    static let releaseObserver = Mutex<(@Sendable (UnsafeRawBufferPointer) -> Void)?>(nil)

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// An ordinary `Data` copy, for storing wrapped or public values. The copy is not wiped.
    public func unsafeData() -> Data { Data(bytes: pointer, count: count) }

    /// Constant-time comparison (`sodium_memcmp`).
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        lhs.count == rhs.count && sodium_memcmp(lhs.pointer, rhs.pointer, lhs.count) == 0
    }
}

/// libsodium's one-time initialization.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0
    static func initialize() { precondition(initialized, "libsodium failed to initialize") }
}

/// Constant-time comparison of two byte strings (`sodium_memcmp`).
public func constantTimeEquals(_ a: some DataProtocol, _ b: some DataProtocol) -> Bool {
    let (x, y) = (Array(a), Array(b))
    guard x.count == y.count else { return false }
    return x.withUnsafeBytes { xb in
        y.withUnsafeBytes { yb in sodium_memcmp(xb.baseAddress, yb.baseAddress, x.count) == 0 }
    }
}
