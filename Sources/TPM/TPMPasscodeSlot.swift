internal import CKeepsakeTPMShims
import Foundation
import Sealing

/// A passcode slot in the TPM: the secret is released only to the right authorization, only
/// while fewer than `limit` attempts were counted since the last right one, and each attempt is
/// counted in the TPM **before** it is checked.
///
/// The counting no process of the user can undo: the counter only goes up (undefining and
/// redefining it starts it at the TPM's highest count), and the secret's policy reads it. A caller
/// that skips the increment and tries authorizations directly is counted by the TPM's own
/// dictionary-attack protection instead: the secret index is DA-protected (see SECURITY.md, "Lock
/// screen", for why that must be so and what it costs).
package enum TPMPasscodeSlot {
    /// Owner-hierarchy NV indices Keepsake picks from (at random, retrying when taken).
    static let indexRange: ClosedRange<UInt32> = 0x0150_0000...0x015F_FFFF
    static let secretSize = 32

    /// Makes a slot for `secret` behind `authorization`, with the device's counter (made when
    /// `counter` is nil or gone).
    package static func create(
        _ tpm: TPMContext, counter: UInt32?, authorization: SecureBytes, secret: SecureBytes,
        limit: UInt64
    ) throws(TPMError) -> TPMSlot {
        // With an empty lockout authorization any process of the user could clear the lockout
        // that counts the guesses sent around Keepsake's counter: no slot is made there.
        guard try tpm.lockoutAuthorizationIsSet() else {
            throw TPMError(
                .notAvailable,
                "this TPM's lockout authorization is empty, so any process could clear its dictionary-attack lockout and guess the pin without limit: set one (tpm2_changeauth -c lockout), or have a guess counter service count the pin (--counter; keepsake-escrow --tpm, docs/running.md)"
            )
        }
        let counterIndex: UInt32
        if let counter, (try? value(tpm, counter: counter)) != nil {
            counterIndex = counter
        } else {
            counterIndex = try define("counter") { index throws(TPMError) in
                try tpm.run("NV_DefineSpace(counter)") { keepsake_tpm_counter_define($0, index) }
            }
            // A counter reads only once written.
            try tpm.run("NV_Increment") { keepsake_tpm_counter_increment($0, counterIndex) }
        }
        let base = try value(tpm, counter: counterIndex)
        let secretIndex = try defineSecret(
            tpm, counter: counterIndex, maximum: base + limit, authorization: authorization,
            secret: secret)
        return TPMSlot(
            counterIndex: counterIndex, secretIndex: secretIndex, base: base, limit: limit,
            secretSize: secret.count)
    }

    /// One passcode attempt: counts it (increments the counter), then asks for the secret.
    /// On success the slot is rebased — a new secret index whose limit starts from the current
    /// count — and returned beside the secret; the caller stores it and then destroys the old
    /// slot (`destroy`).
    ///
    /// - Throws: `.authFailed` for a wrong authorization; `.limitReached` once `limit` attempts
    ///   were counted since the last right one; `.lockout` while the TPM's own lockout holds.
    package static func attempt(_ tpm: TPMContext, slot: TPMSlot, authorization: SecureBytes)
        throws(TPMError) -> (secret: SecureBytes, rebased: TPMSlot)
    {
        try tpm.run("NV_Increment") { keepsake_tpm_counter_increment($0, slot.counterIndex) }
        var rc: UInt32 = 0
        let secret = SecureBytes(count: slot.secretSize ?? secretSize) { out in
            rc = authorization.withUnsafeBytes { auth in
                tpm.runUnchecked {
                    keepsake_tpm_secret_read(
                        $0, slot.secretIndex, slot.counterIndex, slot.base + slot.limit,
                        auth.bindMemory(to: UInt8.self).baseAddress, auth.count,
                        out.bindMemory(to: UInt8.self).baseAddress, out.count)
                }
            }
        }
        guard rc == 0 else { throw TPMError(rc: rc, "NV_Read(secret)") }
        let base = try value(tpm, counter: slot.counterIndex)
        let secretIndex = try defineSecret(
            tpm, counter: slot.counterIndex, maximum: base + slot.limit,
            authorization: authorization, secret: secret)
        return (
            secret,
            TPMSlot(
                counterIndex: slot.counterIndex, secretIndex: secretIndex, base: base,
                limit: slot.limit, secretSize: secret.count)
        )
    }

    #if KEEPSAKE_TEST_HOOKS
        /// Test hook (debug builds only): asks for the secret the way an attacker who skips the
        /// counter would — no increment first — so a test can show the TPM counts such guesses too.
        package static func uncountedRead(
            _ tpm: TPMContext, slot: TPMSlot, authorization: SecureBytes
        )
            throws(TPMError)
        {
            var secret = [UInt8](repeating: 0, count: secretSize)
            let rc = authorization.withUnsafeBytes { auth in
                tpm.runUnchecked {
                    keepsake_tpm_secret_read(
                        $0, slot.secretIndex, slot.counterIndex, slot.base + slot.limit,
                        auth.bindMemory(to: UInt8.self).baseAddress, auth.count, &secret, secretSize
                    )
                }
            }
            guard rc == 0 else { throw TPMError(rc: rc, "NV_Read(secret)") }
        }
    #endif

    /// Attempts counted since the last right passcode.
    package static func failures(_ tpm: TPMContext, slot: TPMSlot) throws(TPMError) -> UInt64 {
        let count = try value(tpm, counter: slot.counterIndex)
        return count >= slot.base ? count - slot.base : 0
    }

    /// Undefines the slot's secret index (the counter stays: it is the device's for good).
    package static func destroy(_ tpm: TPMContext, slot: TPMSlot) {
        try? tpm.run("NV_UndefineSpace") { keepsake_tpm_undefine($0, slot.secretIndex) }
    }

    private static func value(_ tpm: TPMContext, counter: UInt32) throws(TPMError) -> UInt64 {
        var value: UInt64 = 0
        try tpm.run("NV_Read(counter)") { keepsake_tpm_counter_read($0, counter, &value) }
        return value
    }

    private static func defineSecret(
        _ tpm: TPMContext, counter: UInt32, maximum: UInt64, authorization: SecureBytes,
        secret: SecureBytes
    ) throws(TPMError) -> UInt32 {
        try define("secret") { index throws(TPMError) in
            try tpm.run("NV_DefineSpace(secret)") { context in
                authorization.withUnsafeBytes { auth in
                    secret.withUnsafeBytes { bytes in
                        keepsake_tpm_secret_define(
                            context, index, counter, maximum,
                            auth.bindMemory(to: UInt8.self).baseAddress, auth.count,
                            bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
                    }
                }
            }
        }
    }

    /// Defines at a random free index of `indexRange`, retrying when one is taken (the device's
    /// slots and a service's state alike).
    static func define(_ what: String, _ body: (UInt32) throws(TPMError) -> Void)
        throws(TPMError) -> UInt32
    {
        for _ in 0..<16 {
            let index = UInt32.random(in: indexRange)
            do {
                try body(index)
                return index
            } catch  where keepsake_tpm_rc_base(error.rc) == 0x14C {  // TPM_RC_NV_DEFINED
                continue
            }
        }
        throw TPMError(.failed, "no free NV index for the \(what)")
    }
}
