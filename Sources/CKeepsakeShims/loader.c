#include "CKeepsakeShims.h"

#include <CKeepsakeLoader.h>
#include <dlfcn.h>
#include <pthread.h>

// The table itself: filled here, before loaded.h renames the functions to its fields.
#define KEEPSAKE_SECRET_TABLE_ONLY
#include "loaded.h"

struct keepsake_secret_libs keepsake_secret_libs;
static char load_error[320];
static int loaded = 0;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    // Bound lazily, as when libsecret was linked (a first connection binds only what it calls).
    // Each function is looked up in libsecret's tree (GIO, GObject, GLib) or libdbus's.
    static const char *const libraries[] = {"libsecret-1.so.0", "libdbus-1.so.3"};
    static const keepsake_symbol symbols[] = {
#define KEEPSAKE_SECRET_SYMBOL(name) {#name, offsetof(struct keepsake_secret_libs, name)},
        KEEPSAKE_SECRET_FUNCTIONS(KEEPSAKE_SECRET_SYMBOL)
#undef KEEPSAKE_SECRET_SYMBOL
    };
    loaded = keepsake_load_table(libraries, 2, RTLD_LAZY, symbols,
                                 sizeof symbols / sizeof symbols[0], &keepsake_secret_libs,
                                 "libsecret-1-0 and libdbus-1-3", load_error, sizeof load_error);
}

const char *keepsake_shims_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : load_error;
}

// What the Swift side calls of these libraries, through the table.
void keepsake_g_free(void *memory) { keepsake_secret_libs.g_free(memory); }
void keepsake_g_object_unref(void *object) { keepsake_secret_libs.g_object_unref(object); }
void keepsake_g_error_free(GError *error) { keepsake_secret_libs.g_error_free(error); }
void keepsake_g_strfreev(gchar **strings) { keepsake_secret_libs.g_strfreev(strings); }
GCancellable *keepsake_g_cancellable_new(void) {
    return keepsake_secret_libs.g_cancellable_new();
}
void keepsake_g_cancellable_cancel(GCancellable *cancellable) {
    keepsake_secret_libs.g_cancellable_cancel(cancellable);
}
const void *keepsake_secret_value_get(SecretValue *value, gsize *length) {
    return keepsake_secret_libs.secret_value_get(value, length);
}
