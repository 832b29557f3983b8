#include "CKeepsakeTPMShims.h"
#include "shared.h"

#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>
#include "loaded.h"

uint32_t keepsake_tpm_open(const char *tcti, ESYS_CONTEXT **context, TSS2_TCTI_CONTEXT **tcti_out) {
    // tpm2-tss logs every TPM error response (a wrong passcode is one) to standard error; Keepsake
    // reports its own errors. A caller's own TSS2_LOG setting is kept.
    setenv("TSS2_LOG", "all+NONE", 0);
    *context = NULL;
    *tcti_out = NULL;
    TSS2_RC rc = keepsake_tpm_load();
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Tss2_TctiLdr_Initialize(tcti, tcti_out);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_Initialize(context, *tcti_out, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        Tss2_TctiLdr_Finalize(tcti_out);
        *context = NULL;
    }
    return rc;
}

void keepsake_tpm_close(ESYS_CONTEXT *context, TSS2_TCTI_CONTEXT *tcti) {
    if (context) Esys_Finalize(&context);
    if (tcti) Tss2_TctiLdr_Finalize(&tcti);
}

static TSS2_RC nv_handle(ESYS_CONTEXT *context, uint32_t index, ESYS_TR *handle) {
    return Esys_TR_FromTPMPublic(context, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, handle);
}

TPM2B_NV_PUBLIC keepsake_tpm_nv_public(uint32_t index, TPM2_NT type, uint16_t size) {
    TPM2B_NV_PUBLIC info = {
        .nvPublic = {
            .nvIndex = index,
            .nameAlg = TPM2_ALG_SHA256,
            .attributes = TPMA_NV_AUTHREAD | TPMA_NV_AUTHWRITE | TPMA_NV_NO_DA |
                          (type << TPMA_NV_TPM2_NT_SHIFT),
            .authPolicy = {.size = 0},
            .dataSize = size,
        }};
    return info;
}

TPM2B_NV_PUBLIC keepsake_tpm_counter_public(uint32_t index) {
    return keepsake_tpm_nv_public(index, TPM2_NT_COUNTER, 8);
}

uint32_t keepsake_tpm_counter_value(const TPM2B_MAX_NV_BUFFER *data, uint64_t *value) {
    uint64_t v = 0;
    for (int i = 0; i < 8 && i < data->size; i++) v = (v << 8) | data->buffer[i];
    *value = v;
    return data->size == 8 ? TSS2_RC_SUCCESS : TSS2_ESYS_RC_MALFORMED_RESPONSE;
}

TSS2_RC keepsake_tpm_set_auth(ESYS_CONTEXT *context, ESYS_TR handle, const uint8_t *auth,
                              size_t auth_size) {
    TPM2B_AUTH value = {.size = (UINT16)auth_size};
    memcpy(value.buffer, auth, auth_size);
    TSS2_RC rc = Esys_TR_SetAuth(context, handle, &value);
    memset(&value, 0, sizeof value);
    return rc;
}

TSS2_RC keepsake_tpm_nv_write_secret(ESYS_CONTEXT *context, ESYS_TR handle, ESYS_TR session,
                                     const uint8_t *secret, size_t secret_size) {
    TPM2B_MAX_NV_BUFFER data = {.size = (UINT16)secret_size};
    memcpy(data.buffer, secret, secret_size);
    TSS2_RC rc =
        Esys_NV_Write(context, handle, handle, session, ESYS_TR_NONE, ESYS_TR_NONE, &data, 0);
    memset(&data, 0, sizeof data);
    return rc;
}

TSS2_RC keepsake_tpm_finish_define(ESYS_CONTEXT *context, ESYS_TR *handle, ESYS_TR owner_session,
                                   TSS2_RC rc) {
    if (rc != TSS2_RC_SUCCESS)
        Esys_NV_UndefineSpace(context, ESYS_TR_RH_OWNER, *handle, owner_session, ESYS_TR_NONE,
                              ESYS_TR_NONE);
    else
        Esys_TR_Close(context, handle);
    return rc;
}

