#include "CKeepsakeTPMShims.h"
#include "shared.h"

#include <string.h>
#include <tss2/tss2_sys.h>
#include "loaded.h"

// A service's own state in its TPM: see the header. The session carries every command; its
// attributes are set per command (DECRYPT when the command's first parameter is secret, ENCRYPT
// when the response's is), and CONTINUESESSION always.

static const TPMA_SESSION keep = TPMA_SESSION_CONTINUESESSION;

/// Flushes every loaded session and transient object of the TPM: what an earlier process of the
/// service left when it was killed (a TPM without a resource manager keeps them; swtpm holds only
/// three). Only for a TPM the service alone uses.
static void flush_leftovers(ESYS_CONTEXT *context) {
    TSS2_SYS_CONTEXT *sys = NULL;
    if (Esys_GetSysContext(context, &sys) != TSS2_RC_SUCCESS || !sys) return;
    const TPM2_HANDLE ranges[] = {TPM2_HR_HMAC_SESSION, TPM2_HR_POLICY_SESSION, TPM2_HR_TRANSIENT};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        TPMI_YES_NO more = 0;
        TPMS_CAPABILITY_DATA data;
        memset(&data, 0, sizeof data);
        if (Tss2_Sys_GetCapability(sys, NULL, TPM2_CAP_HANDLES, ranges[r], 64, &more, &data, NULL) !=
            TSS2_RC_SUCCESS)
            continue;
        for (UINT32 i = 0; i < data.data.handles.count; i++)
            Tss2_Sys_FlushContext(sys, data.data.handles.handle[i]);
    }
}

/// The owner hierarchy's ECC P-256 storage key (fixed template: the same key on every call),
/// loaded; its name out when asked.
static TSS2_RC storage_key(ESYS_CONTEXT *context, ESYS_TR *key) {
    TPM2B_SENSITIVE_CREATE sensitive = {.size = 0};
    TPM2B_PUBLIC template = {
        .publicArea = {
            .type = TPM2_ALG_ECC,
            .nameAlg = TPM2_ALG_SHA256,
            .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT,
            .parameters.eccDetail = {
                .symmetric = {.algorithm = TPM2_ALG_AES,
                              .keyBits.aes = 128,
                              .mode.aes = TPM2_ALG_CFB},
                .scheme = {.scheme = TPM2_ALG_NULL},
                .curveID = TPM2_ECC_NIST_P256,
                .kdf = {.scheme = TPM2_ALG_NULL},
            },
        }};
    TPM2B_DATA outside = {.size = 0};
    TPML_PCR_SELECTION pcrs = {.count = 0};
    return Esys_CreatePrimary(context, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                              ESYS_TR_NONE, &sensitive, &template, &outside, &pcrs, key, NULL,
                              NULL, NULL, NULL);
}

static TSS2_RC start_salted(ESYS_CONTEXT *context, ESYS_TR key, TPM2_SE type, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = {
        .algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB};
    return Esys_StartAuthSession(context, key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                 ESYS_TR_NONE, NULL, type, &symmetric, TPM2_ALG_SHA256, session);
}

uint32_t keepsake_tpm_start_salted(ESYS_CONTEXT *context, uint32_t type, uint32_t *session) {
    ESYS_TR key = ESYS_TR_NONE;
    TSS2_RC rc = storage_key(context, &key);
    if (rc != TSS2_RC_SUCCESS) return rc;
    ESYS_TR started = ESYS_TR_NONE;
    rc = start_salted(context, key, (TPM2_SE)type, &started);
    Esys_FlushContext(context, key);
    if (rc == TSS2_RC_SUCCESS) *session = started;
    return rc;
}

uint32_t keepsake_tpm_salted_session(ESYS_CONTEXT *context, uint8_t *name, size_t *name_size,
                                     uint32_t *session) {
    flush_leftovers(context);
    ESYS_TR key = ESYS_TR_NONE;
    TSS2_RC rc = storage_key(context, &key);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_NAME *found = NULL;
    rc = Esys_TR_GetName(context, key, &found);
    if (rc == TSS2_RC_SUCCESS) {
        if (*name_size > 0 && (*name_size != found->size || memcmp(name, found->name, found->size)))
            rc = TPM2_RC_KEY;
        else if (found->size > 64)
            rc = TSS2_ESYS_RC_MALFORMED_RESPONSE;
        else {
            memcpy(name, found->name, found->size);
            *name_size = found->size;
        }
        Esys_Free(found);
    }
    if (rc == TSS2_RC_SUCCESS) {
        ESYS_TR started = ESYS_TR_NONE;
        rc = start_salted(context, key, TPM2_SE_HMAC, &started);
        if (rc == TSS2_RC_SUCCESS) *session = started;
    }
    Esys_FlushContext(context, key);
    return rc;
}

void keepsake_tpm_flush(ESYS_CONTEXT *context, uint32_t handle) {
    Esys_FlushContext(context, handle);
}

static TSS2_RC attributes(ESYS_CONTEXT *context, ESYS_TR session, TPMA_SESSION flags) {
    return Esys_TRSess_SetAttributes(context, session, keep | flags,
                                     keep | TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT);
}

