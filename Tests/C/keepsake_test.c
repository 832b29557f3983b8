/* Every function of include/keepsake.h, through libKeepsakeC.so, on a private Secret Service
 * (scripts/test-c runs it under scripts/headless-session; again under AddressSanitizer). Exits 0
 * when every check holds; prints each failed check. */
#include "keepsake.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(condition, what)                                                    \
    do {                                                                          \
        if (!(condition)) {                                                       \
            fprintf(stderr, "FAILED: %s (line %d)\n", what, __LINE__);            \
            failures++;                                                           \
        }                                                                         \
    } while (0)

static const uint8_t secret[] = "s3cret-from-C";
static keepsake_app *shared_app;

static void *worker(void *argument) {
    long index = (long)argument;
    char account[32];
    int ok = 1;
    for (int round = 0; round < 10; round++) {
        snprintf(account, sizeof account, "thread-%ld-%d", index, round);
        char *error = NULL;
        if (keepsake_password_add(shared_app, "c-threads", account, secret, sizeof secret - 1,
                                  NULL, 0, &error) != 0) {
            ok = 0;
        }
        keepsake_string_free(error);
        uint8_t *bytes = NULL;
        size_t length = 0;
        if (keepsake_password_get(shared_app, "c-threads", account, 0, &bytes, &length, NULL) != 0 ||
            length != sizeof secret - 1 || memcmp(bytes, secret, length) != 0) {
            ok = 0;
        }
        keepsake_secret_free(bytes, length);
        if (keepsake_password_delete(shared_app, "c-threads", account, 0, NULL) != 0) ok = 0;
    }
    return ok ? (void *)1 : NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: keepsake_test DEVICE_DIRECTORY\n");
        return 2;
    }
    CHECK(keepsake_abi_version() == KEEPSAKE_ABI_VERSION, "the ABI version");

    char options[1024];
    snprintf(options, sizeof options, "{\"deviceDirectory\": \"%s\"}", argv[1]);
    keepsake_app *app = NULL;
    char *error = NULL;
    int32_t status = keepsake_app_open("com.example.c-test", options, &app, &error);
    CHECK(status == 0 && app != NULL, "open");
    if (error) fprintf(stderr, "open: %s\n", error);
    keepsake_string_free(error);
    if (app == NULL) return 1;

    /* Generic passwords. */
    status = keepsake_password_add(app, "c-service", "alice", secret, sizeof secret - 1,
                                   "after-first-unlock", 0, &error);
    CHECK(status == 0 && error == NULL, "add");
    status = keepsake_password_add(app, "c-service", "alice", secret, sizeof secret - 1, NULL, 0,
                                   &error);
    CHECK(status == -25299 && error != NULL, "a second add is errSecDuplicateItem, with a message");
    keepsake_string_free(error);
    uint8_t *bytes = NULL;
    size_t length = 0;
    status = keepsake_password_get(app, "c-service", "alice", 0, &bytes, &length, NULL);
    CHECK(status == 0 && length == sizeof secret - 1 && memcmp(bytes, secret, length) == 0, "get");
    keepsake_secret_free(bytes, length);
    const uint8_t changed[] = "changed";
    CHECK(keepsake_password_update(app, "c-service", "alice", 0, changed, 7, NULL) == 0, "update");
    status = keepsake_password_get(app, "c-service", "alice", 2, &bytes, &length, NULL);
    CHECK(status == 0 && length == 7 && memcmp(bytes, "changed", 7) == 0, "get after update");
    keepsake_secret_free(bytes, length);
    char *json = NULL;
    CHECK(keepsake_password_search(app, "c-service", NULL, 2, &json, NULL) == 0 && json &&
              strstr(json, "\"account\":\"alice\"") && !strstr(json, "changed"),
          "search: attributes, never the secret");
    keepsake_string_free(json);
    CHECK(keepsake_password_delete(app, "c-service", "alice", 0, NULL) == 0, "delete");
    CHECK(keepsake_password_get(app, "c-service", "alice", 0, &bytes, &length, NULL) == -25300,
          "get after delete is errSecItemNotFound");
    CHECK(keepsake_password_search(app, "c-service", NULL, 2, &json, NULL) == 0 && json &&
              strcmp(json, "[]") == 0,
          "search of none is []");
    keepsake_string_free(json);

    /* NULL is "any" only where the header says so: never a wildcard for a secret's name. */
    CHECK(keepsake_password_add(app, "c-null", "bob", secret, sizeof secret - 1, NULL, 0, NULL) == 0,
          "add for the NULL checks");
    CHECK(keepsake_password_get(app, NULL, "bob", 0, &bytes, &length, NULL) == -50,
          "get with a NULL service is errSecParam");
    CHECK(keepsake_password_get(app, "c-null", NULL, 0, &bytes, &length, NULL) == -50,
          "get with a NULL account is errSecParam");
    CHECK(keepsake_password_update(app, NULL, NULL, 0, changed, 7, NULL) == -50,
          "update with NULL names is errSecParam");
    CHECK(keepsake_password_delete(app, NULL, NULL, 0, NULL) == -50,
          "delete with a NULL service is errSecParam");
    CHECK(keepsake_password_get(app, "", "bob", 0, &bytes, &length, NULL) == -25300,
          "an empty service is a name, not any");
    CHECK(keepsake_password_get(app, "c-null", "bob", 0, &bytes, &length, NULL) == 0 &&
              length == sizeof secret - 1 && memcmp(bytes, secret, length) == 0,
          "the item is untouched");
    keepsake_secret_free(bytes, length);
    CHECK(keepsake_password_delete(app, "c-null", NULL, 0, NULL) == 0,
          "delete with a NULL account: every account of the service");
    keepsake_app *empty = NULL;
    CHECK(keepsake_app_open("com.example.c-test", "{\"deviceDirectory\": \"\"}", &empty, NULL) == -50 &&
              empty == NULL,
          "an empty deviceDirectory is errSecParam, not the working directory");
    CHECK(keepsake_app_open("com.example.c-test", "{\"cloud\": \"a\", \"cloud\": \"b\"}", &empty, NULL) == -50,
          "a duplicate option is errSecParam");

    /* The recovery hint. */
    char *hint = keepsake_hint_get(app);
    CHECK(hint && strcmp(hint, "{}") == 0, "no hint yet: {}");
    keepsake_string_free(hint);
    CHECK(keepsake_hint_set(app, "{\"lastWallet\":\"0x8a3f000000000000000000000000000000000000\"}", NULL) == 0, "hint set");
    CHECK(keepsake_hint_set(app, "{\"lastAuthenticatorId\":\"passkey-1\"}", NULL) == 0,
          "hint set of another field");
    hint = keepsake_hint_get(app);
    CHECK(hint && strstr(hint, "0x8a3f0000") && strstr(hint, "passkey-1"), "hint merged on set");
    keepsake_string_free(hint);
    CHECK(keepsake_hint_set(app, "{}", &error) == -50 && error, "an empty payload is refused");
    keepsake_string_free(error);
    CHECK(keepsake_hint_set(app, "not json", NULL) == -50, "a malformed payload is errSecParam");
    CHECK(keepsake_hint_set(app, "{\"lastWallet\":\"nope\"}", NULL) == -50,
          "an invalid field is errSecParam");
    CHECK(keepsake_hint_set(app, "{\"lastAuthenticatorId\":\"a\",\"lastAuthenticatorId\":\"b\"}", NULL) == -50,
          "a duplicate key is errSecParam");
    CHECK(keepsake_hint_clear(app, NULL) == 0, "hint clear");
    hint = keepsake_hint_get(app);
    CHECK(hint && strcmp(hint, "{}") == 0, "{} after clear");
    keepsake_string_free(hint);

    /* The lock screen. */
    CHECK(keepsake_lockscreen_status(app, &json, NULL) == 0 && json &&
              strstr(json, "\"kind\":\"none\""),
          "lock screen status");
    keepsake_string_free(json);
    char *notice = (char *)1;
    CHECK(keepsake_lockscreen_unlock(app, (const uint8_t *)"1234", 4, &notice, NULL) == 0 &&
              notice == NULL,
          "unlock without a lock screen: nothing to do, nothing to tell");

    /* Block Store. */
    const uint8_t value[] = {0, 1, 2, 255};
    CHECK(keepsake_blockstore_store(app, "passkey", value, 4, 0, NULL) == 0, "store");
    CHECK(keepsake_blockstore_retrieve(app, "passkey", &bytes, &length, NULL) == 0 && length == 4 &&
              memcmp(bytes, value, 4) == 0,
          "retrieve");
    keepsake_secret_free(bytes, length);
    CHECK(keepsake_blockstore_delete(app, "passkey", NULL) == 0, "delete an entry");
    CHECK(keepsake_blockstore_retrieve(app, "passkey", &bytes, &length, NULL) == -25300,
          "retrieve after delete: not found");

    /* Sync without a cloud: signed out, nothing to do. */
    CHECK(keepsake_sync(app, &error) == 0 && error == NULL, "sync without a cloud: nothing to do");

    /* Bad input across the boundary. */
    CHECK(keepsake_password_add(app, NULL, "a", secret, 3, NULL, 0, NULL) == -50, "NULL service");
    const char invalid[] = {'s', (char)0xC3, (char)0x28, 0};
    CHECK(keepsake_password_add(app, invalid, "a", secret, 3, NULL, 0, &error) == -50 && error &&
              strstr(error, "UTF-8"),
          "invalid UTF-8");
    keepsake_string_free(error);
    size_t big = (1 << 20) + 1;
    uint8_t *large = calloc(big, 1);
    CHECK(keepsake_password_add(app, "c-service", "big", large, big, NULL, 0, NULL) == -50,
          "an oversized secret");
    free(large);
    CHECK(keepsake_password_add(app, "c-service", "a", NULL, 5, NULL, 0, NULL) == -50,
          "NULL bytes with a length");
    CHECK(keepsake_password_add(app, "c-service", "a", secret, 3, "sometimes", 0, NULL) == -50,
          "an unknown class");
    CHECK(keepsake_password_get(app, "c-service", "a", 7, &bytes, &length, NULL) == -50,
          "synchronizable out of range");
    CHECK(keepsake_password_get(app, "c-service", "a", 0, NULL, NULL, NULL) != 0,
          "NULL output pointers");
    keepsake_app *other = NULL;
    CHECK(keepsake_app_open(NULL, NULL, &other, NULL) == -50 && other == NULL, "NULL app id");
    CHECK(keepsake_app_open("com.example.c-test", "[1]", &other, NULL) == -50 && other == NULL,
          "options that are not an object");

    /* Many threads at once on one handle. */
    shared_app = app;
    pthread_t threads[8];
    for (long index = 0; index < 8; index++) {
        pthread_create(&threads[index], NULL, worker, (void *)index);
    }
    int all = 1;
    for (int index = 0; index < 8; index++) {
        void *result = NULL;
        pthread_join(threads[index], &result);
        if (result == NULL) all = 0;
    }
    CHECK(all, "8 threads × 10 add/get/delete at once");

    /* A handle after its release. */
    CHECK(keepsake_app_close(app) == 0, "close");
    CHECK(keepsake_app_close(app) == -50, "closed twice: errSecParam");
    CHECK(keepsake_password_get(app, "c-service", "a", 0, &bytes, &length, &error) == -50 && error,
          "a closed handle is refused with a message");
    keepsake_string_free(error);
    CHECK(keepsake_hint_get(app) == NULL, "hint get of a closed handle: NULL");
    CHECK(keepsake_password_get((keepsake_app *)0x1234567, "s", "a", 0, &bytes, &length, NULL) ==
              -50,
          "a handle never opened");

    if (failures == 0) printf("keepsake_test: every check held\n");
    return failures == 0 ? 0 : 1;
}
