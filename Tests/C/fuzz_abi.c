/* A seed-driven fuzzer of every entry point of include/keepsake.h (scripts/test-c runs it, plain
 * and under AddressSanitizer, for a bounded number of inputs): each call gets arguments drawn from
 * the seed — NULL, empty, short names from a small alphabet (so that calls meet each other's
 * items), invalid UTF-8, strings over the 64 KiB limit, JSON-like text with repeated keys and deep
 * nesting, lengths up to past the limits, out-of-range flags, closed and forged handles. It
 * checks that every call returns (a watchdog ends a hang), that every status is 0, one of
 * Apple's or Google's codes, that outputs are set exactly on success, and that the same inputs
 * run a second time leave the heap no larger than a bounded slack (no leak).
 *
 * usage: fuzz_abi DEVICE_DIRECTORY SEED CALLS */
#define _GNU_SOURCE
#include "keepsake.h"

#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t state;
static uint64_t next(void) { /* SplitMix64 */
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return (size_t)(next() % n); }

static int failures = 0;
static long made[17], succeeded[17];
#define CHECK(condition, what, entry)                                                  \
    do {                                                                               \
        if (!(condition)) {                                                            \
            fprintf(stderr, "FAILED: %s: %s (line %d)\n", entry, what, __LINE__);      \
            failures++;                                                                \
        }                                                                              \
    } while (0)

/* The statuses a call may answer: 0, Apple's codes, Google's Block Store codes. */
static int known(int32_t status) {
    static const int32_t codes[] = {0,      -50,    -4,     -25291, -25293, -25299, -25300,
                                    -25308, -34018, -26275, -25243, -25244, -25294, -25295,
                                    -25307, -67671, -25320, -128};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (status == codes[i]) return 1;
    return status > 0 && status < 100000; /* Google's status codes */
}

/* A string argument, in a buffer kept until the next call of the same slot: half the time one
 * of a few names (so that calls meet each other's items: composed and decomposed é among them),
 * else drawn. */
static char *slots[4];
static const char *text(int slot) {
    static const char *names[] = {"a", "b", "caf\xc3\xa9", "cafe\xcc\x81", ""};
    free(slots[slot]);
    slots[slot] = NULL;
    if (below(2)) {
        slots[slot] = strdup(names[below(sizeof names / sizeof names[0])]);
        return slots[slot];
    }
    size_t kind = below(12);
    if (kind == 0) return NULL;
    size_t length;
    switch (kind) {
    case 1: length = 0; break;
    case 2: length = 64 * 1024 + 1 + below(16); break; /* over the limit */
    case 3: length = 64 * 1024; break;                 /* at it */
    default: length = 1 + below(6); break;
    }
    char *out = malloc(length + 1);
    for (size_t i = 0; i < length; i++) {
        switch (kind) {
        case 4: out[i] = (char)(0x80 + below(0x7f)); break; /* invalid UTF-8 */
        case 5: out[i] = "\xc3\xa9" "e" "\xcc\x81"[below(5)]; break; /* é, e + accent, cut anywhere */
        default: out[i] = "abc-."[below(5)]; break;
        }
    }
    out[length] = 0;
    slots[slot] = out;
    return out;
}

/* JSON-like text: objects of the options' and the hint's keys, repeated keys, deep nesting. */
static const char *json(int slot) {
    static const char *samples[] = {
        "{}",
        "[]",
        "null",
        "{\"lastWallet\":\"0x8a3f000000000000000000000000000000000000\"}",
        "{\"lastAuthenticatorId\":\"a\",\"lastAuthenticatorId\":\"b\"}",
        "{\"lastAuthenticatorId\":\"\\u202e\"}",
        "{\"lastLoginAt\":1.5}",
        "{\"lastLoginAt\":99999999999999999999}",
        "{\"deviceDirectory\":\"\"}",
        "{\"cloud\":\"a\",\"cloud\":\"b\"}",
        "{\"unknown\":1}",
        "{\"lastAuthenticatorId\":\"\\ud800\"}",
        "{\"a\":",
    };
    free(slots[slot]);
    slots[slot] = NULL;
    size_t kind = below(sizeof samples / sizeof samples[0] + 2);
    if (kind == 0) return NULL;
    if (kind == 1) { /* 100,000 deep */
        size_t depth = 100000;
        char *out = malloc(depth * 2 + 1);
        memset(out, '[', depth);
        memset(out + depth, ']', depth);
        out[depth * 2] = 0;
        slots[slot] = out;
        return out;
    }
    slots[slot] = strdup(samples[kind - 2]);
    return slots[slot];
}

