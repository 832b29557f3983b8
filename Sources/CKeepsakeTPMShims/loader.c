#include "CKeepsakeTPMShims.h"

#include <CKeepsakeLoader.h>
#include <dlfcn.h>
#include <pthread.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_sys.h>
#include <tss2/tss2_tctildr.h>

// The table itself: filled here, before loaded.h renames the functions to its fields.
#define KEEPSAKE_TSS2_TABLE_ONLY
#include "loaded.h"

struct keepsake_tss2 keepsake_tss2;
static char load_error[256];
static uint32_t load_result = TSS2_TCTI_RC_NOT_IMPLEMENTED;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    static const char *const libraries[] = {"libtss2-esys.so.0", "libtss2-sys.so.1",
                                            "libtss2-tctildr.so.0"};
    static const keepsake_symbol symbols[] = {
#define KEEPSAKE_TSS2_SYMBOL(name) {#name, offsetof(struct keepsake_tss2, name)},
        KEEPSAKE_TSS2_FUNCTIONS(KEEPSAKE_TSS2_SYMBOL)
#undef KEEPSAKE_TSS2_SYMBOL
    };
    if (keepsake_load_table(libraries, 3, RTLD_NOW, symbols, sizeof symbols / sizeof symbols[0],
                            &keepsake_tss2, "libtss2-esys-3.0.2-0, libtss2-sys1 and libtss2-tctildr0",
                            load_error, sizeof load_error))
        load_result = TSS2_RC_SUCCESS;
}

uint32_t keepsake_tpm_load(void) {
    pthread_once(&once, load);
    return load_result;
}

const char *keepsake_tpm_load_error(void) {
    return keepsake_tpm_load() == TSS2_RC_SUCCESS ? NULL : load_error;
}
