#include "CKeepsakeShims.h"
#include <string.h>
#include "loaded.h"

_Static_assert(KEEPSAKE_G_IO_ERROR_CLOSED == G_IO_ERROR_CLOSED, "GIOErrorEnum moved");
_Static_assert(KEEPSAKE_G_IO_ERROR_CANCELLED == G_IO_ERROR_CANCELLED, "GIOErrorEnum moved");
_Static_assert(KEEPSAKE_G_IO_ERROR_TIMED_OUT == G_IO_ERROR_TIMED_OUT, "GIOErrorEnum moved");
_Static_assert(KEEPSAKE_SECRET_ERROR_IS_LOCKED == SECRET_ERROR_IS_LOCKED, "SecretError moved");
_Static_assert(KEEPSAKE_SECRET_ERROR_NO_SUCH_OBJECT == SECRET_ERROR_NO_SUCH_OBJECT,
               "SecretError moved");

int keepsake_error_code(const GError *error) { return error->code; }
const char *keepsake_error_message(const GError *error) { return error->message; }

#define SECRETS_NAME "org.freedesktop.secrets"
#define SECRETS_PATH "/org/freedesktop/secrets"
#define GUILT_RIDDEN "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"

/* Replies are outside input: every proxy call below is checked by GDBus against the interface
 * description libsecret attaches to its SecretService proxy (g-interface-info), so a reply of
 * another type than the method's is an error before any of it is read (the impostor test shows
 * it); the other calls whose reply is read pass its type to g_dbus_connection_call_sync. The
 * direct reads (reader.c) check their replies' types themselves. */

/* The key under which a connection keeps the path of its plain session. */
#define PLAIN_SESSION "keepsake-plain-session"

/* Opens a "plain" session: what Keepsake writes is sealed before it leaves the process (an
 * envelope under a class key, the device record's keys wrapped), as what its reads carry
 * (reader.c), so the provider's transport encryption adds nothing — and kwalletd5's DH sessions
 * fail about one exchange in 256 (a public key refused, or a key one byte short that rejects a
 * CreateItem after registering its item: KDE bug 514194). libsecret's DH session is opened only
 * for gnome-keyring's master password (`master_secret`). The path, newly allocated. */
static gchar *open_plain_session(SecretService *service, GCancellable *cancellable,
                                 GError **error) {
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, SECRETS_PATH,
        "org.freedesktop.Secret.Service", "OpenSession",
        g_variant_new("(sv)", "plain", g_variant_new_string("")), G_VARIANT_TYPE("(vo)"),
        G_DBUS_CALL_FLAGS_NO_AUTO_START, g_dbus_proxy_get_default_timeout(proxy), cancellable,
        error);
    if (reply == NULL) return NULL;
    GVariant *output = NULL;
    gchar *path = NULL;
    g_variant_get(reply, "(vo)", &output, &path);
    g_variant_unref(output);
    g_variant_unref(reply);
    return path;
}

