/* An allocator hook for Tests/C/wipe_test.c (LD_PRELOAD): every block freed (by free, or moved
 * by realloc) is searched for the test's plaintext marker, and each one still holding it is
 * counted — plaintext left in freed memory, where a later allocation or a core dump reads it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

static const char marker[] = "KEEPSAKE-UNWIPED-MARKER-7f3a9c41";
static atomic_long unwiped;
static void (*real_free)(void *);
static void *(*real_realloc)(void *, size_t);
static _Thread_local int resolving;

static void check(void *block) {
    if (block == NULL) return;
    size_t size = malloc_usable_size(block);
    if (memmem(block, size, marker, sizeof marker - 1) != NULL) atomic_fetch_add(&unwiped, 1);
}

static int resolve(void) {
    if (real_free != NULL && real_realloc != NULL) return 1;
    if (resolving) return 0; /* dlsym allocating: its blocks are not ours to search */
    resolving = 1;
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    resolving = 0;
    return real_free != NULL && real_realloc != NULL;
}

void free(void *block) {
    if (!resolve()) return; /* leaked, during dlsym only */
    check(block);
    real_free(block);
}

void *realloc(void *block, size_t size) {
    if (!resolve()) return NULL;
    if (block == NULL) return real_realloc(block, size);
    /* Searched before the move: if the block moves, the old one is freed as it was. */
    size_t before = malloc_usable_size(block);
    int held = memmem(block, before, marker, sizeof marker - 1) != NULL;
    void *moved = real_realloc(block, size);
    if (held && moved != NULL && moved != block) atomic_fetch_add(&unwiped, 1);
    return moved;
}

long keepsake_test_unwiped_frees(void) { return atomic_load(&unwiped); }
