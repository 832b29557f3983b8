#include "CRogueSecretService.h"

static const gchar rogue_xml[] =
    "<node>"
    " <interface name='org.freedesktop.Secret.Service'>"
    "  <method name='OpenSession'><arg direction='in' type='s'/><arg direction='in' type='v'/>"
    "   <arg direction='out' type='v'/><arg direction='out' type='o'/></method>"
    "  <method name='GetSecrets'><arg direction='in' type='ao'/><arg direction='in' type='o'/>"
    "   <arg direction='out' type='as'/></method>"
    "  <method name='Lock'><arg direction='in' type='ao'/><arg direction='out' type='u'/></method>"
    " </interface>"
    " <interface name='org.freedesktop.Secret.Collection'>"
    "  <method name='SearchItems'><arg direction='in' type='a{ss}'/>"
    "   <arg direction='out' type='s'/></method>"
    "  <property name='Locked' type='b' access='read'/>"
    " </interface>"
    "</node>";

struct KeepsakeRogue {
    GThread *thread;
    GMainContext *context;
    GMainLoop *loop;
    GDBusConnection *connection;
    GDBusNodeInfo *node;
    guint registrations[2];
    gint calls;
    GMutex lock;
    GCond ready;
    gboolean started;
    GError *failure;
    gchar *address;
};

static void rogue_method(GDBusConnection *connection, const gchar *sender, const gchar *path,
                         const gchar *interface, const gchar *method, GVariant *parameters,
                         GDBusMethodInvocation *invocation, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface;
    KeepsakeRogue *rogue = data;
    g_atomic_int_inc(&rogue->calls);
    if (g_strcmp0(method, "OpenSession") == 0) {
        const gchar *algorithm = NULL;
        g_variant_get(parameters, "(&sv)", &algorithm, NULL);
        if (g_strcmp0(algorithm, "plain") != 0) {
            g_dbus_method_invocation_return_dbus_error(
                invocation, "org.freedesktop.DBus.Error.NotSupported", "plain only");
            return;
        }
        g_dbus_method_invocation_return_value(
            invocation,
            g_variant_new("(vo)", g_variant_new_string(""), "/org/freedesktop/secrets/session/1"));
    } else if (g_strcmp0(method, "SearchItems") == 0) {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(s)", "not paths"));
    } else if (g_strcmp0(method, "GetSecrets") == 0) {
        const gchar *strings[] = {"not", "secrets", NULL};
        g_dbus_method_invocation_return_value(invocation,
                                              g_variant_new("(^as)", (gchar **)strings));
    } else {
        g_dbus_method_invocation_return_value(invocation, g_variant_new("(u)", 7));
    }
}

static GVariant *rogue_property(GDBusConnection *connection, const gchar *sender,
                                const gchar *path, const gchar *interface, const gchar *name,
                                GError **error, gpointer data) {
    (void)connection, (void)sender, (void)path, (void)interface, (void)name, (void)error;
    KeepsakeRogue *rogue = data;
    g_atomic_int_inc(&rogue->calls);
    return g_variant_new_boolean(FALSE);
}

static const GDBusInterfaceVTable rogue_vtable = {rogue_method, rogue_property, NULL, {0}};

