#ifndef CKEEPSAKE_TPM_SHARED_H
#define CKEEPSAKE_TPM_SHARED_H

#include <tss2/tss2_esys.h>

// Shared by the device's slots (tpm.c) and a service's state (state.c); not part of the module.

/// The public area of an NV counter: its own (empty) authorization, exempt from
/// dictionary-attack counting, so incrementing it never locks anyone out.
/// The public area of a Keepsake NV index: read and written with its own authorization, outside
/// the dictionary-attack lockout, SHA-256 names; `type` an ordinary index or a counter.
TPM2B_NV_PUBLIC keepsake_tpm_nv_public(uint32_t index, TPM2_NT type, uint16_t size);
TPM2B_NV_PUBLIC keepsake_tpm_counter_public(uint32_t index);
/// A counter's 8 big-endian bytes as a number; TSS2_ESYS_RC_MALFORMED_RESPONSE when not 8.
uint32_t keepsake_tpm_counter_value(const TPM2B_MAX_NV_BUFFER *data, uint64_t *value);

/// Sets `handle`'s authorization to `auth` (at most a TPM2B_AUTH's size), wiping the copy.
TSS2_RC keepsake_tpm_set_auth(ESYS_CONTEXT *context, ESYS_TR handle, const uint8_t *auth,
                              size_t auth_size);
/// Writes `secret` (at most 64 bytes) to the NV index `handle` in `session`, wiping the copy.
TSS2_RC keepsake_tpm_nv_write_secret(ESYS_CONTEXT *context, ESYS_TR handle, ESYS_TR session,
                                     const uint8_t *secret, size_t secret_size);
/// Reads exactly `secret_size` bytes of the NV index `handle` in `session` into `secret_out`
/// (TSS2_ESYS_RC_MALFORMED_RESPONSE for another size), wiping the TPM's buffer.
TSS2_RC keepsake_tpm_nv_read_secret(ESYS_CONTEXT *context, ESYS_TR handle, ESYS_TR session,
                                    uint8_t *secret_out, size_t secret_size);
/// The end of an NV index's definition: on failure (`rc`) the index is undefined again (the owner
/// authorized in `owner_session`), on success its handle closed. Returns `rc`.
TSS2_RC keepsake_tpm_finish_define(ESYS_CONTEXT *context, ESYS_TR *handle, ESYS_TR owner_session,
                                   TSS2_RC rc);

#endif