static TSS2_RC index_handle(ESYS_CONTEXT *context, ESYS_TR session, uint32_t index,
                            ESYS_TR *handle) {
    // Read through the session: the index's public area (its name) comes back authenticated. A
    // session that authorizes nothing must encrypt (or audit): the response's public area.
    TSS2_RC rc = attributes(context, session, TPMA_SESSION_ENCRYPT);
    if (rc != TSS2_RC_SUCCESS) return rc;
    return Esys_TR_FromTPMPublic(context, index, session, ESYS_TR_NONE, ESYS_TR_NONE, handle);
}

uint32_t keepsake_tpm_state_define(ESYS_CONTEXT *context, uint32_t session, uint32_t index,
                                   const uint8_t *auth, size_t auth_size, const uint8_t *secret,
                                   size_t secret_size) {
    if (auth_size > sizeof(((TPM2B_AUTH *)0)->buffer) || secret_size > 64)
        return TSS2_ESYS_RC_BAD_VALUE;
    TPM2B_AUTH authorization = {.size = (UINT16)auth_size};
    memcpy(authorization.buffer, auth, auth_size);
    TPM2B_NV_PUBLIC info = keepsake_tpm_nv_public(index, TPM2_NT_ORDINARY, (uint16_t)secret_size);
    ESYS_TR handle = ESYS_TR_NONE;
    TSS2_RC rc = attributes(context, session, TPMA_SESSION_DECRYPT);
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_NV_DefineSpace(context, ESYS_TR_RH_OWNER, session, ESYS_TR_NONE, ESYS_TR_NONE,
                                 &authorization, &info, &handle);
    if (rc == TSS2_RC_SUCCESS) rc = Esys_TR_SetAuth(context, handle, &authorization);
    memset(&authorization, 0, sizeof authorization);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = attributes(context, session, TPMA_SESSION_DECRYPT);
    if (rc == TSS2_RC_SUCCESS)
        rc = keepsake_tpm_nv_write_secret(context, handle, session, secret, secret_size);
    if (rc != TSS2_RC_SUCCESS) attributes(context, session, 0);
    return keepsake_tpm_finish_define(context, &handle, session, rc);
}

uint32_t keepsake_tpm_state_read(ESYS_CONTEXT *context, uint32_t session, uint32_t index,
                                 const uint8_t *auth, size_t auth_size, uint8_t *secret_out,
                                 size_t secret_size) {
    if (auth_size > sizeof(((TPM2B_AUTH *)0)->buffer)) return TSS2_ESYS_RC_BAD_VALUE;
    ESYS_TR handle;
    TSS2_RC rc = index_handle(context, session, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = keepsake_tpm_set_auth(context, handle, auth, auth_size);
    if (rc == TSS2_RC_SUCCESS) rc = attributes(context, session, TPMA_SESSION_ENCRYPT);
    if (rc == TSS2_RC_SUCCESS)
        rc = keepsake_tpm_nv_read_secret(context, handle, session, secret_out, secret_size);
    Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_state_counter_define(ESYS_CONTEXT *context, uint32_t session,
                                           uint32_t index) {
    TPM2B_AUTH empty = {.size = 0};
    TPM2B_NV_PUBLIC info = keepsake_tpm_counter_public(index);
    ESYS_TR handle = ESYS_TR_NONE;
    TSS2_RC rc = attributes(context, session, 0);
    if (rc == TSS2_RC_SUCCESS)
        rc = Esys_NV_DefineSpace(context, ESYS_TR_RH_OWNER, session, ESYS_TR_NONE, ESYS_TR_NONE,
                                 &empty, &info, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    // A counter reads only once written: its first increment (to the highest value any counter
    // on this TPM ever had, so an undefined and redefined counter never goes back).
    rc = Esys_NV_Increment(context, handle, handle, session, ESYS_TR_NONE, ESYS_TR_NONE);
    Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_state_counter_increment(ESYS_CONTEXT *context, uint32_t session,
                                              uint32_t index) {
    ESYS_TR handle;
    TSS2_RC rc = index_handle(context, session, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = Esys_NV_Increment(context, handle, handle, session, ESYS_TR_NONE, ESYS_TR_NONE);
    Esys_TR_Close(context, &handle);
    return rc;
}

uint32_t keepsake_tpm_state_counter_read(ESYS_CONTEXT *context, uint32_t session, uint32_t index,
                                         uint64_t *value) {
    ESYS_TR handle;
    TSS2_RC rc = index_handle(context, session, index, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_MAX_NV_BUFFER *data = NULL;
    rc = Esys_NV_Read(context, handle, handle, session, ESYS_TR_NONE, ESYS_TR_NONE, 8, 0, &data);
    Esys_TR_Close(context, &handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = keepsake_tpm_counter_value(data, value);
    Esys_Free(data);
    return rc;
}

uint32_t keepsake_tpm_vendor(ESYS_CONTEXT *context, uint32_t *manufacturer, uint32_t *vendor) {
    TPMI_YES_NO more;
    TPMS_CAPABILITY_DATA *data = NULL;
    TSS2_RC rc = Esys_GetCapability(context, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                    TPM2_CAP_TPM_PROPERTIES, TPM2_PT_MANUFACTURER, 2, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    *manufacturer = 0;
    *vendor = 0;
    for (UINT32 i = 0; i < data->data.tpmProperties.count; i++) {
        TPMS_TAGGED_PROPERTY p = data->data.tpmProperties.tpmProperty[i];
        if (p.property == TPM2_PT_MANUFACTURER) *manufacturer = p.value;
        if (p.property == TPM2_PT_VENDOR_STRING_1) *vendor = p.value;
    }
    Esys_Free(data);
    return rc;
}
