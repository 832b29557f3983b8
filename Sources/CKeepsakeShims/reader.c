/* The direct reads (SearchItems, GetSecrets, a collection's Locked property) over a libdbus
 * connection of their own: a blocking call on the caller's thread (one send, one poll, one read)
 * instead of GDBus's hand-over to its worker thread and back, ~60 µs of CPU less per round
 * trip here. Writes, sessions for writes and prompts stay with libsecret on GDBus.
 *
 * Replies are outside input. libdbus validates every message it reads (well-formed, valid
 * strings and object paths, within the size set below) before handing it over; each reply's
 * type is checked here against the method's before any of it is read, and a mismatch is an
 * error naming the method and both types. Everything sent is checked first too: libdbus aborts
 * the process on an invalid string or object path, so those are refused here with an error. */
#include "CKeepsakeShims.h"
#include <dbus/dbus.h>
#include <string.h>
#include "loaded.h"

#define SECRETS_NAME "org.freedesktop.secrets"
#define SECRETS_PATH "/org/freedesktop/secrets"
#define SERVICE_INTERFACE "org.freedesktop.Secret.Service"
#define COLLECTION_INTERFACE "org.freedesktop.Secret.Collection"
/* The largest reply read: a GetSecrets of ~50,000 items. A larger one ends the connection
 * (libdbus refuses it), which the caller rebuilds. */
#define MAX_MESSAGE_BYTES (32 * 1024 * 1024)

struct KeepsakeReader {
    DBusConnection *connection;
    gchar *session; /* a "plain" session on this connection: Keepsake's secrets are sealed */
    int timeout_ms;
};
typedef KeepsakeReader Reader;

/* A call any provider answers without a session: the service's Collections property. */
static DBusMessage *collections_call(void) {
    DBusMessage *message = dbus_message_new_method_call(
        SECRETS_NAME, SECRETS_PATH, "org.freedesktop.DBus.Properties", "Get");
    const char *interface = SERVICE_INTERFACE;
    const char *property = "Collections";
    if (message != NULL &&
        !dbus_message_append_args(message, DBUS_TYPE_STRING, &interface, DBUS_TYPE_STRING,
                                  &property, DBUS_TYPE_INVALID)) {
        dbus_message_unref(message);
        return NULL;
    }
    return message;
}

void keepsake_reader_close(KeepsakeReader *reader) {
    if (reader == NULL) return;
    if (reader->connection != NULL) {
        dbus_connection_close(reader->connection);
        dbus_connection_unref(reader->connection);
    }
    g_free(reader->session);
    g_free(reader);
}

/* A libdbus error as GDBus would have raised it (the D-Bus name kept for classification), or a
 * timeout when no reply came within the bound. */
static void set_error_from_dbus(const DBusError *failure, gint64 started, int timeout_ms,
                                GError **error) {
    gint64 elapsed_ms = (g_get_monotonic_time() - started) / 1000;
    if (dbus_error_has_name(failure, DBUS_ERROR_NO_REPLY) && elapsed_ms >= timeout_ms) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                    "Timeout was reached (no reply within %d ms)", timeout_ms);
        return;
    }
    g_propagate_error(error, g_dbus_error_new_for_dbus_error(
                                 failure->name ? failure->name : DBUS_ERROR_FAILED,
                                 failure->message ? failure->message : "failed"));
}

static void set_out_of_memory(GError **error) {
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "out of memory building a message");
}

/* Whether `reply` has exactly the method's type; nothing of a reply is read before this. */
static gboolean check_reply(DBusMessage *reply, const char *method, const char *signature,
                            GError **error) {
    if (dbus_message_has_signature(reply, signature)) return TRUE;
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                "%s: the reply has type (%s), expected (%s)", method,
                dbus_message_get_signature(reply), signature);
    return FALSE;
}

/* Sends `message` (consumed); its reply is waited for with reader_finish. */
static DBusPendingCall *reader_send(Reader *reader, DBusMessage *message, GError **error) {
    dbus_message_set_auto_start(message, FALSE);
    DBusPendingCall *pending = NULL;
    dbus_bool_t sent =
        dbus_connection_send_with_reply(reader->connection, message, &pending, reader->timeout_ms);
    dbus_message_unref(message);
    if (!sent) {
        set_out_of_memory(error);
        return NULL;
    }
    if (pending == NULL)
        g_propagate_error(error, g_dbus_error_new_for_dbus_error(
                                     DBUS_ERROR_DISCONNECTED, "the bus connection is closed"));
    return pending;
}

