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
    /// The number of bytes held.
    public let count: Int

    /// `count` random bytes (`randombytes_buf`).
    public init(randomCount count: Int) {
        Sodium.initialize()
        self.count = count
        pointer = sodium_malloc(max(count, 1))!
        randombytes_buf(pointer, count)
    }

    /// Takes `count` bytes written by `fill` into the owned buffer.
    ///
    /// The buffer is released in exactly one place for each outcome: here when `fill` throws
    /// (the object never finishes initializing, so `deinit` does not run), else in `deinit`.
    public init(count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        Sodium.initialize()
        precondition(count >= 0, "a negative byte count")
        let buffer = sodium_malloc(max(count, 1))!
        do {
            try fill(UnsafeMutableRawBufferPointer(start: buffer, count: count))
        } catch {
            Self.release(buffer, count: count)
            throw error
        }
        pointer = buffer
        self.count = count
    }

    /// Copies `bytes` in, without an intermediate copy when `bytes` is contiguous (Data,
    /// [UInt8]); otherwise through a temporary that is wiped. The caller's `bytes` is an ordinary
    /// copy it remains responsible for.
    public convenience init(copying bytes: some DataProtocol) {
        self.init(count: bytes.count) { buffer in
            withWipedContiguousBytes(bytes) { buffer.copyMemory(from: $0) }
        }
    }

    deinit { Self.release(pointer, count: count) }

    /// Wipes and frees a buffer of ours: the one place key memory goes back.
    private static func release(_ pointer: UnsafeMutableRawPointer, count: Int) {
        sodium_memzero(pointer, count)
        #if KEEPSAKE_TEST_HOOKS
            releaseObserver.withLock { $0 }?(UnsafeRawBufferPointer(start: pointer, count: count))
        #endif
        sodium_free(pointer)
    }

    #if KEEPSAKE_TEST_HOOKS
        /// Test hook (debug builds only): sees each buffer after it was wiped and before it is freed,
        /// so a test can check the wipe. nil outside tests.
        package static let releaseObserver = Mutex<(@Sendable (UnsafeRawBufferPointer) -> Void)?>(
            nil)
    #endif

    /// Runs `body` with the owned bytes: the pointer is valid only inside `body`, and whatever
    /// `body` copies out is the caller's to wipe.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// An ordinary `Data` copy, for storing wrapped or public values. The copy is not wiped.
    package func unsafeData() -> Data { Data(bytes: pointer, count: count) }

    /// Constant-time comparison (`sodium_memcmp`).
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        lhs.count == rhs.count && sodium_memcmp(lhs.pointer, rhs.pointer, lhs.count) == 0
    }
}

extension UnsafeRawBufferPointer {
    /// The buffer's first byte as libsodium takes it (`const unsigned char *`); the buffer is never
    /// empty (every one of Sealing's buffers has a fixed, non-zero length).
    var bytePointer: UnsafePointer<UInt8> { bindMemory(to: UInt8.self).baseAddress! }
}

extension UnsafeMutableRawBufferPointer {
    /// The buffer's first byte as libsodium takes it (`unsigned char *`); never empty.
    var bytePointer: UnsafeMutablePointer<UInt8> { bindMemory(to: UInt8.self).baseAddress! }
}

/// libsodium's one-time initialization.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0
    static func initialize() { precondition(initialized, "libsodium failed to initialize") }

    /// The key pair `derive` (a `crypto_*_seed_keypair`) makes from a seed of `seedLength` bytes:
    /// the public key as data, the secret key in owned memory.
    static func seededKeyPair(
        _ seed: SecureBytes, seedLength: Int, publicKeyLength: Int, secretKeyLength: Int,
        _ derive: (
            UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt8>, UnsafePointer<UInt8>
        ) -> Int32
    ) -> (publicKey: Data, secretKey: SecureBytes) {
        initialize()
        precondition(seed.count == seedLength, "a key-pair seed is \(seedLength) bytes")
        var publicKey = Data(count: publicKeyLength)
        let secretKey = SecureBytes(count: secretKeyLength) { secret in
            publicKey.withUnsafeMutableBytes { pk in
                seed.withUnsafeBytes { s in
                    _ = derive(pk.bytePointer, secret.bytePointer, s.bytePointer)
                }
            }
        }
        return (publicKey, secretKey)
    }
}

/// Constant-time comparison of two byte strings (`sodium_memcmp`), in place (no copies of
/// either unless one is not contiguous, and then a wiped one).
package func constantTimeEquals(_ a: some DataProtocol, _ b: some DataProtocol) -> Bool {
    guard a.count == b.count else { return false }
    return withWipedContiguousBytes(a) { x in
        withWipedContiguousBytes(b) { y in
            x.count == 0 || sodium_memcmp(x.baseAddress, y.baseAddress, x.count) == 0
        }
    }
}

/// `bytes` as one contiguous buffer: in place when it is contiguous, else copied into owned
/// memory that is wiped afterwards — so no unwiped copy of key bytes is left behind.
func withWipedContiguousBytes<R>(
    _ bytes: some DataProtocol, _ body: (UnsafeRawBufferPointer) throws -> R
) rethrows -> R {
    if let result = try bytes.withContiguousStorageIfAvailable({
        try body(UnsafeRawBufferPointer($0))
    }) {
        return result
    }
    let count = bytes.count
    let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 1)
    defer {
        sodium_memzero(copy.baseAddress, count)
        copy.deallocate()
    }
    _ = copy.initializeMemory(as: UInt8.self, from: bytes)
    return try body(UnsafeRawBufferPointer(start: copy.baseAddress, count: count))
}

/// Wipes `count` bytes at `pointer` (`sodium_memzero`): for key bytes a C library handed out.
package func wipeMemory(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
    sodium_memzero(pointer, count)
}

extension SecureBytes: ExpressibleByStringLiteral {
    /// A literal's UTF-8 bytes (`"4711"` as a test passcode). A literal is in the program's own
    /// text, so this makes no secret a `String` that was not one already; passcodes typed by a
    /// person arrive as bytes (`init(copying:)`, the command line's standard input).
    public convenience init(stringLiteral value: StaticString) {
        self.init(count: value.utf8CodeUnitCount) { buffer in
            buffer.copyMemory(
                from: UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount)
            )
        }
    }
}
