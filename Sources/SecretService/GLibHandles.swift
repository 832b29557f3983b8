internal import CKeepsakeShims
import Foundation

/// Owns one `SecretService *` proxy (and through it the D-Bus connection and session).
final class ServiceHandle: @unchecked Sendable {
    // Sendable: GDBusProxy and libsecret's *_sync path calls are thread-safe; the pointer is
    // immutable after init and freed once in deinit.
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { keepsake_g_object_unref(UnsafeMutableRawPointer(pointer)) }
}

/// Owns the direct reads' connection (`KeepsakeReader *`, `reader.c`); closes it when released.
final class ReaderHandle: @unchecked Sendable {
    // Sendable: libdbus connections are thread-safe once dbus_threads_init_default ran (the
    // reader's open runs it); the pointer is immutable after init and freed once in deinit.
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { keepsake_reader_close(pointer) }
}

/// Owns one `GCancellable *`; `cancel()` may be called from the waiting caller's thread.
final class Cancellable: @unchecked Sendable {
    // Sendable: g_cancellable_cancel is documented thread-safe.
    let pointer: OpaquePointer
    init() { pointer = keepsake_g_cancellable_new() }
    func cancel() { keepsake_g_cancellable_cancel(pointer) }
    deinit { keepsake_g_object_unref(UnsafeMutableRawPointer(pointer)) }
}

/// Turns a `GError *` into a `SecretServiceError` and frees it.
func takeError(_ error: OpaquePointer?, during stage: Stage = .call)
    -> SecretServiceError
{
    guard let error else {
        return SecretServiceError(.failed, message: "libsecret failed without an error")
    }
    defer { keepsake_g_error_free(error) }
    let domain = String(cString: keepsake_error_domain(error))
    let message = keepsake_error_message(error).map { String(cString: $0) } ?? ""
    var dbusName: String?
    if let name = keepsake_error_dbus_name(error) {
        dbusName = String(cString: name)
        keepsake_g_free(name)
    }
    let errorCode = keepsake_error_code(error)
    let code = classify(
        domain: domain, code: errorCode, dbusName: dbusName, message: message, stage: stage)
    return SecretServiceError(
        code, message: message, domain: domain, errorCode: errorCode, dbusName: dbusName)
}

enum Stage { case connect, call }

private func classify(domain: String, code: Int32, dbusName: String?, message: String, stage: Stage)
    -> SecretServiceError.Code
{
    switch dbusName {
    case "org.freedesktop.Secret.Error.IsLocked": return .locked
    case "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod":
        return .noSuchObject
    case "org.freedesktop.DBus.Error.UnknownInterface":
        // KeePassXC's answer at the path of an item deleted a moment before: its object is gone.
        return message.contains("/org/freedesktop/secrets/collection/") ? .noSuchObject : .failed
    case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
        "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
        return .serviceUnavailable
    case "org.freedesktop.DBus.Error.InvalidArgs":
        // KWallet names a missing item this way.
        return message.contains("Can't find item") ? .noSuchObject : .invalidArgument
    default: break
    }
    if domain == "g-io-error-quark" {
        if code == Int32(KEEPSAKE_G_IO_ERROR_CANCELLED)
            || code == Int32(KEEPSAKE_G_IO_ERROR_TIMED_OUT)
        {
            return .timedOut
        }
        if code == Int32(KEEPSAKE_G_IO_ERROR_CLOSED) { return .serviceUnavailable }
    }
    if domain == "secret-error" {
        if code == Int32(KEEPSAKE_SECRET_ERROR_IS_LOCKED) { return .locked }
        if code == Int32(KEEPSAKE_SECRET_ERROR_NO_SUCH_OBJECT) { return .noSuchObject }
    }
    if message.contains("cannot open display") || message.contains("prompt") {
        return .promptRequired
    }
    return stage == .connect ? .noBus : .failed
}

/// Copies a NULL-terminated `gchar **` into Swift strings and frees it.
func takeStringArray(_ array: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
    guard let array else { return [] }
    defer { keepsake_g_strfreev(array) }
    var result: [String] = []
    var index = 0
    while let element = array[index] {
        result.append(String(cString: element))
        index += 1
    }
    return result
}

/// Calls `body` with a C array of C strings that lives for the duration of the call.
func withCStringArray<R>(
    _ strings: [String], nullTerminated: Bool = true,
    _ body: (UnsafePointer<UnsafePointer<CChar>?>) throws -> R
) rethrows -> R {
    let duplicates = strings.map { UnsafePointer(strdup($0)) }
    defer { duplicates.forEach { free(UnsafeMutablePointer(mutating: $0)) } }
    let array: [UnsafePointer<CChar>?] = duplicates + (nullTerminated ? [nil] : [])
    return try array.withUnsafeBufferPointer { try body($0.baseAddress!) }
}

/// `attributes` as the shims take them: a count and two NULL-terminated C arrays of keys and
/// values, in matching order.
func withAttributeArrays<R>(
    _ attributes: [String: String],
    _ body: (UInt32, UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>)
        throws -> R
) rethrows -> R {
    let keys = Array(attributes.keys)
    return try withCStringArray(keys) { k in
        try withCStringArray(keys.map { attributes[$0]! }) { v in
            try body(UInt32(keys.count), k, v)
        }
    }
}

/// A value handed between threads whose safety the code around it ensures.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// What a bounded call's worker thread brings back, or drops when the caller has given up.
final class Outcome<R>: @unchecked Sendable {
    // Sendable: every field is read and written under `lock`.
    private let lock = NSLock()
    private var result: R?
    private var error: OpaquePointer?
    private var finished = false
    private var abandoned = false
    private let discard: @Sendable (R) -> Void

    init(discard: @escaping @Sendable (R) -> Void) { self.discard = discard }

    /// The worker's result; dropped (and its error freed) when the caller already left.
    func finish(_ result: R?, _ error: OpaquePointer?) {
        let drop = lock.withLock { () -> Bool in
            if abandoned { return true }
            (self.result, self.error, finished) = (result, error, true)
            return false
        }
        if drop {
            if let result { discard(result) }
            if let error { keepsake_g_error_free(error) }
        }
    }

    func take() -> (result: R?, error: OpaquePointer?) {
        lock.withLock { (result, error) }
    }

    /// Gives up on the worker: nil, unless it finished in the meantime (then its outcome).
    func abandon() -> (result: R?, error: OpaquePointer?)? {
        lock.withLock {
            if finished { return (result, error) }
            abandoned = true
            return nil
        }
    }
}