/* Blocks until the reply of `pending` (consumed), an error or the bound (libdbus ends the wait
 * itself at the call's timeout). Other messages the bus queued meanwhile (NameAcquired, a signal
 * sent to us) are dropped unread, so nobody can fill the queue. */
static DBusMessage *reader_wait(Reader *reader, DBusPendingCall *pending, GError **error) {
    dbus_pending_call_block(pending);
    DBusMessage *reply = dbus_pending_call_steal_reply(pending);
    dbus_pending_call_unref(pending);
    /* Dispatching hands a queued reply to its pending call (another thread's, or the second of
     * two in flight) and drops whatever else is queued: nothing is registered to handle it. */
    while (dbus_connection_dispatch(reader->connection) == DBUS_DISPATCH_DATA_REMAINS) {
    }
    if (reply == NULL)
        g_propagate_error(error, g_dbus_error_new_for_dbus_error(DBUS_ERROR_DISCONNECTED,
                                                                 "no reply: connection closed"));
    return reply;
}

/* reader_wait, then a reply of exactly `signature` or the error the provider answered with. */
static DBusMessage *reader_finish(Reader *reader, DBusPendingCall *pending, gint64 started,
                                  const char *method, const char *signature, GError **error) {
    DBusMessage *reply = reader_wait(reader, pending, error);
    if (reply == NULL) return NULL;
    if (dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR) {
        DBusError failure;
        dbus_error_init(&failure);
        dbus_set_error_from_message(&failure, reply);
        set_error_from_dbus(&failure, started, reader->timeout_ms, error);
        dbus_error_free(&failure);
        dbus_message_unref(reply);
        return NULL;
    }
    if (!check_reply(reply, method, signature, error)) {
        dbus_message_unref(reply);
        return NULL;
    }
    return reply;
}

static DBusMessage *reader_call(Reader *reader, DBusMessage *message, const char *method,
                                const char *signature, GError **error) {
    gint64 started = g_get_monotonic_time();
    DBusPendingCall *pending = reader_send(reader, message, error);
    if (pending == NULL) return NULL;
    return reader_finish(reader, pending, started, method, signature, error);
}

/* Sends `message` (consumed) and waits for the provider to answer it, whatever the answer: a
 * reply or an error of its own (one without the property). Nothing of the answer is read. Fails
 * as a call would when no answer came from the provider: the bound, no owner, a closed bus. */
static gboolean reader_await_answer(Reader *reader, DBusMessage *message, GError **error) {
    gint64 started = g_get_monotonic_time();
    DBusPendingCall *pending = reader_send(reader, message, error);
    if (pending == NULL) return FALSE;
    DBusMessage *reply = reader_wait(reader, pending, error);
    if (reply == NULL) return FALSE;
    gboolean answered = TRUE;
    if (dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR) {
        DBusError failure;
        dbus_error_init(&failure);
        dbus_set_error_from_message(&failure, reply);
        answered = !dbus_error_has_name(&failure, DBUS_ERROR_NO_REPLY) &&
                   !dbus_error_has_name(&failure, DBUS_ERROR_SERVICE_UNKNOWN) &&
                   !dbus_error_has_name(&failure, DBUS_ERROR_NAME_HAS_NO_OWNER) &&
                   !dbus_error_has_name(&failure, DBUS_ERROR_DISCONNECTED);
        if (!answered) set_error_from_dbus(&failure, started, reader->timeout_ms, error);
        dbus_error_free(&failure);
    }
    dbus_message_unref(reply);
    return answered;
}

/* Refusals before sending carry D-Bus's own name for them (InvalidArgs), as a daemon's would. */
static gboolean check_path(const char *path, GError **error) {
    if (path != NULL && dbus_validate_path(path, NULL)) return TRUE;
    g_propagate_error(error, g_dbus_error_new_for_dbus_error(DBUS_ERROR_INVALID_ARGS,
                                                             "not a D-Bus object path"));
    return FALSE;
}

static gboolean check_string(const char *string, GError **error) {
    if (string != NULL && dbus_validate_utf8(string, NULL)) return TRUE;
    g_propagate_error(error,
                      g_dbus_error_new_for_dbus_error(DBUS_ERROR_INVALID_ARGS, "not a UTF-8 string"));
    return FALSE;
}

/* The session path of an OpenSession reply (of type vo, checked). */
static gchar *read_session(DBusMessage *reply) {
    DBusMessageIter fields;
    dbus_message_iter_init(reply, &fields);
    dbus_message_iter_next(&fields);
    const char *session = NULL;
    dbus_message_iter_get_basic(&fields, &session);
    return g_strdup(session);
}