SecretService *keepsake_service_open(const char *bus_address, int timeout_ms,
                                     GCancellable *cancellable, GError **error) {
    GDBusConnection *connection;
    if (bus_address != NULL && bus_address[0] != '\0') {
        connection = g_dbus_connection_new_for_address_sync(
            bus_address,
            G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
            NULL, cancellable, error);
    } else {
        connection = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable, error);
    }
    if (connection == NULL) return NULL;
    g_dbus_connection_set_exit_on_close(connection, FALSE);

    // libsecret's SecretService forces the proxy's "g-bus-type" to the session bus, and
    // GDBusProxy then refuses a connection of our own (it asserts). GDBusProxyPrivate starts with
    // its GBusType (GLib >= 2.26); we reset it to NONE, after checking it reads SESSION, so that
    // the proxy uses `connection`.
    SecretService *service = g_object_new(
        SECRET_TYPE_SERVICE, "g-flags", G_DBUS_PROXY_FLAGS_NONE, "g-name", SECRETS_NAME,
        "g-connection", connection, "g-object-path", SECRETS_PATH, "g-interface-name",
        "org.freedesktop.Secret.Service", "flags", SECRET_SERVICE_NONE, NULL);
    GBusType *bus_type = (GBusType *)G_DBUS_PROXY(service)->priv;
    if (*bus_type != G_BUS_TYPE_SESSION && *bus_type != G_BUS_TYPE_NONE) {
        g_object_unref(service);
        g_object_unref(connection);
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                            "unexpected GDBusProxy layout in this GLib");
        return NULL;
    }
    *bus_type = G_BUS_TYPE_NONE;
    if (!g_initable_init(G_INITABLE(service), cancellable, error)) g_clear_object(&service);
    g_object_unref(connection);
    if (service == NULL) return NULL;
    g_dbus_proxy_set_default_timeout(G_DBUS_PROXY(service), timeout_ms);
    // Asked after the proxy's GetAll was answered (gnome-keyring may abort on a client whose
    // first call is OpenSession: reader.c).
    gchar *session = open_plain_session(service, cancellable, error);
    if (session == NULL) {
        g_object_unref(service);
        return NULL;
    }
    g_object_set_data_full(G_OBJECT(service), PLAIN_SESSION, session, g_free);
    return service;
}

/* Performs the prompt a method answered with ("/" means none), bounded by `cancellable`: some
 * providers answer with a prompt that completes on its own (KeePassXC's CreateItem), others with
 * one that needs a person. One that is cancelled (nobody answered within the bound) is dismissed
 * by libsecret and reported as a prompt that needs a person, which the caller maps to
 * errSecInteractionNotAllowed. If libsecret itself never comes back, the caller's worker thread
 * is abandoned (SecretServiceConnection.bounded). */
static gboolean perform_prompt(SecretService *service, const gchar *prompt,
                               const GVariantType *type, GVariant **result,
                               GCancellable *cancellable, GError **error) {
    if (result) *result = NULL;
    if (prompt == NULL || strcmp(prompt, "/") == 0) return TRUE;
    GError *failure = NULL;
    GVariant *value =
        secret_service_prompt_at_dbus_path_sync(service, prompt, cancellable, type, &failure);
    if (value == NULL) {
        if (failure != NULL && g_error_matches(failure, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            g_error_free(failure);
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                        "the Secret Service asked for a prompt (%s), unanswered within the bound:"
                        " it needs a person",
                        prompt);
        } else if (failure != NULL) {
            g_propagate_error(error, failure);
        } else {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                        "the Secret Service's prompt (%s) was dismissed", prompt);
        }
        return FALSE;
    }
    if (result) *result = value;
    else g_variant_unref(value);
    return TRUE;
}

/// The session a secret is written under: `given` (a test's session the provider never opened),
/// else the connection's plain session.
static const char *write_session(SecretService *service, const char *given) {
    return given != NULL ? given : g_object_get_data(G_OBJECT(service), PLAIN_SESSION);
}

/// `secret` as the Secret Service's (oayays) struct under `session`.
static GVariant *encoded_secret(const char *session, const void *secret, size_t secret_length) {
    static const guchar none = 0;
    return g_variant_new(
        "(o@ay@ays)", session, g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, &none, 0, 1),
        g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, secret_length ? secret : &none,
                                  secret_length, 1),
        "application/octet-stream");
}

static gboolean created_whole(SecretService *service, const char *path, unsigned count,
                              const char *const *keys, const char *const *values,
                              const void *secret, size_t secret_length, gboolean replace,
                              const char *session, GCancellable *cancellable, GError **error);
static GVariant *get_property(SecretService *service, const char *path, const char *interface,
                              const char *name, const GVariantType *type,
                              GCancellable *cancellable, GError **error);

