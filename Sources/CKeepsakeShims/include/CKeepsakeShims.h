#ifndef CKEEPSAKE_SHIMS_H
#define CKEEPSAKE_SHIMS_H

#include <stddef.h>

/* The GLib and libsecret types the functions below take, as their callers see them: opaque, so
 * that nothing which imports this header needs GLib's headers or links GLib. The shims' own files
 * include GLib's and libsecret's headers, whose typedefs these repeat (the same types). A Swift
 * file that also imports CSecret (GLib's own types: tests only) would see two GErrors. */
typedef int gboolean;
typedef char gchar;
typedef unsigned long gsize;
typedef struct _GError GError;
typedef struct _GCancellable GCancellable;
typedef struct _SecretService SecretService;
typedef struct _SecretValue SecretValue;

/// A GError's code and message (its struct stays GLib's).
int keepsake_error_code(const GError *error);
const char *keepsake_error_message(const GError *error);

/* The codes of GLib's and libsecret's errors the callers tell apart (GIOErrorEnum, SecretError):
 * stable ABI, checked against their headers where the shims compile (shims.c). */
enum {
    KEEPSAKE_G_IO_ERROR_CLOSED = 18,
    KEEPSAKE_G_IO_ERROR_CANCELLED = 19,
    KEEPSAKE_G_IO_ERROR_TIMED_OUT = 24,
    KEEPSAKE_SECRET_ERROR_IS_LOCKED = 2,
    KEEPSAKE_SECRET_ERROR_NO_SUCH_OBJECT = 3,
};

/// Loads libsecret and GIO once, on first need (loader.c), and finds every function the shims
/// call: NULL when all are there, else why not. Before any other call below.
const char *keepsake_shims_load(void);

/// What Swift calls of GLib and libsecret, through the loaded table (after keepsake_shims_load).
void keepsake_g_free(void *memory);
void keepsake_g_object_unref(void *object);
void keepsake_g_error_free(GError *error);
void keepsake_g_strfreev(gchar **strings);
GCancellable *keepsake_g_cancellable_new(void);
void keepsake_g_cancellable_cancel(GCancellable *cancellable);
const void *keepsake_secret_value_get(SecretValue *value, gsize *length);

/// Why: a SecretService proxy on a bus of our choosing (g_initable_new is variadic), with
/// exit-on-close off so a dying bus never takes the process with it, and a plain session opened
/// (every secret written under it: `session` NULL in the calls below).
SecretService *keepsake_service_open(const char *bus_address, int timeout_ms,
                                     GCancellable *cancellable, GError **error);

/// The direct reads' connection: libdbus, a plain session of its own (reader.c). Opened apart
/// from libsecret's, so that a process that only reads never starts GDBus.
typedef struct KeepsakeReader KeepsakeReader;

/// Why: connects (bus_address NULL or empty: the session bus), says Hello, asks one property and
/// opens the session; NULL with `error` set on failure.
KeepsakeReader *keepsake_reader_open(const char *bus_address, int timeout_ms, GError **error);
void keepsake_reader_close(KeepsakeReader *reader);

/// Why: a collection's SearchItems (its a{ss} built from two C arrays) and its Locked property,
/// both in flight at once, on the caller's thread.
gboolean keepsake_collection_search(KeepsakeReader *reader, const char *collection_path,
                                    unsigned count, const char *const *keys,
                                    const char *const *values, gchar ***paths,
                                    gboolean *collection_locked, GError **error);

/// The secrets of one batched GetSecrets call.
typedef struct {
    unsigned count;
    gchar **paths;
    SecretValue **values;
} KeepsakeSecretList;

/// Why: one GetSecrets round trip on the caller's thread, the reply flattened.
KeepsakeSecretList *keepsake_service_get_secrets(KeepsakeReader *reader, const char *const *paths,
                                                 GError **error);
void keepsake_secret_list_free(KeepsakeSecretList *list);

/// Why: builds the properties GHashTable of GVariants (label, attributes) for CreateItem.
gchar *keepsake_service_create_item(SecretService *service, const char *collection_path,
                                    const char *label, unsigned count, const char *const *keys,
                                    const char *const *values, const void *secret,
                                    size_t secret_length, gboolean replace,
                                    const char *session, GCancellable *cancellable,
                                    GError **error);
/* Item.Delete, with any prompt it answers with performed under the cancellable. */
gboolean keepsake_item_delete(SecretService *service, const char *item_path,
                              GCancellable *cancellable, GError **error);

/// Why: a collection's Items property (ao in a variant), read and type-checked in GVariant.
/// A NULL-terminated array of object paths, freed with keepsake_g_strfreev.
gchar **keepsake_collection_items(SecretService *service, const char *collection_path,
                                  GCancellable *cancellable, GError **error);
/// Why: an item's xdg:schema out of its Attributes property (a{ss} in a variant); "" for an item
/// without one. Freed with keepsake_g_free.
gchar *keepsake_item_schema(SecretService *service, const char *item_path,
                            GCancellable *cancellable, GError **error);

/// Why: gnome-keyring's prompt-free unlock; the master secret must be encoded for the proxy's own
/// session on the proxy's own connection (GVariant juggling).
gboolean keepsake_service_unlock_with_master_password(SecretService *service,
                                                      const char *collection_path,
                                                      const void *password, size_t length,
                                                      GCancellable *cancellable, GError **error);

/// Why: gnome-keyring's prompt-free collection creation (same GVariant juggling as unlock).
gchar *keepsake_service_create_collection_with_master_password(
    SecretService *service, const char *label, const void *password, size_t length,
    GCancellable *cancellable, GError **error);

/// Why: the collection's Locked property, one round trip on the caller's thread.
gboolean keepsake_collection_is_locked(KeepsakeReader *reader, const char *path,
                                       gboolean *locked, GError **error);
/// Why: Secret.Service.Lock returns (ao locked, o prompt); a prompt path means a prompt is needed.
gboolean keepsake_service_lock(SecretService *service, const char *path, gboolean *needs_prompt,
                               GCancellable *cancellable, GError **error);

/// Why: the D-Bus error name (org.freedesktop.Secret.Error.IsLocked, …) without GLib in Swift.
gchar *keepsake_error_dbus_name(const GError *error);

/// Why: g_quark_to_string of GError's domain, kept next to the other GError juggling.
const char *keepsake_error_domain(const GError *error);

/// Why: Item.SetSecret needs the secret encoded for the session (GVariant juggling). Replaces an
/// item's secret in place, which every provider allows without a prompt for items the caller
/// made (unlike CreateItem with replace, which KeePassXC 2.7.4 answers with a dialog).
gboolean keepsake_item_set_secret(SecretService *service, const char *item_path, const void *secret,
                                  size_t secret_length, const char *session,
                                  GCancellable *cancellable, GError **error);

/// Why: the Attributes and Label properties are set through org.freedesktop.DBus.Properties with
/// an a{ss} GVariant built from two C arrays.
gboolean keepsake_item_set_attributes(SecretService *service, const char *item_path,
                                      const char *label, unsigned count, const char *const *keys,
                                      const char *const *values, GCancellable *cancellable,
                                      GError **error);

/// Why: prctl is variadic. Makes the process non-dumpable (no core file, no ptrace or
/// /proc/PID/mem by other processes of the user) and sets the core size limit to 0. Returns 0 on
/// success, -1 with errno set.
int keepsake_process_harden(void);

#endif
