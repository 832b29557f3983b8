#ifndef CKEEPSAKE_TPM_SHIMS_H
#define CKEEPSAKE_TPM_SHIMS_H

#include <stdint.h>
#include <tss2/tss2_esys.h>

// Fixed-argument shims over tpm2-tss ESAPI: each one TPM command (or one policy session) whose
// arguments are nested C structs, unions and fixed-size arrays that Swift imports as tuples.
// Every function returns the TSS2_RC (0 on success).

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
/// subject to the TPM's dictionary-attack protection.
uint32_t keepsake_tpm_secret_define(ESYS_CONTEXT *context, uint32_t index, uint32_t counter,
                                    uint64_t max_counter, const uint8_t *auth, size_t auth_size,
                                    const uint8_t *secret, size_t secret_size);
/// Why: a policy session (PolicyNV, PolicyAuthValue) then Esys_NV_Read; the secret is copied
/// out and the TSS's copy wiped.
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

/// Why: Tss2_RC_Decode returns a static string; the base error code without layer bits.
uint32_t keepsake_tpm_rc_base(uint32_t rc);

#endif
