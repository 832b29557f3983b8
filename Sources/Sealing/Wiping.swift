internal import CSodium
import Foundation

extension Data {
    /// Overwrites these bytes with zeros in place: for a plaintext copy this code made and is
    /// done with, so that freed memory keeps none of it. (Where the storage is shared, the write
    /// goes to a fresh copy and the shared bytes stay: call it on copies no one else holds.)
    package mutating func wipe() {
        withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { sodium_memzero(base, buffer.count) }
        }
    }
}

extension Data {
    /// Overwrites the bytes this value shares with every copy of it, in place: for the last use
    /// of plaintext that several of this code's own values hold (an item's old secret, in the
    /// records an update read). Never on bytes anything may still read.
    package func wipeShared() {
        withUnsafeBytes { buffer in
            if let base = buffer.baseAddress {
                sodium_memzero(UnsafeMutableRawPointer(mutating: base), buffer.count)
            }
        }
    }
}

/// `bytes` as a `Data` for the length of `body`, wiped when it returns: for a plaintext that is
/// decoded at once (whatever `body` keeps, it must copy).
package func withTransientData<R, E: Error>(
    _ bytes: UnsafeRawBufferPointer, _ body: (Data) throws(E) -> R
) throws(E) -> R {
    var data = Data(bytes)
    defer { data.wipe() }
    return try body(data)
}
