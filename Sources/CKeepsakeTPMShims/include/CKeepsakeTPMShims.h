#ifndef CKEEPSAKE_TPM_SHIMS_H
#define CKEEPSAKE_TPM_SHIMS_H

#include <stdint.h>
#include <tss2/tss2_esys.h>

// Fixed-argument shims over tpm2-tss ESAPI: each one TPM command (or one policy session) whose
// arguments are nested C structs, unions and fixed-size arrays that Swift imports as tuples.
// Every function returns the TSS2_RC (0 on success).

/// Why tpm2-tss (loaded at the first open) could not be loaded, or NULL when it was.
const char *keepsake_tpm_load_error(void);

/// Why: Tss2_TctiLdr_Initialize + Esys_Initialize take and fill out-pointers of opaque types.
uint32_t keepsake_tpm_open(const char *tcti, ESYS_CONTEXT **context, TSS2_TCTI_CONTEXT **tcti_out);
/// Why: the pair of finalizers for keepsake_tpm_open.
void keepsake_tpm_close(ESYS_CONTEXT *context, TSS2_TCTI_CONTEXT *tcti);

/// Why: TPM2B_NV_PUBLIC (attributes, name algorithm) for an NV counter with an empty
/// authorization, exempt from dictionary-attack lockout, so incrementing it never locks anyone.
uint32_t keepsake_tpm_counter_define(ESYS_CONTEXT *context, uint32_t index);
/// Why: Esys_TR_FromTPMPublic then Esys_NV_Increment with a password session.
uint32_t keepsake_tpm_counter_increment(ESYS_CONTEXT *context, uint32_t index);
/// Why: Esys_NV_Read returns a TPM2B it allocates; the counter is 8 bytes big-endian.
uint32_t keepsake_tpm_counter_read(ESYS_CONTEXT *context, uint32_t index, uint64_t *value);

/// Why: a trial policy session to compute the policy digest, then TPM2B_NV_PUBLIC and TPM2B_AUTH
/// for the secret index, then a policy session to write it. The index is readable and writable
/// only through the policy PolicyNV(counter <= max_counter) AND PolicyAuthValue(auth); it is
/// subject to the TPM's dictionary-attack protection. The authorization and the secret cross the
/// TPM connection encrypted (salted sessions: an owner HMAC session for the definition, the
/// policy session for the write).
uint32_t keepsake_tpm_secret_define(ESYS_CONTEXT *context, uint32_t index, uint32_t counter,
                                    uint64_t max_counter, const uint8_t *auth, size_t auth_size,
                                    const uint8_t *secret, size_t secret_size);
/// Why: a salted policy session (PolicyNV, PolicyAuthValue) then Esys_NV_Read with the response
/// encrypted; the secret is copied out and the TSS's copy wiped.
uint32_t keepsake_tpm_secret_read(ESYS_CONTEXT *context, uint32_t index, uint32_t counter,
                                  uint64_t max_counter, const uint8_t *auth, size_t auth_size,
                                  uint8_t *secret_out, size_t secret_size);
/// Why: Esys_TR_FromTPMPublic then Esys_NV_UndefineSpace under the owner hierarchy.
uint32_t keepsake_tpm_undefine(ESYS_CONTEXT *context, uint32_t index);
/// Why: Esys_DictionaryAttackParameters under the lockout hierarchy (the test harness sets its own
/// swtpm's limits; a shipped device never calls it).
uint32_t keepsake_tpm_set_dictionary_attack(ESYS_CONTEXT *context, uint32_t max_tries,
                                           uint32_t recovery_time, uint32_t lockout_recovery);
/// Why: Esys_DictionaryAttackLockReset under the lockout hierarchy (test harness only).
uint32_t keepsake_tpm_reset_dictionary_attack(ESYS_CONTEXT *context);

// A service's own state in its TPM (state.c): every command in one salted, parameter-encrypting
// HMAC session, so that nothing secret crosses the TPM connection in clear and no response can
// be forged or replayed by whoever sits on it.

