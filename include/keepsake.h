/*
 * Keepsake from C: the recovery hint, generic passwords, the lock screen, Block Store and sync
 * of one app on this user's device (libKeepsakeC.so, `swift build -c release`).
 *
 * Conventions (docs/c-abi.md):
 * - Every function that can fail returns 0 or an OSStatus-style code: Apple's numbers for the
 *   Keychain and the device (errSecItemNotFound -25300, errSecDuplicateItem -25299,
 *   errSecAuthFailed -25293, errSecInteractionNotAllowed -25308, errSecParam -50,
 *   errSecNotAvailable -25291, …), Google's status codes (positive) for Block Store.
 * - `char **error` (may be NULL): on failure, a message the caller frees with
 *   keepsake_string_free; never a secret. Set to NULL on success.
 * - Strings in are UTF-8, at most 64 KiB; a name is its bytes (two names that differ in bytes are
 *   two items, whatever Unicode normalization would say). The limits enforced past that are the
 *   stores' own: a password's secret at most 64 KiB (the Keychain's), a Block Store key and value
 *   together at most 4096 bytes (Google's), a passcode at most 1 KiB. Bad input (NULL where the
 *   table below does not allow it, invalid UTF-8, too long, JSON with a key given twice) is
 *   errSecParam, never a crash.
 * - NULL, per argument (everywhere else NULL is errSecParam):
 *     error, notice                      may be NULL: nothing is reported there
 *     options_json (app_open)            NULL: no options
 *     accessible (password_add)          NULL: when-unlocked
 *     account (password_delete)          NULL: every account of the service
 *     service, account (password_search) NULL: any
 *     secret / value / passcode          NULL only with a length of 0
 *   service and account of password_get and password_update are never NULL: NULL is not "any".
 *   An empty string is a name like any other, never "any"; an empty option value (an empty
 *   "deviceDirectory") is errSecParam, never the working directory.
 * - Secrets the library copies in are wiped before their memory is freed, and so are its own
 *   copies of what it returns; what it returns is the caller's to free with
 *   keepsake_secret_free (which wipes it).
 * - Strings out are freed with keepsake_string_free; secrets out with keepsake_secret_free,
 *   which wipes them first.
 * - Handles are opaque numbers: a handle used after keepsake_app_close is errSecParam.
 * - Every function may be called from any thread, at once.
 */
#ifndef KEEPSAKE_H
#define KEEPSAKE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KEEPSAKE_ABI_VERSION 1u

typedef struct keepsake_app keepsake_app;

/* The library's ABI version: refuse to go on when it is not KEEPSAKE_ABI_VERSION. */
uint32_t keepsake_abi_version(void);

/* Opens an app on this user's device. options_json (or NULL): {"deviceDirectory", "container",
 * "cloud", "cloudCA", "escrow", "counter"} as the command line's options take them. */
int32_t keepsake_app_open(const char *app_id, const char *options_json, keepsake_app **out,
                          char **error);
/* 0, or errSecParam for a handle that is not open. */
int32_t keepsake_app_close(keepsake_app *app);

void keepsake_string_free(char *text);
void keepsake_secret_free(uint8_t *bytes, size_t length);

/* Generic passwords. synchronizable: 0 no, 1 yes, 2 any (queries only). accessible: a class's
 * command-line name (after-first-unlock, when-unlocked-this-device-only, …) or NULL for
 * when-unlocked. */
int32_t keepsake_password_add(keepsake_app *app, const char *service, const char *account,
                              const uint8_t *secret, size_t length, const char *accessible,
                              int32_t synchronizable, char **error);
int32_t keepsake_password_get(keepsake_app *app, const char *service, const char *account,
                              int32_t synchronizable, uint8_t **secret, size_t *length,
                              char **error);
int32_t keepsake_password_update(keepsake_app *app, const char *service, const char *account,
                                 int32_t synchronizable, const uint8_t *secret, size_t length,
                                 char **error);
/* account NULL: every account of service; service is never NULL. */
int32_t keepsake_password_delete(keepsake_app *app, const char *service, const char *account,
                                 int32_t synchronizable, char **error);
/* A JSON array of the matching items' attributes (never a secret); [] when none. service and
 * account NULL: any. */
int32_t keepsake_password_search(keepsake_app *app, const char *service, const char *account,
                                 int32_t synchronizable, char **json, char **error);

/* The recovery hint, with the plugin's semantics. get never fails: the hint as a JSON object,
 * or {} when there is none or it cannot be read (never "null"); NULL only for a handle that is not open. set merges the fields given and refuses an
 * empty, malformed or invalid payload (errSecParam): each string field at most 256 bytes of
 * UTF-8, no control or bidirectional-formatting character, no key given twice. */
char *keepsake_hint_get(keepsake_app *app);
int32_t keepsake_hint_set(keepsake_app *app, const char *json, char **error);
int32_t keepsake_hint_clear(keepsake_app *app, char **error);

/* The lock screen: its status as JSON; an unlock with the passcode's bytes, and (notice, may be
 * NULL) what to tell the owner of wrong passcodes since the last unlock and of wrong claims at
 * the account's escrow (one line each), or NULL. The tries it reports come back as it is
 * returned: show it. */
int32_t keepsake_lockscreen_status(keepsake_app *app, char **json, char **error);
int32_t keepsake_lockscreen_unlock(keepsake_app *app, const uint8_t *passcode, size_t length,
                                   char **notice, char **error);

/* Block Store: a value per key; backup != 0 asks for a cloud copy (under an E2EE-capable lock
 * screen). retrieve of an absent key: errSecItemNotFound. */
int32_t keepsake_blockstore_store(keepsake_app *app, const char *key, const uint8_t *value,
                                  size_t length, int32_t backup, char **error);
int32_t keepsake_blockstore_retrieve(keepsake_app *app, const char *key, uint8_t **value,
                                     size_t *length, char **error);
int32_t keepsake_blockstore_delete(keepsake_app *app, const char *key, char **error);

/* Syncs the Keychain's and Block Store's cloud copies (the "cloud" option). */
int32_t keepsake_sync(keepsake_app *app, char **error);

#ifdef __cplusplus
}
#endif

#endif
