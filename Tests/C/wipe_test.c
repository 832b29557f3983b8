/* Secrets wiped on every path through the C boundary: a password and a Block Store value are
 * added, read, updated and read again, each call's returned copy freed with
 * keepsake_secret_free; Tests/C/free_hook.c (LD_PRELOAD) counts every freed block that still
 * holds the plaintext. Exits 0 when none does. */
#include "keepsake.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The marker free_hook.c searches for, and two secrets that hold it. */
static const char first[] = "KEEPSAKE-UNWIPED-MARKER-7f3a9c41 first secret";
static const char second[] = "KEEPSAKE-UNWIPED-MARKER-7f3a9c41 second secret";

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: wipe_test DEVICE_DIRECTORY\n");
        return 2;
    }
    long (*unwiped)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "keepsake_test_unwiped_frees");
    if (unwiped == NULL) {
        fprintf(stderr, "wipe_test: run with LD_PRELOAD=free_hook.so\n");
        return 2;
    }
    char options[1024];
    snprintf(options, sizeof options, "{\"deviceDirectory\": \"%s\"}", argv[1]);
    keepsake_app *app = NULL;
    if (keepsake_app_open("com.example.c-wipe", options, &app, NULL) != 0) {
        fprintf(stderr, "wipe_test: open failed\n");
        return 1;
    }
    int failures = 0;
    for (int round = 0; round < 3; round++) {
        uint8_t *bytes = NULL;
        size_t length = 0;
        failures += keepsake_password_add(app, "wipe", "a", (const uint8_t *)first,
                                          sizeof first - 1, NULL, 0, NULL) != 0;
        failures += keepsake_password_get(app, "wipe", "a", 0, &bytes, &length, NULL) != 0;
        keepsake_secret_free(bytes, length);
        failures += keepsake_password_update(app, "wipe", "a", 0, (const uint8_t *)second,
                                             sizeof second - 1, NULL) != 0;
        failures += keepsake_password_get(app, "wipe", "a", 0, &bytes, &length, NULL) != 0;
        keepsake_secret_free(bytes, length);
        failures += keepsake_password_delete(app, "wipe", "a", 0, NULL) != 0;
        failures += keepsake_blockstore_store(app, "wipe", (const uint8_t *)first,
                                              sizeof first - 1, 0, NULL) != 0;
        failures += keepsake_blockstore_retrieve(app, "wipe", &bytes, &length, NULL) != 0;
        keepsake_secret_free(bytes, length);
        failures += keepsake_blockstore_delete(app, "wipe", NULL) != 0;
    }
    keepsake_app_close(app);
    long left = unwiped();
    printf("wipe_test: %d failed calls, %ld freed blocks still holding a secret\n", failures, left);
    return failures == 0 && left == 0 ? 0 : 1;
}
