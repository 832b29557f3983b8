#ifndef CKEEPSAKE_TPM_LOADED_H
#define CKEEPSAKE_TPM_LOADED_H

// tpm2-tss is loaded when a TPM is first opened (dlopen), not linked: a process that never uses a
// TPM (most `keepsake` commands, an app's reads) does not load its four libraries. Every file
// that calls tpm2-tss includes this after the tss2 headers; the calls read as usual and go
// through the table `keepsake_tpm_load` fills.

#include <tss2/tss2_esys.h>
#include <tss2/tss2_sys.h>
#include <tss2/tss2_tctildr.h>

#define KEEPSAKE_TSS2_FUNCTIONS(X)                                                                 \
    X(Esys_CreatePrimary) X(Esys_DictionaryAttackLockReset) X(Esys_DictionaryAttackParameters)     \
    X(Esys_Finalize) X(Esys_FlushContext) X(Esys_Free) X(Esys_GetCapability)                       \
    X(Esys_GetSysContext) X(Esys_HierarchyChangeAuth) X(Esys_Initialize) X(Esys_NV_DefineSpace)    \
    X(Esys_NV_Increment) X(Esys_NV_Read) X(Esys_NV_UndefineSpace) X(Esys_NV_Write)                 \
    X(Esys_PolicyAuthValue) X(Esys_PolicyGetDigest) X(Esys_PolicyNV) X(Esys_StartAuthSession)      \
    X(Esys_TRSess_SetAttributes) X(Esys_TR_Close) X(Esys_TR_FromTPMPublic) X(Esys_TR_GetName)      \
    X(Esys_TR_SetAuth) X(Tss2_Sys_FlushContext) X(Tss2_Sys_GetCapability)                          \
    X(Tss2_TctiLdr_Finalize) X(Tss2_TctiLdr_Initialize)

struct keepsake_tss2 {
#define KEEPSAKE_TSS2_FIELD(name) __typeof__(&name) name;
    KEEPSAKE_TSS2_FUNCTIONS(KEEPSAKE_TSS2_FIELD)
#undef KEEPSAKE_TSS2_FIELD
};
extern struct keepsake_tss2 keepsake_tss2;

/// Loads tpm2-tss once; 0 when every function is there, else TSS2_TCTI_RC_NOT_IMPLEMENTED
/// (`keepsake_tpm_load_error` says why).
uint32_t keepsake_tpm_load(void);

#ifndef KEEPSAKE_TSS2_TABLE_ONLY
#define Esys_CreatePrimary keepsake_tss2.Esys_CreatePrimary
#define Esys_DictionaryAttackLockReset keepsake_tss2.Esys_DictionaryAttackLockReset
#define Esys_DictionaryAttackParameters keepsake_tss2.Esys_DictionaryAttackParameters
#define Esys_Finalize keepsake_tss2.Esys_Finalize
#define Esys_FlushContext keepsake_tss2.Esys_FlushContext
#define Esys_Free keepsake_tss2.Esys_Free
#define Esys_GetCapability keepsake_tss2.Esys_GetCapability
#define Esys_GetSysContext keepsake_tss2.Esys_GetSysContext
#define Esys_HierarchyChangeAuth keepsake_tss2.Esys_HierarchyChangeAuth
#define Esys_Initialize keepsake_tss2.Esys_Initialize
#define Esys_NV_DefineSpace keepsake_tss2.Esys_NV_DefineSpace
#define Esys_NV_Increment keepsake_tss2.Esys_NV_Increment
#define Esys_NV_Read keepsake_tss2.Esys_NV_Read
#define Esys_NV_UndefineSpace keepsake_tss2.Esys_NV_UndefineSpace
#define Esys_NV_Write keepsake_tss2.Esys_NV_Write
#define Esys_PolicyAuthValue keepsake_tss2.Esys_PolicyAuthValue
#define Esys_PolicyGetDigest keepsake_tss2.Esys_PolicyGetDigest
#define Esys_PolicyNV keepsake_tss2.Esys_PolicyNV
#define Esys_StartAuthSession keepsake_tss2.Esys_StartAuthSession
#define Esys_TRSess_SetAttributes keepsake_tss2.Esys_TRSess_SetAttributes
#define Esys_TR_Close keepsake_tss2.Esys_TR_Close
#define Esys_TR_FromTPMPublic keepsake_tss2.Esys_TR_FromTPMPublic
#define Esys_TR_GetName keepsake_tss2.Esys_TR_GetName
#define Esys_TR_SetAuth keepsake_tss2.Esys_TR_SetAuth
#define Tss2_Sys_FlushContext keepsake_tss2.Tss2_Sys_FlushContext
#define Tss2_Sys_GetCapability keepsake_tss2.Tss2_Sys_GetCapability
#define Tss2_TctiLdr_Finalize keepsake_tss2.Tss2_TctiLdr_Finalize
#define Tss2_TctiLdr_Initialize keepsake_tss2.Tss2_TctiLdr_Initialize

#endif

#endif