gchar *keepsake_service_create_item(SecretService *service, const char *collection_path,
                                    const char *label, unsigned count, const char *const *keys,
                                    const char *const *values, const void *secret,
                                    size_t secret_length, gboolean replace,
                                    const char *given_session, GCancellable *cancellable,
                                    GError **error) {
    const char *session = write_session(service, given_session);
    GVariant *encoded = encoded_secret(session, secret, secret_length);
    GVariantBuilder attributes;
    g_variant_builder_init(&attributes, G_VARIANT_TYPE("a{ss}"));
    for (unsigned i = 0; i < count; i++)
        g_variant_builder_add(&attributes, "{ss}", keys[i], values[i]);
    GVariantBuilder properties;
    g_variant_builder_init(&properties, G_VARIANT_TYPE("a{sv}"));
    g_variant_builder_add(&properties, "{sv}", "org.freedesktop.Secret.Item.Label",
                          g_variant_new_string(label));
    g_variant_builder_add(&properties, "{sv}", "org.freedesktop.Secret.Item.Attributes",
                          g_variant_builder_end(&attributes));
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, collection_path,
        "org.freedesktop.Secret.Collection", "CreateItem",
        g_variant_new("(@a{sv}@(oayays)b)", g_variant_builder_end(&properties), encoded, replace),
        G_VARIANT_TYPE("(oo)"), G_DBUS_CALL_FLAGS_NO_AUTO_START,
        g_dbus_proxy_get_default_timeout(proxy), cancellable, error);
    if (reply == NULL) return NULL;
    const gchar *item = NULL, *prompt = NULL;
    g_variant_get(reply, "(&o&o)", &item, &prompt);
    gboolean asked = strcmp(prompt, "/") != 0;
    gchar *path = NULL;
    GVariant *prompted = NULL;
    if (perform_prompt(service, prompt, G_VARIANT_TYPE("o"), &prompted, cancellable, error)) {
        path = g_strdup(prompted ? g_variant_get_string(prompted, NULL) : item);
    }
    if (prompted) g_variant_unref(prompted);
    g_variant_unref(reply);  // `item` and `prompt` are its strings: not read after this
    if (path != NULL && asked &&
        !created_whole(service, path, count, keys, values, secret, secret_length, replace, session,
                       cancellable, error)) {
        g_free(path);
        return NULL;
    }
    return path;
}

/* Whether `session`, the one this connection writes under, is gone from the provider: its object
 * answers GetAll with an unknown-object error. FALSE with `error` set when the question itself
 * failed otherwise (cancelled at the bound, the provider gone). */
static gboolean session_gone(SecretService *service, const char *session, gboolean *gone,
                             GCancellable *cancellable, GError **error) {
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GError *failure = NULL;
    GVariant *alive = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, session,
        "org.freedesktop.DBus.Properties", "GetAll",
        g_variant_new("(s)", "org.freedesktop.Secret.Session"), G_VARIANT_TYPE("(a{sv})"),
        G_DBUS_CALL_FLAGS_NO_AUTO_START, g_dbus_proxy_get_default_timeout(proxy), cancellable,
        &failure);
    if (alive != NULL) {
        g_variant_unref(alive);
        *gone = FALSE;
        return TRUE;
    }
    gchar *name = g_dbus_error_get_remote_error(failure);
    *gone = name != NULL && (strcmp(name, "org.freedesktop.DBus.Error.UnknownObject") == 0 ||
                             strcmp(name, "org.freedesktop.DBus.Error.UnknownMethod") == 0 ||
                             strcmp(name, "org.freedesktop.Secret.Error.NoSuchObject") == 0 ||
                             strcmp(name, "org.freedesktop.Secret.Error.NoSession") == 0 ||
                             strcmp(name, "org.qtproject.QtDBus.Error.InvalidObjectPath") == 0);
    g_free(name);
    if (*gone) {
        g_error_free(failure);
        return TRUE;
    }
    g_propagate_error(error, failure);
    return FALSE;
}

/* Whether `path`, the item a prompted CreateItem answered with, holds `secret`: libsecret hands
 * back a prompt's result even when the prompt was dismissed. Read only after a create with
 * `replace`, the one that may answer with an item that was there before. */
