internal import CKeepsakeTPMShims
import Foundation
import Sealing
import Platform

/// The one error type of the TPM module. Compares by code; `rc` keeps the TSS2 response code.
package struct TPMError: KeepsakeError {
    package typealias Code = ErrorCode<TPMError>

    package let code: Code
    package let message: String
    /// The TSS2 response code.
    package let rc: UInt32
    package let underlying: (any Error & Sendable)? = nil

    init(_ code: Code, _ message: String, rc: UInt32 = 0) {
        self.code = code
        self.message = message
        self.rc = rc
    }

    /// The code for a TSS2 response code: wrong authorization, a failed policy check (the
    /// counter past its limit), lockout, or anything else.
    init(rc: UInt32, _ what: String) {
        let base = keepsake_tpm_rc_base(rc)
        let code: Code =
            switch base {
            case 0x08E, 0x0A2: .authFailed  // TPM_RC_AUTH_FAIL, TPM_RC_BAD_AUTH
            case 0x126, 0x09D: .limitReached  // TPM_RC_POLICY, TPM_RC_POLICY_FAIL
            case 0x921: .lockout  // TPM_RC_LOCKOUT
            default: rc & 0xFFFF_0000 == 0x000A_0000 ? .notAvailable : .failed  // TCTI layer
            }
        self.init(code, "\(what): TSS2 0x\(String(rc, radix: 16))", rc: rc)
    }

}

/// One ESAPI context over a TCTI (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=P`). Owns the
/// ESYS and TCTI contexts and finalizes both in `deinit`.
///
/// `@unchecked Sendable`: ESAPI contexts are not thread-safe, so every command runs under `lock`.
package final class TPMContext: @unchecked Sendable {
    private let context: OpaquePointer
    private let tcti: OpaquePointer
    private let lock = NSLock()

    package init(tcti: String) throws(TPMError) {
        var context: OpaquePointer?
        var tctiContext: OpaquePointer?
        let rc = keepsake_tpm_open(tcti, &context, &tctiContext)
        if rc != 0, let why = keepsake_tpm_load_error() {
            throw TPMError(.notAvailable, String(cString: why), rc: rc)
        }
        guard rc == 0, let context, let tctiContext else {
            throw TPMError(
                .notAvailable, "no TPM at \(tcti) (TSS2 0x\(String(rc, radix: 16)))", rc: rc)
        }
        self.context = context
        self.tcti = tctiContext
    }

    deinit { keepsake_tpm_close(context, tcti) }

    /// Runs one shim with the context, serialized; a non-zero response code throws.
    func run(_ what: String, _ body: (OpaquePointer) -> UInt32) throws(TPMError) {
        let rc = runUnchecked(body)
        guard rc == 0 else { throw TPMError(rc: rc, what) }
    }

    /// Runs one shim with the context, serialized, and returns its response code (for callers
    /// that map it themselves).
    func runUnchecked(_ body: (OpaquePointer) -> UInt32) -> UInt32 {
        lock.withLock { body(context) }
    }

    /// Sets the TPM's dictionary-attack parameters (lockout hierarchy, empty authorization):
    /// for the test harness's own swtpm only.
    package func setDictionaryAttack(
        maxTries: UInt32, recoveryTime: UInt32, lockoutRecovery: UInt32
    )
        throws(TPMError)
    {
        try run("DictionaryAttackParameters") {
            keepsake_tpm_set_dictionary_attack($0, maxTries, recoveryTime, lockoutRecovery)
        }
    }

    /// Whether the TPM's lockout authorization is set: when it is empty, any process that reaches
    /// the TPM can clear its dictionary-attack lockout (`TPM2_DictionaryAttackLockReset`).
    package func lockoutAuthorizationIsSet() throws(TPMError) -> Bool {
        var flags: UInt32 = 0
        try run("GetCapability(permanent)") { keepsake_tpm_permanent($0, &flags) }
        return flags & 0x4 != 0  // TPMA_PERMANENT lockoutAuthSet
    }

    /// Sets the lockout authorization (from empty): for the test harness's own swtpm only, as a
    /// careful owner sets a machine's (`tpm2_changeauth -c lockout`).
    package func setLockoutAuthorization(_ authorization: Data) throws(TPMError) {
        try run("HierarchyChangeAuth(lockout)") { context in
            authorization.withUnsafeBytes {
                keepsake_tpm_set_lockout_auth(
                    context, $0.bindMemory(to: UInt8.self).baseAddress, $0.count)
            }
        }
    }

    /// What the TPM is, as it says: "software TPM (IBM SW)" (swtpm) or "hardware TPM (…)".
    package func kind(tcti: String) -> String {
        var manufacturer: UInt32 = 0
        var vendor: UInt32 = 0
        _ = runUnchecked { keepsake_tpm_vendor($0, &manufacturer, &vendor) }
        func text(_ value: UInt32) -> String {
            String(
                decoding: (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
                    .filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self
            ).trimmingCharacters(in: .whitespaces)
        }
        let name = "\(text(manufacturer)) \(text(vendor))".trimmingCharacters(in: .whitespaces)
        // libtpms (swtpm) says IBM / "SW"; Microsoft's simulator MSFT; a TCTI to an emulator.
        let software =
            tcti.hasPrefix("swtpm") || tcti.hasPrefix("mssim") || text(vendor).hasPrefix("SW")
            || text(manufacturer) == "MSFT"
        return "\(software ? "software" : "hardware") TPM (\(name))"
    }

    /// Clears the TPM's dictionary-attack lockout: for the test harness's own swtpm only.
    package func resetDictionaryAttack() throws(TPMError) {
        try run("DictionaryAttackLockReset") { keepsake_tpm_reset_dictionary_attack($0) }
    }
}

extension ErrorCode<TPMError> {
    /// No TPM answers at that TCTI, or it refused the command for a reason of its own.
    package static var notAvailable: Self { Self("TPM not available") }
    /// A wrong authorization (the passcode): counted.
    package static var authFailed: Self { Self("authorization failed") }
    /// The slot's guess counter is past its limit: the TPM no longer releases the secret.
    package static var limitReached: Self { Self("guess limit reached") }
    /// The TPM's own dictionary-attack lockout is in force.
    package static var lockout: Self { Self("TPM in dictionary-attack lockout") }
    package static var failed: Self { Self("TPM command failed") }
}