static gpointer rogue_run(gpointer data) {
    KeepsakeRogue *rogue = data;
    g_main_context_push_thread_default(rogue->context);
    GError *error = NULL;
    rogue->connection = g_dbus_connection_new_for_address_sync(
        rogue->address,
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
            G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, NULL, &error);
    if (rogue->connection != NULL) {
        g_dbus_connection_set_exit_on_close(rogue->connection, FALSE);
        rogue->registrations[0] = g_dbus_connection_register_object(
            rogue->connection, "/org/freedesktop/secrets", rogue->node->interfaces[0],
            &rogue_vtable, rogue, NULL, &error);
        if (rogue->registrations[0] != 0)
            rogue->registrations[1] = g_dbus_connection_register_object(
                rogue->connection, "/org/freedesktop/secrets/aliases/default",
                rogue->node->interfaces[1], &rogue_vtable, rogue, NULL, &error);
    }
    if (error == NULL) {
        GVariant *reply = g_dbus_connection_call_sync(
            rogue->connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
            "org.freedesktop.DBus", "RequestName",
            g_variant_new("(su)", "org.freedesktop.secrets", 4u /* DO_NOT_QUEUE */),
            G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
        if (reply != NULL) {
            guint32 answer = 0;
            g_variant_get(reply, "(u)", &answer);
            g_variant_unref(reply);
            if (answer != 1)
                g_set_error(&error, G_IO_ERROR, G_IO_ERROR_EXISTS,
                            "org.freedesktop.secrets is owned already (RequestName %u)", answer);
        }
    }
    g_mutex_lock(&rogue->lock);
    rogue->failure = error;
    rogue->started = TRUE;
    g_cond_signal(&rogue->ready);
    g_mutex_unlock(&rogue->lock);
    if (error == NULL) g_main_loop_run(rogue->loop);
    if (rogue->connection != NULL) {
        for (int i = 0; i < 2; i++)
            if (rogue->registrations[i] != 0)
                g_dbus_connection_unregister_object(rogue->connection, rogue->registrations[i]);
        g_dbus_connection_close_sync(rogue->connection, NULL, NULL);
        g_clear_object(&rogue->connection);
    }
    g_main_context_pop_thread_default(rogue->context);
    return NULL;
}

static void rogue_free(KeepsakeRogue *rogue) {
    g_main_loop_unref(rogue->loop);
    g_main_context_unref(rogue->context);
    g_dbus_node_info_unref(rogue->node);
    g_mutex_clear(&rogue->lock);
    g_cond_clear(&rogue->ready);
    g_free(rogue->address);
    g_free(rogue);
}

KeepsakeRogue *keepsake_rogue_start(const char *bus_address, GError **error) {
    KeepsakeRogue *rogue = g_new0(KeepsakeRogue, 1);
    rogue->node = g_dbus_node_info_new_for_xml(rogue_xml, error);
    if (rogue->node == NULL) {
        g_free(rogue);
        return NULL;
    }
    rogue->address = g_strdup(bus_address);
    rogue->context = g_main_context_new();
    rogue->loop = g_main_loop_new(rogue->context, FALSE);
    g_mutex_init(&rogue->lock);
    g_cond_init(&rogue->ready);
    rogue->thread = g_thread_new("keepsake-rogue", rogue_run, rogue);
    g_mutex_lock(&rogue->lock);
    while (!rogue->started) g_cond_wait(&rogue->ready, &rogue->lock);
    g_mutex_unlock(&rogue->lock);
    if (rogue->failure != NULL) {
        g_propagate_error(error, rogue->failure);
        g_thread_join(rogue->thread);
        rogue_free(rogue);
        return NULL;
    }
    return rogue;
}

guint keepsake_rogue_calls(KeepsakeRogue *rogue) { return (guint)g_atomic_int_get(&rogue->calls); }

void keepsake_rogue_stop(KeepsakeRogue *rogue) {
    g_main_loop_quit(rogue->loop);
    g_thread_join(rogue->thread);
    rogue_free(rogue);
}

guint keepsake_rogue_flood(const char *bus_address, guint pid, guint count, gsize payload,
                           GError **error) {
    GDBusConnection *connection = g_dbus_connection_new_for_address_sync(
        bus_address,
        G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
            G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, NULL, error);
    if (connection == NULL) return 0;
    g_dbus_connection_set_exit_on_close(connection, FALSE);
    const gchar *own = g_dbus_connection_get_unique_name(connection);
    GVariant *reply = g_dbus_connection_call_sync(
        connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
        "ListNames", NULL, G_VARIANT_TYPE("(as)"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL, error);
    if (reply == NULL) {
        g_object_unref(connection);
        return 0;
    }
    GVariantIter *names = NULL;
    g_variant_get(reply, "(as)", &names);
    guchar *bytes = g_malloc0(payload ? payload : 1);
    guint flooded = 0;
    const gchar *name = NULL;
    while (g_variant_iter_loop(names, "&s", &name)) {
        if (name[0] != ':' || g_strcmp0(name, own) == 0) continue;
        GVariant *owner = g_dbus_connection_call_sync(
            connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "GetConnectionUnixProcessID", g_variant_new("(s)", name), G_VARIANT_TYPE("(u)"),
            G_DBUS_CALL_FLAGS_NONE, 5000, NULL, NULL);
        if (owner == NULL) continue;
        guint owner_pid = 0;
        g_variant_get(owner, "(u)", &owner_pid);
        g_variant_unref(owner);
        if (owner_pid != pid) continue;
        for (guint i = 0; i < count; i++) {
            GVariant *body = g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, bytes, payload, 1);
            g_dbus_connection_emit_signal(connection, name, "/org/example/Flood",
                                          "org.example.Flood", "Junk",
                                          g_variant_new_tuple(&body, 1), NULL);
            /* Keep GDBus's own queue short: the point is the receiver's. */
            if (i % 1000 == 999) g_dbus_connection_flush_sync(connection, NULL, NULL);
        }
        flooded++;
    }
    g_dbus_connection_flush_sync(connection, NULL, NULL);
    /* A round trip: the bus has routed every signal before this returns. */
    GVariant *settled = g_dbus_connection_call_sync(
        connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
        "GetId", NULL, G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, 30000, NULL, NULL);
    if (settled != NULL) g_variant_unref(settled);
    g_free(bytes);
    g_variant_iter_free(names);
    g_variant_unref(reply);
    g_object_unref(connection);
    return flooded;
}