/// Why: CreatePrimary's TPM2B_PUBLIC template (the owner hierarchy's ECC P-256 storage key, by
/// its fixed template the same key on every start), then Esys_StartAuthSession salted to it
/// (AES-128-CFB, SHA-256) with its out-handles. `name`/`name_size` in: the key's name expected
/// (size 0: any, first start); out: its name. A different key answers TPM2_RC_KEY (0x1C). First
/// flushes every session and transient object loaded in the TPM (Tss2_Sys: raw handles), which
/// only an earlier, killed process of the service can have left: for a TPM it alone uses.
uint32_t keepsake_tpm_salted_session(ESYS_CONTEXT *context, uint8_t *name, size_t *name_size,
                                     uint32_t *session);
/// Why: CreatePrimary's template (as above) and Esys_StartAuthSession of `type` (TPM2_SE_HMAC or
/// TPM2_SE_POLICY) salted to that key, AES-128-CFB: a session whose key an eavesdropper cannot
/// compute, for parameter encryption and HMACs that allow no offline guess of an authorization.
uint32_t keepsake_tpm_start_salted(ESYS_CONTEXT *context, uint32_t type, uint32_t *session);
/// Why: Esys_FlushContext on an ESYS_TR.
void keepsake_tpm_flush(ESYS_CONTEXT *context, uint32_t handle);
/// Why: TPM2B_NV_PUBLIC for an ordinary index read and written with its own authorization
/// `auth` (no dictionary-attack counting: its authorization is a random value, never a
/// passcode), defined and then written with `secret`, both in `session` with the authorization
/// and the secret encrypted.
uint32_t keepsake_tpm_state_define(ESYS_CONTEXT *context, uint32_t session, uint32_t index,
                                   const uint8_t *auth, size_t auth_size, const uint8_t *secret,
                                   size_t secret_size);
/// Why: Esys_NV_Read in `session` with the response encrypted; the secret copied out and the
/// TSS's copy wiped.
uint32_t keepsake_tpm_state_read(ESYS_CONTEXT *context, uint32_t session, uint32_t index,
                                 const uint8_t *auth, size_t auth_size, uint8_t *secret_out,
                                 size_t secret_size);
/// Why: keepsake_tpm_counter_define / _increment / _read, each in `session` (the response
/// authenticated by the session's HMAC).
uint32_t keepsake_tpm_state_counter_define(ESYS_CONTEXT *context, uint32_t session, uint32_t index);
uint32_t keepsake_tpm_state_counter_increment(ESYS_CONTEXT *context, uint32_t session,
                                              uint32_t index);
uint32_t keepsake_tpm_state_counter_read(ESYS_CONTEXT *context, uint32_t session, uint32_t index,
                                         uint64_t *value);
/// Why: Esys_GetCapability(TPM_CAP_TPM_PROPERTIES) returns a TPMS_CAPABILITY_DATA union it
/// allocates: the manufacturer and the first vendor string, 4 ASCII bytes each.
uint32_t keepsake_tpm_vendor(ESYS_CONTEXT *context, uint32_t *manufacturer, uint32_t *vendor);

/// Why: Esys_GetCapability(TPM_CAP_TPM_PROPERTIES, TPM_PT_PERMANENT) returns a union it
/// allocates: the TPMA_PERMANENT bits (ownerAuthSet 0x1, endorsementAuthSet 0x2, lockoutAuthSet 0x4).
uint32_t keepsake_tpm_permanent(ESYS_CONTEXT *context, uint32_t *flags);
/// Why: Esys_HierarchyChangeAuth on the lockout hierarchy (from an empty authorization) with a
/// TPM2B_AUTH: the test harness's own swtpm, set as a careful owner would set a machine's.
uint32_t keepsake_tpm_set_lockout_auth(ESYS_CONTEXT *context, const uint8_t *auth, size_t auth_size);

/// Why: Tss2_RC_Decode returns a static string; the base error code without layer bits.
uint32_t keepsake_tpm_rc_base(uint32_t rc);

#endif
