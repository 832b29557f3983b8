#ifndef CKEEPSAKE_TPM_SHARED_H
#define CKEEPSAKE_TPM_SHARED_H

#include <tss2/tss2_esys.h>

// Shared by the device's slots (tpm.c) and a service's state (state.c); not part of the module.

/// The public area of an NV counter: its own (empty) authorization, exempt from
/// dictionary-attack counting, so incrementing it never locks anyone out.
TPM2B_NV_PUBLIC keepsake_tpm_counter_public(uint32_t index);
/// A counter's 8 big-endian bytes as a number; TSS2_ESYS_RC_MALFORMED_RESPONSE when not 8.
uint32_t keepsake_tpm_counter_value(const TPM2B_MAX_NV_BUFFER *data, uint64_t *value);

#endif