static gboolean holds_secret(SecretService *service, const char *path, const void *secret,
                             size_t secret_length, const char *session,
                             GCancellable *cancellable) {
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, path, "org.freedesktop.Secret.Item",
        "GetSecret", g_variant_new("(o)", session), G_VARIANT_TYPE("((oayays))"),
        G_DBUS_CALL_FLAGS_NO_AUTO_START, g_dbus_proxy_get_default_timeout(proxy), cancellable,
        NULL);
    if (reply == NULL) return FALSE;
    GVariant *value = NULL;
    g_variant_get(reply, "((&o@ay@ay&s))", NULL, NULL, &value, NULL);
    gsize length = 0;
    const void *bytes = g_variant_get_fixed_array(value, &length, 1);
    gboolean same = length == secret_length && (length == 0 || memcmp(bytes, secret, length) == 0);
    g_variant_unref(value);
    g_variant_unref(reply);
    return same;
}

/* Whether a prompted CreateItem made what it was given, judged by what the provider holds:
 * libsecret hands back a prompt's result even when the prompt was dismissed. KeePassXC dismisses
 * a create whose secret it cannot read (a session it does not have: after it restarted) after
 * making the item, empty and without attributes; with `replace` it answers with the item that
 * matched, unchanged; a create whose collection stayed locked answers "/". An item without any
 * of the attributes is this create's own and is deleted. The create is then refused: as under a
 * session the provider does not have (NoSession, which the caller retries on a new connection)
 * when this connection's session is gone, else as a dismissed prompt (it needs a person). */
static gboolean created_whole(SecretService *service, const char *path, unsigned count,
                              const char *const *keys, const char *const *values,
                              const void *secret, size_t secret_length, gboolean replace,
                              const char *session, GCancellable *cancellable, GError **error) {
    if (g_cancellable_is_cancelled(cancellable)) {
        // Dismissed at the bound (perform_prompt): nothing more can be asked within it.
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                    "the Secret Service's create prompt was unanswered within the bound: it needs"
                    " a person");
        return FALSE;
    }
    unsigned matched = 0;
    if (strcmp(path, "/") != 0) {
        GVariant *attributes =
            get_property(service, path, "org.freedesktop.Secret.Item", "Attributes",
                         G_VARIANT_TYPE("a{ss}"), cancellable, error);
        if (attributes == NULL) return FALSE;
        for (unsigned i = 0; i < count; i++) {
            GVariant *value = g_variant_lookup_value(attributes, keys[i], G_VARIANT_TYPE_STRING);
            if (value != NULL && strcmp(g_variant_get_string(value, NULL), values[i]) == 0)
                matched++;
            if (value) g_variant_unref(value);
        }
        g_variant_unref(attributes);
        if (matched == count &&
            (!replace ||
             holds_secret(service, path, secret, secret_length, session, cancellable)))
            return TRUE;
        if (matched == 0 && !keepsake_item_delete(service, path, cancellable, error)) {
            g_prefix_error(error,
                           "the Secret Service made an empty item (%s) for a create whose prompt"
                           " was dismissed, and did not delete it: ",
                           path);
            return FALSE;
        }
    }
    gboolean gone = FALSE;
    if (!session_gone(service, session, &gone, cancellable, error)) return FALSE;
    if (gone) {
        g_propagate_error(error, g_dbus_error_new_for_dbus_error(
                                     "org.freedesktop.Secret.Error.NoSession",
                                     "the Secret Service dismissed a create: it has no session"
                                     " for this connection"));
    } else {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
                    "the Secret Service dismissed the prompt of a create (%s): it needs a person",
                    path);
    }
    return FALSE;
}

gboolean keepsake_item_delete(SecretService *service, const char *item_path,
                              GCancellable *cancellable, GError **error) {
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, item_path, "org.freedesktop.Secret.Item",
        "Delete", NULL, G_VARIANT_TYPE("(o)"), G_DBUS_CALL_FLAGS_NO_AUTO_START,
        g_dbus_proxy_get_default_timeout(proxy), cancellable, error);
    if (reply == NULL) return FALSE;
    const gchar *prompt = NULL;
    g_variant_get(reply, "(&o)", &prompt);
    gboolean done = perform_prompt(service, prompt, NULL, NULL, cancellable, error);
    g_variant_unref(reply);
    return done;
}

