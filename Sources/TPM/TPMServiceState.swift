internal import CKeepsakeTPMShims
import Foundation
import Sealing

/// A service's own state in a TPM that only the service reaches (`keepsake-escrow --tpm`): a
/// 32-byte state key in an NV index, and an NV counter that only goes up — the service's files
/// are sealed under the key (useless without this TPM) and carry the counter's value (an older
/// copy of them is refused).
///
/// Every command runs in one HMAC session salted to the TPM's owner storage key (its name is
/// kept and checked at every start: another TPM, or a relay answering for one, is refused) and
/// encrypting the key's bytes both ways, so nothing secret crosses the TPM connection in clear
/// and no response can be forged or replayed by whoever sits on it.
package final class TPMServiceState: @unchecked Sendable {
    // @unchecked Sendable: the context and session are used only under `lock`.

    /// What a service keeps to find its state again (no secret: `authorization` opens the key
    /// index only on this TPM, through the session).
    package struct Handles: Codable, Sendable, Equatable {
        package var keyIndex: UInt32
        package var counterIndex: UInt32
        package var authorization: Data
        /// The TPM's owner storage key's name, which the session is salted to.
        package var storageKeyName: Data
        /// The counter's value when the state was made.
        package var initialCount: UInt64
    }

    package let tcti: String
    package let handles: Handles
    /// Whether the TPM is a software one (swtpm, a simulator), and its vendor, as it says.
    package let kind: String
    private let lock = NSLock()
    private var connection: (context: TPMContext, session: UInt32)?

    /// Opens the state that `handles` name on the TPM at `tcti`, or makes a new one (`handles`
    /// nil): a random key, a new counter.
    package init(tcti: String, handles: Handles?) throws(TPMError) {
        self.tcti = tcti
        // Read from the service's own files: a storage key's name is 2 + a digest (never empty,
        // at most 64 bytes), an authorization at most a SHA-256 digest; anything else is refused
        // rather than taken as "any key".
        if let handles,
            !(1...64).contains(handles.storageKeyName.count) || handles.authorization.count > 32
        {
            throw TPMError(.failed, "the service's TPM state record does not decode")
        }
        let context = try TPMContext(tcti: tcti)
        var name = [UInt8](repeating: 0, count: 64)
        var nameSize = 0
        if let expected = handles?.storageKeyName {
            name.replaceSubrange(0..<expected.count, with: expected)
            nameSize = expected.count
        }
        var session: UInt32 = 0
        let rc = context.runUnchecked {
            keepsake_tpm_salted_session($0, &name, &nameSize, &session)
        }
        guard rc == 0 else {
            // TPM2_RC_KEY (a format-one code): not the storage key this state was made with.
            if rc == 0x9C {
                throw TPMError(
                    .failed,
                    "the TPM at \(tcti) is not the one this state was made on (its storage key differs)",
                    rc: rc)
            }
            throw TPMError(rc: rc, "CreatePrimary / StartAuthSession (salted)")
        }
        connection = (context, session)
        kind = context.kind(tcti: tcti)
        if let handles {
            self.handles = handles
        } else {
            let authorization = KeyDerivation.randomBytes(32)
            let key = SecureBytes(count: 32) { KeyDerivation.randomFill($0) }
            let keyIndex = try TPMPasscodeSlot.define("state key") { index throws(TPMError) in
                try context.run("NV_DefineSpace(state key)") { c in
                    authorization.withUnsafeBytes { auth in
                        key.withUnsafeBytes { bytes in
                            keepsake_tpm_state_define(
                                c, session, index, auth.bindMemory(to: UInt8.self).baseAddress,
                                auth.count, bytes.bindMemory(to: UInt8.self).baseAddress,
                                bytes.count)
                        }
                    }
                }
            }
            let counterIndex = try TPMPasscodeSlot.define("counter") { index throws(TPMError) in
                try context.run("NV_DefineSpace(counter)") {
                    keepsake_tpm_state_counter_define($0, session, index)
                }
            }
            var count: UInt64 = 0
            try context.run("NV_Read(counter)") {
                keepsake_tpm_state_counter_read($0, session, counterIndex, &count)
            }
            self.handles = Handles(
                keyIndex: keyIndex, counterIndex: counterIndex, authorization: authorization,
                storageKeyName: Data(name[0..<nameSize]), initialCount: count)
        }
    }

    deinit {
        if let connection { keepsake_tpm_flush_session(connection) }
    }

    /// The state key, read through the session with the response encrypted.
    package func stateKey() throws(TPMError) -> SecureBytes {
        var key: SecureBytes?
        let rc = try withSession(retrying: true) { context, session throws(TPMError) in
            var rc: UInt32 = 0
            let read = SecureBytes(count: 32) { out in
                rc = handles.authorization.withUnsafeBytes { auth in
                    context.runUnchecked {
                        keepsake_tpm_state_read(
                            $0, session, handles.keyIndex,
                            auth.bindMemory(to: UInt8.self).baseAddress, auth.count,
                            out.bindMemory(to: UInt8.self).baseAddress, out.count)
                    }
                }
            }
            if rc == 0 { key = read }
            return rc
        }
        guard rc == 0, let key else { throw Self.missing(rc, "NV_Read(state key)", tcti) }
        return key
    }

    /// The counter's value.
    package func count() throws(TPMError) -> UInt64 {
        var value: UInt64 = 0
        let rc = try withSession(retrying: true) { context, session throws(TPMError) in
            context.runUnchecked {
                keepsake_tpm_state_counter_read($0, session, handles.counterIndex, &value)
            }
        }
        guard rc == 0 else { throw Self.missing(rc, "NV_Read(counter)", tcti) }
        return value
    }

    /// Adds one to the counter. Never retried here: a lost answer leaves the caller to read the
    /// counter and see whether it went up.
    package func increment() throws(TPMError) {
        let rc = try withSession(retrying: false) { context, session throws(TPMError) in
            context.runUnchecked {
                keepsake_tpm_state_counter_increment($0, session, handles.counterIndex)
            }
        }
        guard rc == 0 else { throw Self.missing(rc, "NV_Increment(counter)", tcti) }
    }

    /// Runs `body` (a shim's response code) with the context and session. A connection that
    /// failed (the TPM restarted: its socket and session are gone) is made again first, checking
    /// the storage key again; a read (`retrying`) that fails is tried once more on a new one.
    private func withSession(
        retrying: Bool, _ body: (TPMContext, UInt32) throws(TPMError) -> UInt32
    ) throws(TPMError) -> UInt32 {
        lock.lock()
        defer { lock.unlock() }
        var tries = retrying ? 2 : 1
        while true {
            tries -= 1
            if connection == nil {
                do throws(TPMError) {
                    connection = try connect()
                } catch  where tries > 0 {
                    continue
                }
            }
            let (context, session) = connection!
            let rc = try body(context, session)
            if rc == 0 { return 0 }
            // Whatever failed, the next command starts on a new connection and session.
            connection = nil
            if tries == 0 { return rc }
        }
    }

    private func connect() throws(TPMError) -> (TPMContext, UInt32) {
        let context = try TPMContext(tcti: tcti)
        var name = [UInt8](repeating: 0, count: 64)
        name.replaceSubrange(0..<handles.storageKeyName.count, with: handles.storageKeyName)
        var nameSize = handles.storageKeyName.count
        var session: UInt32 = 0
        let rc = context.runUnchecked {
            keepsake_tpm_salted_session($0, &name, &nameSize, &session)
        }
        guard rc == 0 else { throw TPMError(rc: rc, "StartAuthSession (salted)") }
        return (context, session)
    }

    private static func missing(_ rc: UInt32, _ what: String, _ tcti: String) -> TPMError {
        // TPM_RC_HANDLE (0x8B) / TPM_RC_NV_UNINITIALIZED: the index is not there.
        let base = keepsake_tpm_rc_base(rc)
        if base == 0x08B || base == 0x14A {
            return TPMError(
                .failed,
                "the TPM at \(tcti) does not hold this state (cleared, or another TPM): \(what)",
                rc: rc)
        }
        return TPMError(rc: rc, what)
    }
}

private func keepsake_tpm_flush_session(_ connection: (context: TPMContext, session: UInt32)) {
    _ = connection.context.runUnchecked {
        keepsake_tpm_flush($0, connection.session)
        return 0
    }
}
