import BlockStore
import Device
import Foundation
import Keychain
import RecoveryHint
import AppWiring
import Sealing
import Platform

#if canImport(Glibc)
    import Glibc
#endif

/// A failure as the C boundary reports it: an `OSStatus`-style code and a message.
struct CFailure: Error {
    let status: Int32
    let message: String

    init(_ status: Int32, _ message: String) {
        self.status = status
        self.message = message
    }

    /// Any error of Keepsake's, as its product names it: the Keychain's (and the device's) as
    /// `OSStatus` (Apple's numbers), Block Store's as Google's status codes, the rest as
    /// `errSecParam` for bad input or `errSecNotAvailable`.
    init(_ error: any Error) {
        switch error {
        case let failure as CFailure: self = failure
        case let error as KeychainError: self.init(error.status.rawValue, error.description)
        case let error as DeviceError:
            let status = KeychainError(error)
            self.init(status.status.rawValue, status.description)
        case let error as BlockStoreError:
            self.init(Int32(error.code.rawValue ?? 8), error.description)
        case let error as OptionError: self.init(-50, error.description)
        case let error as HintError:
            // A payload that is not a hint is the caller's to fix (errSecParam); stores that
            // could not be reached are not.
            self.init(error.code == .allStoresFailed ? -25291 : -50, error.description)
        case let error as any KeepsakeError: self.init(-25291, error.description)
        default: self.init(-25291, "\(error)")
        }
    }
}

/// The largest string the boundary takes (a service, an account, a JSON payload).
let maximumString = 64 * 1024
/// The largest secret or Block Store value it takes.
let maximumBytes = 1 << 20

/// A C string in, checked: present (unless `optional`), UTF-8, at most `maximumString` bytes.
func string(_ pointer: UnsafePointer<CChar>?, _ name: String, optional: Bool = false)
    throws(CFailure) -> String?
{
    guard let pointer else {
        if optional { return nil }
        throw CFailure(-50, "\(name) is NULL")
    }
    let length = strnlen(pointer, maximumString + 1)
    guard length <= maximumString else {
        throw CFailure(-50, "\(name) is longer than \(maximumString) bytes")
    }
    let bytes = UnsafeRawBufferPointer(start: pointer, count: length)
    guard let text = String(validating: bytes, as: UTF8.self) else {
        throw CFailure(-50, "\(name) is not UTF-8")
    }
    return text
}

func required(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(CFailure) -> String {
    guard let text = try string(pointer, name) else { throw CFailure(-50, "\(name) is NULL") }
    return text
}

/// Bytes in, checked: present (a length of 0 may come with NULL), at most `maximumBytes`.
func bytes(_ pointer: UnsafePointer<UInt8>?, _ length: Int, _ name: String) throws(CFailure)
    -> Data
{
    guard length >= 0, length <= maximumBytes else {
        throw CFailure(-50, "\(name) is larger than \(maximumBytes) bytes")
    }
    if length == 0 { return Data() }
    guard let pointer else { throw CFailure(-50, "\(name) is NULL with a length") }
    return Data(bytes: pointer, count: length)
}

/// Bytes in (`bytes`), for the length of `body` only: the copy is wiped when `body` returns, so
/// no plaintext the caller gave is left in freed memory by the boundary.
@discardableResult
func withBytes<R>(
    _ pointer: UnsafePointer<UInt8>?, _ length: Int, _ name: String, _ body: (Data) throws -> R
) throws -> R {
    var data = try bytes(pointer, length, name)
    defer { data.wipe() }
    return try body(data)
}

/// A string out: malloc'd, NUL-terminated, freed with `keepsake_string_free`.
func cString(_ text: String) -> UnsafeMutablePointer<CChar>? { strdup(text) }

/// Bytes out: malloc'd, freed (and wiped) with `keepsake_secret_free`.
/// `data` (the boundary's own copy) is wiped once copied out, and on every failure.
func secretOut(
    _ data: inout Data, _ out: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
    _ length: UnsafeMutablePointer<Int>?
) throws(CFailure) {
    defer { data.wipe() }
    guard let out, let length else { throw CFailure(-50, "the output pointers are NULL") }
    let buffer = malloc(max(data.count, 1))!.assumingMemoryBound(to: UInt8.self)
    data.copyBytes(to: buffer, count: data.count)
    out.pointee = buffer
    length.pointee = data.count
}

/// Runs one call of the boundary: its failure becomes a status and, when `error` is given, a
/// message the caller frees; nothing is thrown across.
func boundary(
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ body: () throws -> Void
) -> Int32 {
    message?.pointee = nil
    do {
        try body()
        return 0
    } catch {
        let failure = CFailure(error)
        message?.pointee = cString(failure.message)
        return failure.status == 0 ? -25291 : failure.status
    }
}