/* A property of a Secret Service object (org.freedesktop.DBus.Properties.Get), refused unless it
 * is of `type`: the reply's variant holds whatever the peer put in it. */
static GVariant *get_property(SecretService *service, const char *path, const char *interface,
                              const char *name, const GVariantType *type,
                              GCancellable *cancellable, GError **error) {
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, path, "org.freedesktop.DBus.Properties",
        "Get", g_variant_new("(ss)", interface, name), G_VARIANT_TYPE("(v)"),
        G_DBUS_CALL_FLAGS_NO_AUTO_START, g_dbus_proxy_get_default_timeout(proxy), cancellable,
        error);
    if (reply == NULL) return NULL;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    if (!g_variant_is_of_type(value, type)) {
        g_variant_unref(value);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "the Secret Service's %s property of %s is not of the type its interface says",
                    name, path);
        return NULL;
    }
    return value;
}

gchar **keepsake_collection_items(SecretService *service, const char *collection_path,
                                  GCancellable *cancellable, GError **error) {
    GVariant *items = get_property(service, collection_path, "org.freedesktop.Secret.Collection",
                                   "Items", G_VARIANT_TYPE("ao"), cancellable, error);
    if (items == NULL) return NULL;
    gsize count = g_variant_n_children(items);
    gchar **paths = g_malloc0_n(count + 1, sizeof(gchar *));
    for (gsize i = 0; i < count; i++) g_variant_get_child(items, i, "o", &paths[i]);
    g_variant_unref(items);
    return paths;
}

gchar *keepsake_item_schema(SecretService *service, const char *item_path,
                            GCancellable *cancellable, GError **error) {
    GVariant *attributes = get_property(service, item_path, "org.freedesktop.Secret.Item",
                                        "Attributes", G_VARIANT_TYPE("a{ss}"), cancellable, error);
    if (attributes == NULL) return NULL;
    GVariant *schema = g_variant_lookup_value(attributes, "xdg:schema", G_VARIANT_TYPE_STRING);
    gchar *name = g_strdup(schema ? g_variant_get_string(schema, NULL) : "");
    if (schema) g_variant_unref(schema);
    g_variant_unref(attributes);
    return name;
}

/* A password in clear: under libsecret's DH session, opened here when first needed. */
static GVariant *master_secret(SecretService *service, const void *password, size_t length,
                               GCancellable *cancellable, GError **error) {
    if (!secret_service_ensure_session_sync(service, cancellable, error)) return NULL;
    SecretValue *value = secret_value_new(length ? password : "", length, "text/plain");
    GVariant *encoded = secret_service_encode_dbus_secret(service, value);
    secret_value_unref(value);
    if (encoded == NULL)
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "no session to encode a secret");
    return encoded;
}

gboolean keepsake_service_unlock_with_master_password(SecretService *service,
                                                      const char *collection_path,
                                                      const void *password, size_t length,
                                                      GCancellable *cancellable, GError **error) {
    GVariant *secret = master_secret(service, password, length, cancellable, error);
    if (secret == NULL) return FALSE;
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, SECRETS_PATH, GUILT_RIDDEN,
        "UnlockWithMasterPassword", g_variant_new("(o@(oayays))", collection_path, secret), NULL,
        G_DBUS_CALL_FLAGS_NO_AUTO_START, g_dbus_proxy_get_default_timeout(proxy), cancellable,
        error);
    if (reply == NULL) return FALSE;
    g_variant_unref(reply);
    return TRUE;
}

