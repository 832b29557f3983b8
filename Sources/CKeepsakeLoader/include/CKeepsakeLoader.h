#ifndef CKEEPSAKE_LOADER_H
#define CKEEPSAKE_LOADER_H

#include <stddef.h>

// How the shims load the C libraries they call instead of linking them (libsecret and libdbus,
// tpm2-tss, libcurl): a process loads a library only when it first uses it. The rule is here
// once: each library is opened RTLD_LOCAL, so that nothing loaded later resolves against it, and
// each function is looked up in the named libraries only, never elsewhere in the process.

/// One function of a table: its name in the libraries and where its pointer goes in the table.
typedef struct {
    const char *name;
    size_t offset;
} keepsake_symbol;

/// Opens the `library_count` `libraries` (`mode` is RTLD_NOW or RTLD_LAZY; RTLD_LOCAL is always
/// added) and writes each of the `symbol_count` `symbols` into `table` at its offset, looked up in
/// those libraries in order. Returns 1 when every library and function is there. Otherwise 0, with
/// `error` saying which is missing (`packages`: the Debian packages that provide the libraries);
/// the table is then not to be used.
int keepsake_load_table(const char *const *libraries, size_t library_count, int mode,
                        const keepsake_symbol *symbols, size_t symbol_count, void *table,
                        const char *packages, char *error, size_t error_size);

#endif
