internal import CSecret
import Foundation

/// libsecret's own convenience calls (`secret_password_*v_sync`), the baseline the benchmark
/// measures Keepsake against. They use libsecret's process-wide default service on the session bus
/// named by `DBUS_SESSION_BUS_ADDRESS` at first use, so the benchmark sets that first.
package enum LibsecretBaseline {
    /// Mirrors `secret_password_storev_binary_sync` into the default collection.
    package static func store(_ attributes: [String: String], label: String, secret: Data) throws {
        try withAttributes(attributes) { table, error in
            let value = secret.withUnsafeBytes {
                secret_value_new(
                    $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count,
                    "application/octet-stream")
            }
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            return secret_password_storev_binary_sync(nil, table, nil, label, value, nil, &error)
                != 0
        }
    }

    /// Mirrors `secret_password_lookupv_binary_sync`; returns the secret's length.
    @discardableResult
    package static func lookup(_ attributes: [String: String]) throws -> Int {
        var length = 0
        try withAttributes(attributes) { table, error in
            guard let value = secret_password_lookupv_binary_sync(nil, table, nil, &error) else {
                return error == nil
            }
            secret_value_get(value, &length)
            secret_value_unref(UnsafeMutableRawPointer(value))
            return true
        }
        return length
    }

    /// Mirrors `secret_password_searchv_sync` with `SECRET_SEARCH_ALL | SECRET_SEARCH_LOAD_SECRETS`;
    /// returns the number of items found.
    @discardableResult
    package static func searchLoadingSecrets(_ attributes: [String: String]) throws -> Int {
        var count = 0
        try withAttributes(attributes) { table, error in
            let flags = SECRET_SEARCH_ALL.rawValue | SECRET_SEARCH_LOAD_SECRETS.rawValue
            let list = secret_password_searchv_sync(
                nil, table, SecretSearchFlags(flags), nil, &error)
            count = Int(g_list_length(list))
            g_list_free_full(list) { g_object_unref($0) }
            return error == nil
        }
        return count
    }

    /// Mirrors `secret_password_clearv_sync`.
    package static func clear(_ attributes: [String: String]) throws {
        try withAttributes(attributes) { table, error in
            _ = secret_password_clearv_sync(nil, table, nil, &error)
            return error == nil
        }
    }

    /// Round trips on libsecret's own connection (untimed by the benchmark), to the bus and then to
    /// the provider (`Peer.Ping`, which touches no item): each handles a connection's messages in
    /// order, so when they return, whatever libsecret's last call left queued behind it (the bus
    /// removing its item proxies' match rules, the provider's work after replying) is done and
    /// not charged to the next call timed.
    package static func settle() throws {
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            if let error { g_error_free(error) }
            throw HarnessError("libsecret's bus: no connection")
        }
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        for (name, path, interface, method) in [
            ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId"),
            (
                "org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.DBus.Peer",
                "Ping"
            ),
        ] {
            let reply = g_dbus_connection_call_sync(
                connection, name, path, interface, method, nil, nil, G_DBUS_CALL_FLAGS_NONE, -1,
                nil, &error)
            if let reply { g_variant_unref(reply) }
            if let error {
                let message = error.pointee.message.map { String(cString: $0) } ?? "?"
                g_error_free(error)
                throw HarnessError("libsecret's connection: \(method) failed: \(message)")
            }
        }
    }

    private static func withAttributes(
        _ attributes: [String: String],
        _ body: (OpaquePointer?, inout UnsafeMutablePointer<GError>?) -> Bool
    ) throws {
        let table = g_hash_table_new_full(g_str_hash, g_str_equal, { g_free($0) }, { g_free($0) })
        defer { g_hash_table_unref(table) }
        for (key, value) in attributes {
            g_hash_table_insert(table, g_strdup(key), g_strdup(value))
        }
        var error: UnsafeMutablePointer<GError>?
        if !body(table, &error) || error != nil {
            let message =
                error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "failed"
            if let error { g_error_free(error) }
            throw HarnessError("libsecret: \(message)")
        }
    }
}