static uint8_t bytes_buffer[70 * 1024];
static const uint8_t *bytes(size_t *length) {
    size_t kind = below(6);
    switch (kind) {
    case 0: *length = 0; return NULL;
    case 1: *length = 1 + below(8); return NULL; /* a length with NULL */
    case 2: *length = 64 * 1024 + below(2); break;
    case 3: *length = 4096 + below(2); break;
    default: *length = below(64); break;
    }
    for (size_t i = 0; i < *length; i++) bytes_buffer[i] = (uint8_t)next();
    return bytes_buffer;
}

static int32_t flag(void) { return below(8) == 0 ? (int32_t)next() : (int32_t)below(3); }

static keepsake_app *app;
static char device_options[1024];
static keepsake_app *handle(void) {
    switch (below(16)) {
    case 0: return NULL;
    case 1: return (keepsake_app *)(uintptr_t)(next() | 1); /* forged */
    default: return app;
    }
}

/* Runs one call of entry point `which`; checks its status and outputs. */
static void call(size_t which) {
    char *error = (char *)0x1; /* set by every call that takes it */
    char **error_out = below(4) == 0 ? NULL : &error;
    int32_t status = 0;
    const char *name = "";
    uint8_t *out = (uint8_t *)0x1;
    size_t length = 7;
    char *string = (char *)0x1;
    switch (which) {
    case 0: {
        name = "password_add";
        size_t n;
        const uint8_t *b = bytes(&n);
        static const char *classes[] = {"after-first-unlock", "when-unlocked-this-device-only",
                                        "always"};
        const char *class = below(2) ? NULL : below(2) ? classes[below(3)] : text(2);
        status = keepsake_password_add(handle(), text(0), text(1), b, n, class,
                                       below(4) ? (int32_t)below(2) : flag(), error_out);
        break;
    }
    case 1:
        name = "password_get";
        status = keepsake_password_get(handle(), text(0), text(1), flag(), below(8) ? &out : NULL,
                                       below(8) ? &length : NULL, error_out);
        if (status == 0) {
            keepsake_secret_free(out, length);
        }
        break;
    case 2: {
        name = "password_update";
        size_t n;
        const uint8_t *b = bytes(&n);
        status = keepsake_password_update(handle(), text(0), text(1), flag(), b, n, error_out);
        break;
    }
    case 3:
        name = "password_delete";
        status = keepsake_password_delete(handle(), text(0), text(1), flag(), error_out);
        break;
    case 4:
        name = "password_search";
        status = keepsake_password_search(handle(), text(0), text(1), flag(),
                                          below(8) ? &string : NULL, error_out);
        if (status == 0) {
            CHECK(string != NULL && string[0] == '[', "search answers a JSON array", name);
            keepsake_string_free(string);
        }
        break;
    case 5: {
        name = "hint_get";
        char *hint = keepsake_hint_get(handle());
        CHECK(hint == NULL || hint[0] == '{', "a hint object (or NULL for a handle not open)", name);
        keepsake_string_free(hint);
        return;
    }
    case 6:
        name = "hint_set";
        status = keepsake_hint_set(handle(), json(0), error_out);
        break;
    case 7:
        name = "hint_clear";
        status = keepsake_hint_clear(handle(), error_out);
        break;
    case 8:
        name = "lockscreen_status";
        status = keepsake_lockscreen_status(handle(), below(8) ? &string : NULL, error_out);
        if (status == 0) {
            CHECK(string != NULL && string[0] == '{', "status answers a JSON object", name);
            keepsake_string_free(string);
        }
        break;
    case 9: {
        name = "lockscreen_unlock";
        size_t n;
        const uint8_t *b = bytes(&n);
        if (n > 1024 && below(2)) n = 1025;
        char *notice = (char *)0x1;
        status = keepsake_lockscreen_unlock(handle(), b, n, below(2) ? &notice : NULL, error_out);
        if (notice != (char *)0x1) keepsake_string_free(notice);
        break;
    }
    case 10: {
        name = "blockstore_store";
        size_t n;
        const uint8_t *b = bytes(&n);
        status = keepsake_blockstore_store(handle(), text(0), b, n, flag(), error_out);
        break;
    }
    case 11:
        name = "blockstore_retrieve";
        status = keepsake_blockstore_retrieve(handle(), text(0), below(8) ? &out : NULL,
                                              below(8) ? &length : NULL, error_out);
        if (status == 0) keepsake_secret_free(out, length);
        break;
    case 12:
        name = "blockstore_delete";
        status = keepsake_blockstore_delete(handle(), text(0), error_out);
        break;
    case 13:
        name = "sync";
        status = keepsake_sync(handle(), error_out);
        break;
    case 14: {
        name = "app_open";
        keepsake_app *opened = (keepsake_app *)0x1;
        /* Half the time this run's own device and a valid app id: the open succeeds. */
        const char *id = below(2) ? "com.example.c-fuzz-open" : text(0);
        const char *options = below(2) ? device_options : json(1);
        status = keepsake_app_open(id, options, below(8) ? &opened : NULL, error_out);
        if (status == 0) {
            CHECK(opened != NULL && opened != (keepsake_app *)0x1, "a handle on success", name);
            CHECK(keepsake_app_close(opened) == 0, "the new handle closes", name);
            CHECK(keepsake_app_close(opened) == -50, "a closed handle is errSecParam", name);
        }
        break;
    }
    case 15:
        name = "app_close";
        status = keepsake_app_close(below(2) ? NULL : (keepsake_app *)(uintptr_t)(next() | 1));
        CHECK(status == -50, "closing what is not open is errSecParam", name);
        return;
    default:
        name = "abi_version / frees";
        CHECK(keepsake_abi_version() == KEEPSAKE_ABI_VERSION, "the ABI version", name);
        keepsake_string_free(NULL);
        keepsake_secret_free(NULL, 0);
        return;
    }
    made[which]++;
    if (status == 0) succeeded[which]++;
    CHECK(known(status), "a known status", name);
    if (error_out != NULL) {
        CHECK((status == 0) == (error == NULL), "a message exactly on failure", name);
        if (status != 0) {
            CHECK(error != (char *)0x1 && error != NULL, "the message is set", name);
            keepsake_string_free(error);
        }
    }
}

