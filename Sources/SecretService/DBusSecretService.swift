internal import CKeepsakeShims
import Dispatch
import Foundation
import Synchronization
import Platform

/// The Secret Service on a D-Bus session bus: writes through libsecret (GDBus), reads through
/// libdbus directly (`reader.c`), every call bounded by `timeout` — a missing, hung
/// (SIGSTOPped) or dying daemon yields a typed `SecretServiceError` within the bound, never a
/// hang — and reopened once when the daemon restarted under it. The conformer of
/// `SecretServiceBackend` every shipped connection uses; the `SecretServiceConnection` in front
/// of it has checked each call's arguments.
package final class DBusSecretService: SecretServiceBackend {
    /// The bus; nil when there is none to be found (every call then says so).
    package let busAddress: String?
    /// The bound on every call.
    package let timeout: Duration

    /// libsecret's connection (GDBus), for writes, sessions for writes and prompts: opened at
    /// the first write.
    private let handle = Mutex<ServiceHandle?>(nil)
    /// The direct reads' connection (libdbus, `reader.c`): opened at the first read. A process
    /// that only reads (an app's first screen, `keepsake keychain get`) never starts GDBus.
    private let readerHandle = Mutex<ReaderHandle?>(nil)

    package init(busAddress: String?, timeout: Duration) {
        self.busAddress = busAddress
        self.timeout = timeout
    }

    private var timeoutMilliseconds: Int32 {
        let (seconds, attoseconds) = timeout.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    // MARK: - Bounded calls

    #if KEEPSAKE_TEST_HOOKS
        /// Test hook (debug builds only): runs on the worker thread before each call, so a test
        /// can hold a call where cancellation does not reach (as libsecret inside a prompt's main
        /// loop would) and show the bound holds anyway. This connection's calls only: a hook for
        /// the whole process stalled every other test's calls running meanwhile.
        package let stallHook = Mutex<(@Sendable () -> Void)?>(nil)
    #endif

    #if KEEPSAKE_TEST_HOOKS
        /// Test hook (debug builds only): this many of the next secrets written go under a
        /// session the provider never opened — what a provider that lost the connection's
        /// session answers (kwalletd after a restart, or KF5's DH key one byte short, KDE bug
        /// 514194: "Can't find session" after its CreateItem registered the item), so a test
        /// shows such a write retried whole.
        package let unknownSessionWrites = Mutex(0)
    #endif

    /// The session a secret is written under: nil, the connection's own plain session.
    func sessionForWrite() -> String? {
        #if KEEPSAKE_TEST_HOOKS
            let unknown = unknownSessionWrites.withLock { count in
                guard count > 0 else { return false }
                count -= 1
                return true
            }
            if unknown { return "/org/freedesktop/secrets/session/keepsake_never_opened" }
        #endif
        return nil
    }

    /// How long past the bound a call may take to come back from its cancellation before it is
    /// abandoned.
    package static let grace: Duration = .milliseconds(250)

    /// Runs `body` on a worker thread with a cancellable that is cancelled when the bound passes,
    /// and waits at most the bound plus `grace`. Usually the cancellation ends the call;
    /// one that is still running then (libsecret blocked in a main loop, a provider that never
    /// answers in a way GDBus notices) is abandoned: the caller gets `nil` at once, the thread
    /// finishes on its own whenever it does, and what it then brings back is dropped
    /// (`discard`). `body` owns everything it uses: nothing of the caller's frame.
    private func bounded<R>(
        discard: @escaping @Sendable (R) -> Void = { _ in },
        _ body:
            @escaping (OpaquePointer, inout OpaquePointer?)
            -> R?
    ) -> (result: R?, error: OpaquePointer?)? {
        let cancellable = Cancellable()
        let outcome = Outcome<R>(discard: discard)
        let work = Unchecked(body)
        let done = DispatchSemaphore(value: 0)
        #if KEEPSAKE_TEST_HOOKS
            let stall = stallHook.withLock { $0 }
        #endif
        DispatchQueue.global().async {
            #if KEEPSAKE_TEST_HOOKS
                // Fault injection: a call stuck where no cancellation reaches it.
                stall?()
            #endif
            var error: OpaquePointer?
            let result = work.value(cancellable.pointer, &error)
            outcome.finish(result, error)
            done.signal()
        }
        // The caller is the watchdog: at the bound it cancels, after the grace it abandons (no
        // timer on another thread for each call, which would cost a fair share of a round trip).
        let bound = DispatchTime.now() + .milliseconds(Int(timeoutMilliseconds))
        if done.wait(timeout: bound) == .timedOut {
            cancellable.cancel()
            let graceMilliseconds = Int(Self.grace.components.attoseconds / 1_000_000_000_000_000)
            if done.wait(timeout: bound + .milliseconds(graceMilliseconds)) == .timedOut {
                if let late = outcome.abandon() { return late }
                return nil
            }
        }
        return outcome.take()
    }

    private func service() throws(SecretServiceError) -> ServiceHandle {
        try cached(handle, opening: open)
    }

    private func reader() throws(SecretServiceError) -> ReaderHandle {
        try cached(readerHandle) { () throws(SecretServiceError) in
            ReaderHandle(
                try connect(discard: { keepsake_reader_close($0.value) }) {
                    address, milliseconds, _, error in
                    keepsake_reader_open(address, milliseconds, &error)
                })
        }
    }

    /// The connection in `slot`, opened with `open` when there is none yet (two threads that
    /// open at once keep the first one stored).
    private func cached<Handle: AnyObject & Sendable>(
        _ slot: borrowing Mutex<Handle?>, opening open: () throws(SecretServiceError) -> Handle
    ) throws(SecretServiceError) -> Handle {
        if let existing = slot.withLock({ $0 }) { return existing }
        let opened = try open()
        return slot.withLock { current in
            if let current { return current }
            current = opened
            return opened
        }
    }

    /// The bus address, or the error that says there is none.
    private func address() throws(SecretServiceError) -> String {
        guard let address = busAddress, !address.isEmpty else {
            throw SecretServiceError(
                .noBus,
                message:
                    "DBUS_SESSION_BUS_ADDRESS is not set and there is no user bus at $XDG_RUNTIME_DIR/bus: start a session bus (docs/running.md, \"Headless\")"
            )
        }
        return address
    }

    private func open() throws(SecretServiceError) -> ServiceHandle {
        ServiceHandle(
            try connect(discard: { keepsake_g_object_unref(UnsafeMutableRawPointer($0.value)) }) {
                address, milliseconds, cancellable, error in
                keepsake_service_open(address, milliseconds, cancellable, &error)
            })
    }

    /// Opens a connection to the bus with `body` (given the address, the bound in milliseconds, a
    /// cancellable and an error to fill) within the bound (`bounded`); one that comes back after
    /// it was abandoned is `discard`ed.
    private func connect<Pointer>(
        discard: @escaping @Sendable (Unchecked<Pointer>) -> Void,
        _ body:
            @escaping (
                String, Int32, OpaquePointer,
                inout OpaquePointer?
            ) -> Pointer?
    ) throws(SecretServiceError) -> Pointer {
        // libsecret and GIO are loaded here, at the first connection, not at start-up.
        if let failure = keepsake_shims_load() {
            throw SecretServiceError(.serviceUnavailable, message: String(cString: failure))
        }
        let address = try address()
        let milliseconds = timeoutMilliseconds
        guard
            let (pointer, error) = bounded(
                discard: discard,
                { cancellable, error in
                    body(address, milliseconds, cancellable, &error).map(Unchecked.init)
                })
        else { throw abandoned(during: "connecting") }
        guard let pointer else {
            // A bus that answers but has nobody owning the name is "unavailable", not "no bus".
            throw takeError(error, during: .connect)
        }
        return pointer.value
    }

    /// Forgets the cached proxy so the next call reconnects (after a daemon restart).
    package func reset() {
        handle.withLock { $0 = nil }
        readerHandle.withLock { $0 = nil }
    }

    /// Runs one call; when the daemon went away and came back (its session is gone), reconnects
    /// once and retries.
    ///
    /// Everything through libsecret goes to `bounded`.
    func call<R>(
        retrying: Bool = true, rejectedOnly: Bool = false,
        beforeRetry: (SecretServiceError) -> Void = { _ in },
        _ body:
            @escaping (
                OpaquePointer, OpaquePointer?,
                inout OpaquePointer?
            )
            -> R?
    ) throws(SecretServiceError) -> R {
        let service = try service()
        /// The next call builds a new connection.
        func dropConnection() { handle.withLock { if $0 === service { $0 = nil } } }
        let outcome = bounded({ cancellable, error in body(service.pointer, cancellable, &error) })
        guard let (result, error) = outcome else {
            // Abandoned: the connection may be wedged (a main loop that never ends, a reply that
            // never comes).
            dropConnection()
            throw abandoned(during: "a call")
        }
        if let result { return result }
        let failure = failed(error)
        if retrying, Self.isAliasMiss(failure) {
            // Not carried out (the collection the alias named was not there to act on), so even
            // a create may go again: once more, a moment later.
            usleep(50_000)
            return try call(retrying: false, body)
        }
        // A call the daemon rejected for a session it no longer knows was not carried out, so
        // even a create may go again; one that met a vanished daemon may have been (`rejectedOnly`).
        guard retrying, Self.isStaleSession(failure),
            !rejectedOnly || failure.code != .serviceUnavailable
        else { throw failure }
        dropConnection()
        beforeRetry(failure)
        return try call(retrying: false, body)
    }

    /// Runs one read over the reading connection (`reader.c`: no libsecret, no prompt, no
    /// cancellable) carrying the bound as its libdbus timeout, which ends the wait on the
    /// caller's own thread whatever the provider does, so the read needs no worker thread of
    /// ours, and its I/O is done on the caller's thread too (GDBus hands every call to its worker
    /// thread and back: CPU on every round trip). Reconnects once when the daemon
    /// restarted under it.
    func read<R>(
        retrying: Bool = true, _ body: (OpaquePointer, inout OpaquePointer?) -> R?
    ) throws(SecretServiceError) -> R {
        let reader = try reader()
        func dropReader() { readerHandle.withLock { if $0 === reader { $0 = nil } } }
        var error: OpaquePointer?
        if let result = body(reader.pointer, &error) { return result }
        let failure = failed(error)
        if failure.code == .timedOut {
            // Ended by its libdbus timeout: the provider did not answer within the bound, as for
            // an abandoned call.
            dropReader()
            throw failure
        }
        if retrying, Self.isAliasMiss(failure) {
            usleep(50_000)
            return try read(retrying: false, body)
        }
        guard retrying, Self.isStaleSession(failure) else { throw failure }
        dropReader()
        return try read(retrying: false, body)
    }

    /// A failed call's error, a timeout said as one.
    private func failed(_ error: OpaquePointer?) -> SecretServiceError {
        let failure = takeError(error)
        guard failure.code == .timedOut else { return failure }
        // GLib says "Operation was cancelled" or "Timeout was reached": say what happened.
        return SecretServiceError(
            .timedOut, message: "the Secret Service did not answer within \(boundText)",
            domain: failure.domain, errorCode: failure.errorCode, dbusName: failure.dbusName)
    }

    private func abandoned(during what: String) -> SecretServiceError {
        SecretServiceError(
            .timedOut,
            message:
                "the Secret Service did not answer within \(boundText) (\(what), not even once cancelled): abandoned"
        )
    }

    /// The bound as a person reads it: "5 s", "800 ms".
    private var boundText: String {
        let milliseconds = timeoutMilliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }

    /// gnome-keyring now and then resolves the `default` alias, for one call, to a collection
    /// that is not there (a path of random-looking bytes: "Object does not exist at path
    /// …/collection/C_1c_f0I_acU"), then answers the same call right the next moment — about one
    /// run in twenty of the SecItem suites met it. A call so answered did nothing, and is made
    /// once more.
    package static func isAliasMiss(_ error: SecretServiceError) -> Bool {
        let prefix = "Object does not exist at path \u{201C}/org/freedesktop/secrets/collection/"
        guard error.code == .noSuchObject, let start = error.message.range(of: prefix) else {
            return false
        }
        // A collection's path (no item below it: an item that is gone is no alias miss).
        let named = error.message[start.upperBound...].prefix { $0 != "\u{201D}" }
        return !named.isEmpty && !named.contains("/")
    }

    /// KWallet's answer to a secret under a session it does not have or cannot use ("Can't find
    /// session …", Qt's InvalidObjectPath: after kwalletd restarted, or under a DH session whose
    /// key KF5 derived one byte short, KDE bug 514194 — Keepsake's writes use plain sessions, so
    /// only the first is left), given only after a CreateItem registered its item: a create then
    /// half happened.
    static func isKWalletSessionRejection(_ error: SecretServiceError) -> Bool {
        error.dbusName == "org.qtproject.QtDBus.Error.InvalidObjectPath"
            && error.message.contains("session")
    }

    private static func isStaleSession(_ error: SecretServiceError) -> Bool {
        if error.code == .serviceUnavailable { return true }
        // gnome-keyring answers a call under a session it no longer knows with NoSession or an
        // unknown-object error naming the session path.
        // KWallet answers with Qt's InvalidObjectPath ("Can't find session …").
        return error.dbusName == "org.freedesktop.Secret.Error.NoSession"
            || (error.code == .noSuchObject && error.message.contains("session"))
            || (error.dbusName == "org.qtproject.QtDBus.Error.InvalidObjectPath"
                && error.message.contains("session"))
    }
}