gchar *keepsake_service_create_collection_with_master_password(
    SecretService *service, const char *label, const void *password, size_t length,
    GCancellable *cancellable, GError **error) {
    GVariant *secret = master_secret(service, password, length, cancellable, error);
    if (secret == NULL) return NULL;
    GVariantBuilder properties;
    g_variant_builder_init(&properties, G_VARIANT_TYPE("a{sv}"));
    g_variant_builder_add(&properties, "{sv}", "org.freedesktop.Secret.Collection.Label",
                          g_variant_new_string(label));
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, SECRETS_PATH, GUILT_RIDDEN,
        "CreateWithMasterPassword", g_variant_new("(a{sv}@(oayays))", &properties, secret),
        G_VARIANT_TYPE("(o)"), G_DBUS_CALL_FLAGS_NO_AUTO_START,
        g_dbus_proxy_get_default_timeout(proxy), cancellable, error);
    if (reply == NULL) return NULL;
    gchar *path = NULL;
    g_variant_get(reply, "(o)", &path);
    g_variant_unref(reply);
    return path;
}

gboolean keepsake_service_lock(SecretService *service, const char *path, gboolean *needs_prompt,
                               GCancellable *cancellable, GError **error) {
    GVariant *reply = g_dbus_proxy_call_sync(G_DBUS_PROXY(service), "Lock",
                                             g_variant_new("(@ao)", g_variant_new_objv(&path, 1)),
                                             G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable,
                                             error);
    if (reply == NULL) return FALSE;
    const gchar *prompt = NULL;
    g_variant_get(reply, "(@ao&o)", NULL, &prompt);
    /* KeePassXC answers Lock with a prompt that completes on its own. */
    GError *failure = NULL;
    *needs_prompt = !perform_prompt(service, prompt, NULL, NULL, cancellable, &failure);
    if (failure) g_error_free(failure);
    g_variant_unref(reply);
    return TRUE;
}

gchar *keepsake_error_dbus_name(const GError *error) {
    return g_dbus_error_get_remote_error(error);
}

const char *keepsake_error_domain(const GError *error) {
    return g_quark_to_string(error->domain);
}

#include <sys/prctl.h>
#include <sys/resource.h>

int keepsake_process_harden(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

gboolean keepsake_item_set_secret(SecretService *service, const char *item_path, const void *secret,
                                  size_t secret_length, const char *given_session,
                                  GCancellable *cancellable, GError **error) {
    GVariant *encoded = encoded_secret(write_session(service, given_session), secret,
                                       secret_length);
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GVariant *reply = g_dbus_connection_call_sync(
        g_dbus_proxy_get_connection(proxy), SECRETS_NAME, item_path, "org.freedesktop.Secret.Item",
        "SetSecret", g_variant_new("(@(oayays))", encoded), NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START,
        g_dbus_proxy_get_default_timeout(proxy), cancellable, error);
    if (reply == NULL) return FALSE;
    g_variant_unref(reply);
    return TRUE;
}

gboolean keepsake_item_set_attributes(SecretService *service, const char *item_path,
                                      const char *label, unsigned count, const char *const *keys,
                                      const char *const *values, GCancellable *cancellable,
                                      GError **error) {
    GVariantBuilder builder;
    g_variant_builder_init(&builder, G_VARIANT_TYPE("a{ss}"));
    for (unsigned i = 0; i < count; i++) g_variant_builder_add(&builder, "{ss}", keys[i], values[i]);
    GDBusProxy *proxy = G_DBUS_PROXY(service);
    GDBusConnection *connection = g_dbus_proxy_get_connection(proxy);
    int timeout = g_dbus_proxy_get_default_timeout(proxy);
    GVariant *reply = g_dbus_connection_call_sync(
        connection, SECRETS_NAME, item_path, "org.freedesktop.DBus.Properties", "Set",
        g_variant_new("(ssv)", "org.freedesktop.Secret.Item", "Attributes",
                      g_variant_builder_end(&builder)),
        NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout, cancellable, error);
    if (reply == NULL) return FALSE;
    g_variant_unref(reply);
    reply = g_dbus_connection_call_sync(
        connection, SECRETS_NAME, item_path, "org.freedesktop.DBus.Properties", "Set",
        g_variant_new("(ssv)", "org.freedesktop.Secret.Item", "Label", g_variant_new_string(label)),
        NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout, cancellable, error);
    if (reply == NULL) return FALSE;
    g_variant_unref(reply);
    return TRUE;
}