KeepsakeReader *keepsake_reader_open(const char *bus_address, int timeout_ms, GError **error) {
    dbus_threads_init_default();
    gchar *default_address = NULL;
    if (bus_address == NULL || bus_address[0] == '\0') {
        default_address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, NULL, error);
        if (default_address == NULL) return NULL;
        bus_address = default_address;
    }
    DBusError failure;
    dbus_error_init(&failure);
    gint64 started = g_get_monotonic_time();
    DBusConnection *connection = dbus_connection_open_private(bus_address, &failure);
    g_free(default_address);
    if (connection == NULL) {
        set_error_from_dbus(&failure, started, timeout_ms, error);
        dbus_error_free(&failure);
        return NULL;
    }
    dbus_connection_set_exit_on_disconnect(connection, FALSE);
    dbus_connection_set_max_message_size(connection, MAX_MESSAGE_BYTES);
    dbus_connection_set_max_received_size(connection, 2 * MAX_MESSAGE_BYTES);
    Reader *reader = g_new0(Reader, 1);
    reader->connection = connection;
    reader->timeout_ms = timeout_ms;
    if (!dbus_bus_register(connection, &failure)) {
        set_error_from_dbus(&failure, started, timeout_ms, error);
        dbus_error_free(&failure);
        keepsake_reader_close(reader);
        return NULL;
    }
    /* gnome-keyring 42 records a client a moment after that client's first call arrives, and
     * aborts (a GLib fatal error, the whole daemon gone) when that first call is an OpenSession
     * it answers before the record exists (upstream gnome-keyring issues 190, 196, 199;
     * SecretServiceTests' 1200 short connections show it). So the session is asked for only
     * after another call has been answered. (libsecret's connection starts with GDBusProxy's
     * GetAll.) */
    DBusMessage *first = collections_call();
    if (first == NULL) {
        set_out_of_memory(error);
        keepsake_reader_close(reader);
        return NULL;
    }
    if (!reader_await_answer(reader, first, error)) {
        keepsake_reader_close(reader);
        return NULL;
    }
    DBusMessage *message =
        dbus_message_new_method_call(SECRETS_NAME, SECRETS_PATH, SERVICE_INTERFACE, "OpenSession");
    const char *algorithm = "plain";
    const char *empty = "";
    DBusMessageIter arguments, variant;
    gboolean built = message != NULL;
    if (built) {
        dbus_message_iter_init_append(message, &arguments);
        built = dbus_message_iter_append_basic(&arguments, DBUS_TYPE_STRING, &algorithm) &&
                dbus_message_iter_open_container(&arguments, DBUS_TYPE_VARIANT, "s", &variant) &&
                dbus_message_iter_append_basic(&variant, DBUS_TYPE_STRING, &empty) &&
                dbus_message_iter_close_container(&arguments, &variant);
    }
    if (!built) {
        if (message != NULL) dbus_message_unref(message);
        set_out_of_memory(error);
        keepsake_reader_close(reader);
        return NULL;
    }
    DBusMessage *reply = reader_call(reader, message, "OpenSession", "vo", error);
    if (reply == NULL) {
        keepsake_reader_close(reader);
        return NULL;
    }
    reader->session = read_session(reply);
    dbus_message_unref(reply);
    return reader;
}


/* The elements of an array of object paths at `iterator`, as a NULL-terminated gchar **. */
static gchar **read_paths(DBusMessageIter *iterator) {
    GPtrArray *paths = g_ptr_array_new();
    DBusMessageIter element;
    dbus_message_iter_recurse(iterator, &element);
    while (dbus_message_iter_get_arg_type(&element) == DBUS_TYPE_OBJECT_PATH) {
        const char *path = NULL;
        dbus_message_iter_get_basic(&element, &path);
        g_ptr_array_add(paths, g_strdup(path));
        dbus_message_iter_next(&element);
    }
    g_ptr_array_add(paths, NULL);
    return (gchar **)g_ptr_array_free(paths, FALSE);
}

/* Collection.SearchItems, not Service.SearchItems: the Service's search may ask a person first
 * (KeePassXC, by default, opens an unlock dialog and waits in it when every database is locked);
 * a collection's search never does. */