static void watchdog(int signal) {
    (void)signal;
    static const char message[] = "FAILED: a call did not return within the watchdog's bound\n";
    ssize_t ignored = write(2, message, sizeof message - 1);
    (void)ignored;
    _exit(3);
}

static void run(uint64_t seed, long calls) {
    state = seed;
    for (long i = 0; i < calls; i++) {
        alarm(60); /* a hang ends the run */
        call(below(17));
    }
    alarm(0);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: fuzz_abi DEVICE_DIRECTORY SEED CALLS\n");
        return 2;
    }
    signal(SIGALRM, watchdog);
    uint64_t seed = strtoull(argv[2], NULL, 10);
    long calls = strtol(argv[3], NULL, 10);
    snprintf(device_options, sizeof device_options, "{\"deviceDirectory\": \"%s\"}", argv[1]);
    if (keepsake_app_open("com.example.c-fuzz", device_options, &app, NULL) != 0) {
        fprintf(stderr, "fuzz_abi: open failed\n");
        return 1;
    }
    /* Warm-up (the library's caches and the provider's first items), then the same inputs twice:
     * the heap after the second run is not larger than after the first, past a slack. */
    run(seed, calls);
    struct mallinfo2 first = mallinfo2();
    run(seed, calls);
    struct mallinfo2 second = mallinfo2();
    long grown = (long)second.uordblks - (long)first.uordblks;
    long slack = 4 * 1024 * 1024;
    CHECK(grown < slack, "the heap grew past the slack on the same inputs again (a leak)", "all");
    for (int i = 0; i < 4; i++) free(slots[i]);
    keepsake_app_close(app);
    printf("fuzz_abi: calls that succeeded, per entry point:");
    for (int i = 0; i < 15; i++) printf(" %ld/%ld", succeeded[i], made[i]);
    printf("\n");
    printf("fuzz_abi: seed %llu, %ld calls twice over 17 entry points, %d failures, heap %+ld bytes\n",
           (unsigned long long)seed, calls, failures, grown);
    return failures == 0 ? 0 : 1;
}
