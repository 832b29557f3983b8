/* Fuzzes the direct reads' reply parsing (reader.c) with libFuzzer + AddressSanitizer: an input
 * is a marshalled D-Bus message, demarshalled (and so validated) by libdbus as a reply read from
 * the bus is; every reply parser whose type check the message passes then reads it, as the
 * reads do after the same check. The corpus is seeded at start-up with well-formed replies of
 * each type (LLVMFuzzerInitialize runs before libFuzzer reads the corpus directory). */
#include "../../Sources/CKeepsakeShims/reader.c"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const session_path = "/org/freedesktop/secrets/session/s1";

static void write_seed(const char *directory, const char *name, DBusMessage *message) {
    dbus_message_set_serial(message, 7);
    char *bytes = NULL;
    int length = 0;
    if (dbus_message_marshal(message, &bytes, &length)) {
        gchar *path = g_build_filename(directory, name, NULL);
        g_file_set_contents(path, bytes, length, NULL);
        g_free(path);
        dbus_free(bytes);
    }
    dbus_message_unref(message);
}

static DBusMessage *reply(void) {
    DBusMessage *message = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN);
    dbus_message_set_reply_serial(message, 3);
    return message;
}

static void seed(const char *directory) {
    const char *items[] = {"/org/freedesktop/secrets/collection/login/1",
                           "/org/freedesktop/secrets/collection/login/2"};
    DBusMessageIter arguments, array, entry, secret, bytes, variant;

    DBusMessage *search = reply();
    dbus_message_iter_init_append(search, &arguments);
    dbus_message_iter_open_container(&arguments, DBUS_TYPE_ARRAY, "o", &array);
    for (int i = 0; i < 2; i++)
        dbus_message_iter_append_basic(&array, DBUS_TYPE_OBJECT_PATH, &items[i]);
    dbus_message_iter_close_container(&arguments, &array);
    write_seed(directory, "seed-search", search);

    for (int stale = 0; stale < 2; stale++) {
        DBusMessage *secrets = reply();
        dbus_message_iter_init_append(secrets, &arguments);
        dbus_message_iter_open_container(&arguments, DBUS_TYPE_ARRAY, "{o(oayays)}", &array);
        for (int i = 0; i < 2; i++) {
            const unsigned char value[] = {'K', 'S', 'K', '2', 0, 1, 2, (unsigned char)i};
            const unsigned char *data = value, *parameters = value;
            const char *under = stale && i == 1 ? "/org/freedesktop/secrets/session/s2"
                                                : session_path;
            const char *type = "application/octet-stream";
            dbus_message_iter_open_container(&array, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
            dbus_message_iter_append_basic(&entry, DBUS_TYPE_OBJECT_PATH, &items[i]);
            dbus_message_iter_open_container(&entry, DBUS_TYPE_STRUCT, NULL, &secret);
            dbus_message_iter_append_basic(&secret, DBUS_TYPE_OBJECT_PATH, &under);
            dbus_message_iter_open_container(&secret, DBUS_TYPE_ARRAY, "y", &bytes);
            dbus_message_iter_append_fixed_array(&bytes, DBUS_TYPE_BYTE, &parameters, stale);
            dbus_message_iter_close_container(&secret, &bytes);
            dbus_message_iter_open_container(&secret, DBUS_TYPE_ARRAY, "y", &bytes);
            dbus_message_iter_append_fixed_array(&bytes, DBUS_TYPE_BYTE, &data, sizeof value);
            dbus_message_iter_close_container(&secret, &bytes);
            dbus_message_iter_append_basic(&secret, DBUS_TYPE_STRING, &type);
            dbus_message_iter_close_container(&entry, &secret);
            dbus_message_iter_close_container(&array, &entry);
        }
        dbus_message_iter_close_container(&arguments, &array);
        write_seed(directory, stale ? "seed-secrets-stale" : "seed-secrets", secrets);
    }

    DBusMessage *locked = reply();
    dbus_bool_t yes = TRUE;
    dbus_message_iter_init_append(locked, &arguments);
    dbus_message_iter_open_container(&arguments, DBUS_TYPE_VARIANT, "b", &variant);
    dbus_message_iter_append_basic(&variant, DBUS_TYPE_BOOLEAN, &yes);
    dbus_message_iter_close_container(&arguments, &variant);
    write_seed(directory, "seed-locked", locked);

    DBusMessage *session = reply();
    const char *empty = "";
    dbus_message_iter_init_append(session, &arguments);
    dbus_message_iter_open_container(&arguments, DBUS_TYPE_VARIANT, "s", &variant);
    dbus_message_iter_append_basic(&variant, DBUS_TYPE_STRING, &empty);
    dbus_message_iter_close_container(&arguments, &variant);
    dbus_message_iter_append_basic(&arguments, DBUS_TYPE_OBJECT_PATH, &session_path);
    write_seed(directory, "seed-session", session);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    /* The shims call libdbus through the table the loader fills (loader.c). */
    const char *failure = keepsake_shims_load();
    if (failure != NULL) {
        fprintf(stderr, "%s\n", failure);
        abort();
    }
    /* The last argument that is a directory is the corpus. */
    for (int i = *argc - 1; i > 0; i--) {
        if ((*argv)[i][0] != '-' && g_file_test((*argv)[i], G_FILE_TEST_IS_DIR)) {
            seed((*argv)[i]);
            break;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 20) return 0;
    DBusError failure;
    dbus_error_init(&failure);
    DBusMessage *message = dbus_message_demarshal((const char *)data, (int)size, &failure);
    dbus_error_free(&failure);
    if (message == NULL) return 0;
    GError *error = NULL;
    if (check_reply(message, "SearchItems", "ao", &error)) g_strfreev(read_search(message));
    g_clear_error(&error);
    if (check_reply(message, "GetSecrets", "a{o(oayays)}", &error))
        keepsake_secret_list_free(read_secrets(message, session_path, &error));
    g_clear_error(&error);
    if (check_reply(message, "Get Locked", "v", &error)) {
        gboolean locked = FALSE;
        read_locked(message, &locked, &error);
    }
    g_clear_error(&error);
    if (check_reply(message, "OpenSession", "vo", &error)) g_free(read_session(message));
    g_clear_error(&error);
    dbus_message_unref(message);
    return 0;
}