static DBusMessage *search_message(const char *collection_path, unsigned count,
                                   const char *const *keys, const char *const *values,
                                   GError **error) {
    if (!check_path(collection_path, error)) return NULL;
    for (unsigned i = 0; i < count; i++)
        if (!check_string(keys[i], error) || !check_string(values[i], error)) return NULL;
    DBusMessage *message = dbus_message_new_method_call(SECRETS_NAME, collection_path,
                                                        COLLECTION_INTERFACE, "SearchItems");
    if (message == NULL) {
        set_out_of_memory(error);
        return NULL;
    }
    DBusMessageIter arguments, array, entry;
    dbus_message_iter_init_append(message, &arguments);
    gboolean built = dbus_message_iter_open_container(&arguments, DBUS_TYPE_ARRAY, "{ss}", &array);
    for (unsigned i = 0; built && i < count; i++) {
        built = dbus_message_iter_open_container(&array, DBUS_TYPE_DICT_ENTRY, NULL, &entry) &&
                dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &keys[i]) &&
                dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &values[i]) &&
                dbus_message_iter_close_container(&array, &entry);
    }
    built = built && dbus_message_iter_close_container(&arguments, &array);
    if (!built) {
        dbus_message_unref(message);
        set_out_of_memory(error);
        return NULL;
    }
    return message;
}

/* The paths of a Collection.SearchItems reply (of type ao, checked). */
static gchar **read_search(DBusMessage *reply) {
    DBusMessageIter fields;
    dbus_message_iter_init(reply, &fields);
    return read_paths(&fields);
}

static DBusMessage *locked_message(const char *path, GError **error) {
    if (!check_path(path, error)) return NULL;
    DBusMessage *message = dbus_message_new_method_call(SECRETS_NAME, path,
                                                        DBUS_INTERFACE_PROPERTIES, "Get");
    const char *interface = COLLECTION_INTERFACE;
    const char *property = "Locked";
    if (message == NULL ||
        !dbus_message_append_args(message, DBUS_TYPE_STRING, &interface, DBUS_TYPE_STRING,
                                  &property, DBUS_TYPE_INVALID)) {
        if (message != NULL) dbus_message_unref(message);
        set_out_of_memory(error);
        return NULL;
    }
    return message;
}

static gboolean read_locked(DBusMessage *reply, gboolean *locked, GError **error) {
    DBusMessageIter fields, value;
    dbus_message_iter_init(reply, &fields);
    dbus_message_iter_recurse(&fields, &value);
    if (dbus_message_iter_get_arg_type(&value) != DBUS_TYPE_BOOLEAN) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "Get Locked: the property has type %c, expected b",
                    (char)dbus_message_iter_get_arg_type(&value));
        return FALSE;
    }
    dbus_bool_t answer = FALSE;
    dbus_message_iter_get_basic(&value, &answer);
    *locked = answer != 0;
    return TRUE;
}

gboolean keepsake_collection_is_locked(KeepsakeReader *reader, const char *path,
                                       gboolean *locked, GError **error) {
    DBusMessage *message = locked_message(path, error);
    if (message == NULL) return FALSE;
    DBusMessage *reply = reader_call(reader, message, "Get Locked", "v", error);
    if (reply == NULL) return FALSE;
    gboolean ok = read_locked(reply, locked, error);
    dbus_message_unref(reply);
    return ok;
}

gboolean keepsake_collection_search(KeepsakeReader *reader, const char *collection_path,
                                    unsigned count, const char *const *keys,
                                    const char *const *values, gchar ***paths,
                                    gboolean *collection_locked, GError **error) {
    DBusMessage *search = search_message(collection_path, count, keys, values, error);
    if (search == NULL) return FALSE;
    DBusMessage *lock_state = locked_message(collection_path, error);
    if (lock_state == NULL) {
        dbus_message_unref(search);
        return FALSE;
    }
    gint64 started = g_get_monotonic_time();
    DBusPendingCall *searching = reader_send(reader, search, error);
    if (searching == NULL) {
        dbus_message_unref(lock_state);
        return FALSE;
    }
    DBusPendingCall *asking = reader_send(reader, lock_state, error);
    if (asking == NULL) {
        dbus_pending_call_cancel(searching);
        dbus_pending_call_unref(searching);
        return FALSE;
    }
    DBusMessage *found = reader_finish(reader, searching, started, "SearchItems", "ao", error);
    if (found == NULL) {
        /* Failed (at the bound, maybe): the other answer is not waited for. */
        dbus_pending_call_cancel(asking);
        dbus_pending_call_unref(asking);
        return FALSE;
    }
    DBusMessage *answer = reader_finish(reader, asking, started, "Get Locked", "v", error);
    if (answer == NULL) {
        dbus_message_unref(found);
        return FALSE;
    }
    gboolean ok = read_locked(answer, collection_locked, error);
    dbus_message_unref(answer);
    if (ok) *paths = read_search(found);
    dbus_message_unref(found);
    return ok;
}