TSS2_RC keepsake_tpm_nv_read_secret(ESYS_CONTEXT *context, ESYS_TR handle, ESYS_TR session,
                                    uint8_t *secret_out, size_t secret_size) {
    TPM2B_MAX_NV_BUFFER *data = NULL;
    TSS2_RC rc = Esys_NV_Read(context, handle, handle, session, ESYS_TR_NONE, ESYS_TR_NONE,
                              (UINT16)secret_size, 0, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (data->size != secret_size) rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
    else memcpy(secret_out, data->buffer, secret_size);
    memset(data->buffer, 0, data->size);
    Esys_Free(data);
    return rc;
}

uint32_t keepsake_tpm_counter_define(ESYS_CONTEXT *context, uint32_t index) {
    TPM2B_AUTH empty = {.size = 0};
    TPM2B_NV_PUBLIC info = keepsake_tpm_counter_public(index);
    ESYS_TR handle = ESYS_TR_NONE;
    TSS2_RC rc = Esys_NV_DefineSpace(context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                     ESYS_TR_NONE, &empty, &info, &handle);
    if (rc == TSS2_RC_SUCCESS) Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_counter_increment(ESYS_CONTEXT *context, uint32_t index) {
    ESYS_TR handle;
    TSS2_RC rc = nv_handle(context, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_NV_Increment(context, handle, handle, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE);
    Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_counter_read(ESYS_CONTEXT *context, uint32_t index, uint64_t *value) {
    ESYS_TR handle;
    TSS2_RC rc = nv_handle(context, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_MAX_NV_BUFFER *data = NULL;
    rc = Esys_NV_Read(context, handle, handle, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, 8, 0,
                      &data);
    Esys_TR_Close(context, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = keepsake_tpm_counter_value(data, value);
    Esys_Free(data);
    return rc;
}

/// Runs the secret's policy in `session`: PolicyNV(counter <= max_counter), PolicyAuthValue.
static TSS2_RC run_policy(ESYS_CONTEXT *context, ESYS_TR session, uint32_t counter,
                          uint64_t max_counter) {
    ESYS_TR counter_handle;
    TSS2_RC rc = nv_handle(context, counter, &counter_handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_OPERAND operand = {.size = 8};
    for (int i = 0; i < 8; i++) operand.buffer[i] = (uint8_t)(max_counter >> (56 - 8 * i));
    rc = Esys_PolicyNV(context, counter_handle, counter_handle, session, ESYS_TR_PASSWORD,
                       ESYS_TR_NONE, ESYS_TR_NONE, &operand, 0, TPM2_EO_UNSIGNED_LE);
    Esys_TR_Close(context, &counter_handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    return Esys_PolicyAuthValue(context, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
}

static TSS2_RC start_session(ESYS_CONTEXT *context, TPM2_SE type, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_NULL};
    return Esys_StartAuthSession(context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                 ESYS_TR_NONE, NULL, type, &symmetric, TPM2_ALG_SHA256, session);
}

/// A salted policy session that has run the slot's policy, its parameters encrypted as `flags`
/// says (DECRYPT for a secret going in, ENCRYPT for one coming out); flushed on failure.
static TSS2_RC policy_session(ESYS_CONTEXT *context, uint32_t counter, uint64_t max_counter,
                              TPMA_SESSION flags, ESYS_TR *session) {
    TSS2_RC rc = keepsake_tpm_start_salted(context, TPM2_SE_POLICY, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = run_policy(context, *session, counter, max_counter);
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_TRSess_SetAttributes(context, *session, TPMA_SESSION_CONTINUESESSION | flags, 0xff);
    if (rc != TSS2_RC_SUCCESS) Esys_FlushContext(context, *session);
    return rc;
}

enum slot_direction { slot_write, slot_read };

/// Writes `secret` into the slot (`slot_write`), or reads the slot into it (`slot_read`), under a
/// fresh policy session (the counter below its limit, and the passcode's authorization) that
/// encrypts the secret on its way in or out.
static TSS2_RC slot_secret(ESYS_CONTEXT *context, ESYS_TR handle, uint32_t counter,
                           uint64_t max_counter, const uint8_t *auth, size_t auth_size,
                           enum slot_direction direction, uint8_t *secret, size_t secret_size) {
    ESYS_TR session;
    TSS2_RC rc = policy_session(context, counter, max_counter,
                                direction == slot_write ? TPMA_SESSION_DECRYPT : TPMA_SESSION_ENCRYPT,
                                &session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = keepsake_tpm_set_auth(context, handle, auth, auth_size);
    if (rc == TSS2_RC_SUCCESS)
        rc = direction == slot_write
                 ? keepsake_tpm_nv_write_secret(context, handle, session, secret, secret_size)
                 : keepsake_tpm_nv_read_secret(context, handle, session, secret, secret_size);
    Esys_FlushContext(context, session);
    return rc;
}

uint32_t keepsake_tpm_secret_define(ESYS_CONTEXT *context, uint32_t index, uint32_t counter,
                                    uint64_t max_counter, const uint8_t *auth, size_t auth_size,
                                    const uint8_t *secret, size_t secret_size) {
    if (auth_size > sizeof(((TPM2B_AUTH *)0)->buffer) || secret_size > 64) return TSS2_ESYS_RC_BAD_VALUE;
    ESYS_TR trial;
    TSS2_RC rc = start_session(context, TPM2_SE_TRIAL, &trial);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = run_policy(context, trial, counter, max_counter);
    TPM2B_DIGEST *digest = NULL;
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_PolicyGetDigest(context, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
    Esys_FlushContext(context, trial);
    if (rc != TSS2_RC_SUCCESS) return rc;

    TPM2B_AUTH authorization = {.size = (UINT16)auth_size};
    memcpy(authorization.buffer, auth, auth_size);
    TPM2B_NV_PUBLIC info = {
        .nvPublic = {
            .nvIndex = index,
            .nameAlg = TPM2_ALG_SHA256,
            .attributes = TPMA_NV_POLICYREAD | TPMA_NV_POLICYWRITE |
                          (TPM2_NT_ORDINARY << TPMA_NV_TPM2_NT_SHIFT),
            .dataSize = (UINT16)secret_size,
        }};
    info.nvPublic.authPolicy = *digest;
    Esys_Free(digest);
    ESYS_TR handle = ESYS_TR_NONE;
    // The owner's (empty) authorization in a salted HMAC session that encrypts the index's
    // authorization on its way in.
    ESYS_TR owner = ESYS_TR_NONE;
    rc = keepsake_tpm_start_salted(context, TPM2_SE_HMAC, &owner);
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_TRSess_SetAttributes(context, owner, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_DECRYPT, 0xff);
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_NV_DefineSpace(context, ESYS_TR_RH_OWNER, owner, ESYS_TR_NONE, ESYS_TR_NONE,
                                 &authorization, &info, &handle);
    if (owner != ESYS_TR_NONE) Esys_FlushContext(context, owner);
    memset(&authorization, 0, sizeof authorization);
    if (rc != TSS2_RC_SUCCESS) return rc;

    rc = slot_secret(context, handle, counter, max_counter, auth, auth_size, slot_write,
                     (uint8_t *)secret, secret_size);
    return keepsake_tpm_finish_define(context, &handle, ESYS_TR_PASSWORD, rc);
}

uint32_t keepsake_tpm_secret_read(ESYS_CONTEXT *context, uint32_t index, uint32_t counter,
                                  uint64_t max_counter, const uint8_t *auth, size_t auth_size,
                                  uint8_t *secret_out, size_t secret_size) {
    if (auth_size > sizeof(((TPM2B_AUTH *)0)->buffer)) return TSS2_ESYS_RC_BAD_VALUE;
    ESYS_TR handle;
    TSS2_RC rc = nv_handle(context, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = slot_secret(context, handle, counter, max_counter, auth, auth_size, slot_read,
                     secret_out, secret_size);
    Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_undefine(ESYS_CONTEXT *context, uint32_t index) {
    ESYS_TR handle;
    TSS2_RC rc = nv_handle(context, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_NV_UndefineSpace(context, ESYS_TR_RH_OWNER, handle, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                               ESYS_TR_NONE);
    if (rc != TSS2_RC_SUCCESS) Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_set_dictionary_attack(ESYS_CONTEXT *context, uint32_t max_tries,
                                           uint32_t recovery_time, uint32_t lockout_recovery) {
    return Esys_DictionaryAttackParameters(context, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD,
                                           ESYS_TR_NONE, ESYS_TR_NONE, max_tries, recovery_time,
                                           lockout_recovery);
}

uint32_t keepsake_tpm_reset_dictionary_attack(ESYS_CONTEXT *context) {
    return Esys_DictionaryAttackLockReset(context, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD,
                                          ESYS_TR_NONE, ESYS_TR_NONE);
}

uint32_t keepsake_tpm_permanent(ESYS_CONTEXT *context, uint32_t *flags) {
    TPMI_YES_NO more;
    TPMS_CAPABILITY_DATA *data = NULL;
    TSS2_RC rc = Esys_GetCapability(context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                    TPM2_CAP_TPM_PROPERTIES, TPM2_PT_PERMANENT, 1, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    *flags = 0;
    if (data->data.tpmProperties.count > 0 &&
        data->data.tpmProperties.tpmProperty[0].property == TPM2_PT_PERMANENT)
        *flags = data->data.tpmProperties.tpmProperty[0].value;
    else
        rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
    Esys_Free(data);
    return rc;
}

uint32_t keepsake_tpm_set_lockout_auth(ESYS_CONTEXT *context, const uint8_t *auth, size_t auth_size) {
    if (auth_size > sizeof(((TPM2B_AUTH *)0)->buffer)) return TSS2_ESYS_RC_BAD_VALUE;
    TPM2B_AUTH value = {.size = (UINT16)auth_size};
    memcpy(value.buffer, auth, auth_size);
    TSS2_RC rc = Esys_HierarchyChangeAuth(context, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD,
                                          ESYS_TR_NONE, ESYS_TR_NONE, &value);
    memset(&value, 0, sizeof value);
    return rc;
}

uint32_t keepsake_tpm_rc_base(uint32_t rc) {
    // Format-one errors carry parameter/handle/session numbers in bits 6-11; the base code is
    // the error number with the format bit.
    uint32_t without_layer = rc & 0xFFFF;
    if (without_layer & TPM2_RC_FMT1) return without_layer & (TPM2_RC_FMT1 | 0x3F);
    return without_layer;
}
