#include "CKeepsakeLoader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

enum { maximum_libraries = 4 };

int keepsake_load_table(const char *const *libraries, size_t library_count, int mode,
                        const keepsake_symbol *symbols, size_t symbol_count, void *table,
                        const char *packages, char *error, size_t error_size) {
    if (library_count == 0 || library_count > maximum_libraries) {
        snprintf(error, error_size, "the loader takes 1 to %d libraries", maximum_libraries);
        return 0;
    }
    // Handles stay open for the life of the process: the table points into them.
    void *handles[maximum_libraries];
    for (size_t i = 0; i < library_count; i++) {
        handles[i] = dlopen(libraries[i], mode | RTLD_LOCAL);
        if (!handles[i]) {
            snprintf(error, error_size, "%s could not be loaded (install %s): %s", libraries[i],
                     packages, dlerror());
            return 0;
        }
    }
    for (size_t s = 0; s < symbol_count; s++) {
        void *symbol = NULL;
        for (size_t i = 0; i < library_count && !symbol; i++)
            symbol = dlsym(handles[i], symbols[s].name);
        if (!symbol) {
            int written = snprintf(error, error_size, "no %s in", symbols[s].name);
            for (size_t i = 0; i < library_count && written >= 0 && (size_t)written < error_size; i++)
                written += snprintf(error + written, error_size - written, "%s %s",
                                    i == 0 ? "" : " or", libraries[i]);
            return 0;
        }
        // A function pointer's bytes, as dlsym gives them (POSIX: the same size as void *).
        _Static_assert(sizeof(void (*)(void)) == sizeof(void *), "function pointers are void *'s size");
        memcpy((char *)table + symbols[s].offset, &symbol, sizeof symbol);
    }
    return 1;
}