void keepsake_secret_list_free(KeepsakeSecretList *list) {
    if (list == NULL) return;
    for (unsigned i = 0; i < list->count; i++) secret_value_unref(list->values[i]);
    g_strfreev(list->paths);
    g_free(list->values);
    g_free(list);
}

static KeepsakeSecretList *read_secrets(DBusMessage *reply, const char *session, GError **error);

KeepsakeSecretList *keepsake_service_get_secrets(KeepsakeReader *reader, const char *const *paths,
                                                 GError **error) {
    guint requested = 0;
    for (; paths[requested] != NULL; requested++)
        if (!check_path(paths[requested], error)) return NULL;
    DBusMessage *message =
        dbus_message_new_method_call(SECRETS_NAME, SECRETS_PATH, SERVICE_INTERFACE, "GetSecrets");
    DBusMessageIter arguments, array;
    gboolean built = message != NULL;
    if (built) {
        dbus_message_iter_init_append(message, &arguments);
        built = dbus_message_iter_open_container(&arguments, DBUS_TYPE_ARRAY, "o", &array);
        for (guint i = 0; built && i < requested; i++)
            built = dbus_message_iter_append_basic(&array, DBUS_TYPE_OBJECT_PATH, &paths[i]);
        built = built && dbus_message_iter_close_container(&arguments, &array) &&
                dbus_message_iter_append_basic(&arguments, DBUS_TYPE_OBJECT_PATH,
                                               &reader->session);
    }
    if (!built) {
        if (message != NULL) dbus_message_unref(message);
        set_out_of_memory(error);
        return NULL;
    }
    DBusMessage *reply = reader_call(reader, message, "GetSecrets", "a{o(oayays)}", error);
    if (reply == NULL) return NULL;
    KeepsakeSecretList *list = read_secrets(reply, reader->session, error);
    dbus_message_unref(reply);
    return list;
}

/* The secrets of a GetSecrets reply (of type a{o(oayays)}, checked), each of which must have
 * come back under `session`. */
static KeepsakeSecretList *read_secrets(DBusMessage *reply, const char *session, GError **error) {
    DBusMessageIter fields, entries;
    dbus_message_iter_init(reply, &fields);
    dbus_message_iter_recurse(&fields, &entries);
    GPtrArray *found_paths = g_ptr_array_new();
    GPtrArray *values = g_ptr_array_new();
    gboolean stale = FALSE;
    while (dbus_message_iter_get_arg_type(&entries) == DBUS_TYPE_DICT_ENTRY) {
        DBusMessageIter entry, secret, bytes;
        const char *path = NULL, *under = NULL;
        const unsigned char *parameters = NULL, *data = NULL;
        int parameters_length = 0, length = 0;
        dbus_message_iter_recurse(&entries, &entry);
        dbus_message_iter_get_basic(&entry, &path);
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &secret);
        dbus_message_iter_get_basic(&secret, &under);
        dbus_message_iter_next(&secret);
        dbus_message_iter_recurse(&secret, &bytes);
        dbus_message_iter_get_fixed_array(&bytes, &parameters, &parameters_length);
        dbus_message_iter_next(&secret);
        dbus_message_iter_recurse(&secret, &bytes);
        dbus_message_iter_get_fixed_array(&bytes, &data, &length);
        /* Under our plain session: that path, no parameters. A daemon that restarted may have
         * given the path to another client's encrypted session (KWallet numbers them from 1):
         * its answer is ciphertext, refused here as a stale session, never taken as a secret. */
        if (strcmp(under, session) != 0 || parameters_length != 0) {
            stale = TRUE;
            break;
        }
        SecretValue *value = secret_value_new(length ? (const gchar *)data : "", length,
                                              "application/octet-stream");
        if (value != NULL) {
            g_ptr_array_add(found_paths, g_strdup(path));
            g_ptr_array_add(values, value);
        }
        dbus_message_iter_next(&entries);
    }
    KeepsakeSecretList *list = g_new0(KeepsakeSecretList, 1);
    list->count = values->len;
    g_ptr_array_add(found_paths, NULL);
    g_ptr_array_add(values, NULL);
    list->paths = (gchar **)g_ptr_array_free(found_paths, FALSE);
    list->values = (SecretValue **)g_ptr_array_free(values, FALSE);
    if (stale) {
        keepsake_secret_list_free(list);
        g_set_error(error, SECRET_ERROR, SECRET_ERROR_NO_SUCH_OBJECT,
                    "the secret came back under another session than %s (the daemon "
                    "restarted): stale session",
                    session);
        return NULL;
    }
    return list;
}
