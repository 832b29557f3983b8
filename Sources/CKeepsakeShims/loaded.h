#ifndef CKEEPSAKE_SHIMS_LOADED_H
#define CKEEPSAKE_SHIMS_LOADED_H

// libsecret and GIO are loaded when the first connection opens (dlopen), not linked: a command
// that never reaches the Secret Service (`--help`, a usage error) does not load them and the
// dozen libraries they bring. Every call the shims make into libsecret, GIO, GObject, GLib and
// libdbus goes through the table `keepsake_shims_load` fills, and none of them is linked: each
// function is found under libsecret's handle (GIO, GObject and GLib come with it) or libdbus's.
// Every file of the shims includes this (with the libraries' headers, which only the shims see);
// the calls read as usual. A call to another function of these libraries needs its name here.

#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#include "CKeepsakeShims.h"
#include <dbus/dbus.h>

#define KEEPSAKE_SECRET_FUNCTIONS(X) \
    X(dbus_bus_register) X(dbus_connection_close) X(dbus_connection_dispatch)                      \
    X(dbus_connection_open_private) X(dbus_connection_send_with_reply)                             \
    X(dbus_connection_set_exit_on_disconnect) X(dbus_connection_set_max_message_size)              \
    X(dbus_connection_set_max_received_size) X(dbus_connection_unref) X(dbus_error_free)           \
    X(dbus_error_has_name) X(dbus_error_init) X(dbus_message_append_args)                          \
    X(dbus_message_get_signature) X(dbus_message_get_type) X(dbus_message_has_signature)           \
    X(dbus_message_iter_append_basic) X(dbus_message_iter_close_container)                         \
    X(dbus_message_iter_get_arg_type) X(dbus_message_iter_get_basic)                               \
    X(dbus_message_iter_get_fixed_array) X(dbus_message_iter_init)                                 \
    X(dbus_message_iter_init_append) X(dbus_message_iter_next)                                     \
    X(dbus_message_iter_open_container) X(dbus_message_iter_recurse)                               \
    X(dbus_message_new_method_call) X(dbus_message_set_auto_start) X(dbus_message_unref)           \
    X(dbus_pending_call_block) X(dbus_pending_call_cancel) X(dbus_pending_call_steal_reply)        \
    X(dbus_pending_call_unref) X(dbus_set_error_from_message) X(dbus_threads_init_default)         \
    X(dbus_validate_path) X(dbus_validate_utf8) X(g_bus_get_sync) X(g_cancellable_cancel)          \
    X(g_cancellable_is_cancelled) X(g_cancellable_new) X(g_dbus_address_get_for_bus_sync) X(g_dbus_connection_call_sync)         \
    X(g_dbus_connection_new_for_address_sync) X(g_dbus_connection_set_exit_on_close)               \
    X(g_dbus_error_get_remote_error) X(g_dbus_error_new_for_dbus_error)                            \
    X(g_dbus_proxy_call_sync) X(g_dbus_proxy_get_connection) X(g_dbus_proxy_get_default_timeout)   \
    X(g_dbus_proxy_get_type) X(g_dbus_proxy_set_default_timeout) X(g_error_free)                   \
    X(g_error_matches) X(g_free) X(g_get_monotonic_time) X(g_initable_get_type)                    \
    X(g_initable_init) X(g_io_error_quark) X(g_malloc0) X(g_malloc0_n) X(g_object_new)             \
    X(g_object_get_data) X(g_object_set_data_full) X(g_object_unref) X(g_prefix_error) X(g_propagate_error) X(g_ptr_array_add) X(g_ptr_array_free)                  \
    X(g_ptr_array_new) X(g_quark_to_string) X(g_set_error) X(g_set_error_literal) X(g_strdup)      \
    X(g_strfreev) X(g_type_check_instance_cast) X(g_variant_builder_add)                           \
    X(g_variant_builder_end) X(g_variant_builder_init) X(g_variant_get) X(g_variant_get_child) X(g_variant_get_fixed_array)     \
    X(g_variant_get_string) X(g_variant_is_of_type) X(g_variant_lookup_value)                      \
    X(g_variant_n_children) X(g_variant_new) X(g_variant_new_fixed_array) X(g_variant_new_objv) X(g_variant_new_string)         \
    X(g_variant_type_checked_) X(g_variant_unref) X(secret_error_get_quark)                        \
    X(secret_service_encode_dbus_secret)                                                           \
    X(secret_service_ensure_session_sync) X(secret_service_get_type)                               \
    X(secret_service_prompt_at_dbus_path_sync) X(secret_value_get) X(secret_value_new)             \
    X(secret_value_unref)

struct keepsake_secret_libs {
#define KEEPSAKE_SECRET_FIELD(name) __typeof__(&name) name;
    KEEPSAKE_SECRET_FUNCTIONS(KEEPSAKE_SECRET_FIELD)
#undef KEEPSAKE_SECRET_FIELD
};
extern struct keepsake_secret_libs keepsake_secret_libs;

#ifndef KEEPSAKE_SECRET_TABLE_ONLY
// Each name is undefined first: GLib defines some as macros of its own (g_strdup, since 2.76);
// g_new0 is GLib's macro over g_malloc0 (optimised builds) or g_malloc0_n.
#undef dbus_bus_register
#define dbus_bus_register keepsake_secret_libs.dbus_bus_register
#undef dbus_connection_close
#define dbus_connection_close keepsake_secret_libs.dbus_connection_close
#undef dbus_connection_dispatch
#define dbus_connection_dispatch keepsake_secret_libs.dbus_connection_dispatch
#undef dbus_connection_open_private
#define dbus_connection_open_private keepsake_secret_libs.dbus_connection_open_private
#undef dbus_connection_send_with_reply
#define dbus_connection_send_with_reply keepsake_secret_libs.dbus_connection_send_with_reply
#undef dbus_connection_set_exit_on_disconnect
#define dbus_connection_set_exit_on_disconnect keepsake_secret_libs.dbus_connection_set_exit_on_disconnect
#undef dbus_connection_set_max_message_size
#define dbus_connection_set_max_message_size keepsake_secret_libs.dbus_connection_set_max_message_size
#undef dbus_connection_set_max_received_size
#define dbus_connection_set_max_received_size keepsake_secret_libs.dbus_connection_set_max_received_size
#undef dbus_connection_unref
#define dbus_connection_unref keepsake_secret_libs.dbus_connection_unref
#undef dbus_error_free
#define dbus_error_free keepsake_secret_libs.dbus_error_free
#undef dbus_error_has_name
#define dbus_error_has_name keepsake_secret_libs.dbus_error_has_name
#undef dbus_error_init
#define dbus_error_init keepsake_secret_libs.dbus_error_init
#undef dbus_message_append_args
#define dbus_message_append_args keepsake_secret_libs.dbus_message_append_args
#undef dbus_message_get_signature
#define dbus_message_get_signature keepsake_secret_libs.dbus_message_get_signature
#undef dbus_message_get_type
#define dbus_message_get_type keepsake_secret_libs.dbus_message_get_type
#undef dbus_message_has_signature
#define dbus_message_has_signature keepsake_secret_libs.dbus_message_has_signature
#undef dbus_message_iter_append_basic
#define dbus_message_iter_append_basic keepsake_secret_libs.dbus_message_iter_append_basic
#undef dbus_message_iter_close_container
#define dbus_message_iter_close_container keepsake_secret_libs.dbus_message_iter_close_container
#undef dbus_message_iter_get_arg_type
#define dbus_message_iter_get_arg_type keepsake_secret_libs.dbus_message_iter_get_arg_type
#undef dbus_message_iter_get_basic
#define dbus_message_iter_get_basic keepsake_secret_libs.dbus_message_iter_get_basic
#undef dbus_message_iter_get_fixed_array
#define dbus_message_iter_get_fixed_array keepsake_secret_libs.dbus_message_iter_get_fixed_array
#undef dbus_message_iter_init
#define dbus_message_iter_init keepsake_secret_libs.dbus_message_iter_init
#undef dbus_message_iter_init_append
#define dbus_message_iter_init_append keepsake_secret_libs.dbus_message_iter_init_append
#undef dbus_message_iter_next
#define dbus_message_iter_next keepsake_secret_libs.dbus_message_iter_next
#undef dbus_message_iter_open_container
#define dbus_message_iter_open_container keepsake_secret_libs.dbus_message_iter_open_container
#undef dbus_message_iter_recurse
#define dbus_message_iter_recurse keepsake_secret_libs.dbus_message_iter_recurse
#undef dbus_message_new_method_call
#define dbus_message_new_method_call keepsake_secret_libs.dbus_message_new_method_call
#undef dbus_message_set_auto_start
#define dbus_message_set_auto_start keepsake_secret_libs.dbus_message_set_auto_start
#undef dbus_message_unref
#define dbus_message_unref keepsake_secret_libs.dbus_message_unref
#undef dbus_pending_call_block
#define dbus_pending_call_block keepsake_secret_libs.dbus_pending_call_block
#undef dbus_pending_call_cancel
#define dbus_pending_call_cancel keepsake_secret_libs.dbus_pending_call_cancel
#undef dbus_pending_call_steal_reply
#define dbus_pending_call_steal_reply keepsake_secret_libs.dbus_pending_call_steal_reply
#undef dbus_pending_call_unref
#define dbus_pending_call_unref keepsake_secret_libs.dbus_pending_call_unref
#undef dbus_set_error_from_message
#define dbus_set_error_from_message keepsake_secret_libs.dbus_set_error_from_message
#undef dbus_threads_init_default
#define dbus_threads_init_default keepsake_secret_libs.dbus_threads_init_default
#undef dbus_validate_path
#define dbus_validate_path keepsake_secret_libs.dbus_validate_path
#undef dbus_validate_utf8
#define dbus_validate_utf8 keepsake_secret_libs.dbus_validate_utf8
#undef g_bus_get_sync
#define g_bus_get_sync keepsake_secret_libs.g_bus_get_sync
#undef g_cancellable_cancel
#define g_cancellable_cancel keepsake_secret_libs.g_cancellable_cancel
#undef g_cancellable_is_cancelled
#define g_cancellable_is_cancelled keepsake_secret_libs.g_cancellable_is_cancelled
#undef g_cancellable_new
#define g_cancellable_new keepsake_secret_libs.g_cancellable_new
#undef g_dbus_address_get_for_bus_sync
#define g_dbus_address_get_for_bus_sync keepsake_secret_libs.g_dbus_address_get_for_bus_sync
#undef g_dbus_connection_call_sync
#define g_dbus_connection_call_sync keepsake_secret_libs.g_dbus_connection_call_sync
#undef g_dbus_connection_new_for_address_sync
#define g_dbus_connection_new_for_address_sync keepsake_secret_libs.g_dbus_connection_new_for_address_sync
#undef g_dbus_connection_set_exit_on_close
#define g_dbus_connection_set_exit_on_close keepsake_secret_libs.g_dbus_connection_set_exit_on_close
#undef g_dbus_error_get_remote_error
#define g_dbus_error_get_remote_error keepsake_secret_libs.g_dbus_error_get_remote_error
#undef g_dbus_error_new_for_dbus_error
#define g_dbus_error_new_for_dbus_error keepsake_secret_libs.g_dbus_error_new_for_dbus_error
#undef g_dbus_proxy_call_sync
#define g_dbus_proxy_call_sync keepsake_secret_libs.g_dbus_proxy_call_sync
#undef g_dbus_proxy_get_connection
#define g_dbus_proxy_get_connection keepsake_secret_libs.g_dbus_proxy_get_connection
#undef g_dbus_proxy_get_default_timeout
#define g_dbus_proxy_get_default_timeout keepsake_secret_libs.g_dbus_proxy_get_default_timeout
#undef g_dbus_proxy_get_type
#define g_dbus_proxy_get_type keepsake_secret_libs.g_dbus_proxy_get_type
#undef g_dbus_proxy_set_default_timeout
#define g_dbus_proxy_set_default_timeout keepsake_secret_libs.g_dbus_proxy_set_default_timeout
#undef g_error_free
#define g_error_free keepsake_secret_libs.g_error_free
#undef g_error_matches
#define g_error_matches keepsake_secret_libs.g_error_matches
#undef g_free
#define g_free keepsake_secret_libs.g_free
#undef g_get_monotonic_time
#define g_get_monotonic_time keepsake_secret_libs.g_get_monotonic_time
#undef g_initable_get_type
#define g_initable_get_type keepsake_secret_libs.g_initable_get_type
#undef g_initable_init
#define g_initable_init keepsake_secret_libs.g_initable_init
#undef g_io_error_quark
#define g_io_error_quark keepsake_secret_libs.g_io_error_quark
#undef g_malloc0
#define g_malloc0 keepsake_secret_libs.g_malloc0
#undef g_malloc0_n
#define g_malloc0_n keepsake_secret_libs.g_malloc0_n
#undef g_object_new
#define g_object_new keepsake_secret_libs.g_object_new
#undef g_object_get_data
#define g_object_get_data keepsake_secret_libs.g_object_get_data
#undef g_object_set_data_full
#define g_object_set_data_full keepsake_secret_libs.g_object_set_data_full
#undef g_object_unref
#define g_object_unref keepsake_secret_libs.g_object_unref
#undef g_prefix_error
#define g_prefix_error keepsake_secret_libs.g_prefix_error
#undef g_propagate_error
#define g_propagate_error keepsake_secret_libs.g_propagate_error
#undef g_ptr_array_add
#define g_ptr_array_add keepsake_secret_libs.g_ptr_array_add
#undef g_ptr_array_free
#define g_ptr_array_free keepsake_secret_libs.g_ptr_array_free
#undef g_ptr_array_new
#define g_ptr_array_new keepsake_secret_libs.g_ptr_array_new
#undef g_quark_to_string
#define g_quark_to_string keepsake_secret_libs.g_quark_to_string
#undef g_set_error
#define g_set_error keepsake_secret_libs.g_set_error
#undef g_set_error_literal
#define g_set_error_literal keepsake_secret_libs.g_set_error_literal
#undef g_strdup
#define g_strdup keepsake_secret_libs.g_strdup
#undef g_strfreev
#define g_strfreev keepsake_secret_libs.g_strfreev
#undef g_type_check_instance_cast
#define g_type_check_instance_cast keepsake_secret_libs.g_type_check_instance_cast
#undef g_variant_builder_add
#define g_variant_builder_add keepsake_secret_libs.g_variant_builder_add
#undef g_variant_builder_end
#define g_variant_builder_end keepsake_secret_libs.g_variant_builder_end
#undef g_variant_builder_init
#define g_variant_builder_init keepsake_secret_libs.g_variant_builder_init
#undef g_variant_get
#define g_variant_get keepsake_secret_libs.g_variant_get
#undef g_variant_get_child
#define g_variant_get_child keepsake_secret_libs.g_variant_get_child
#undef g_variant_get_fixed_array
#define g_variant_get_fixed_array keepsake_secret_libs.g_variant_get_fixed_array
#undef g_variant_get_string
#define g_variant_get_string keepsake_secret_libs.g_variant_get_string
#undef g_variant_is_of_type
#define g_variant_is_of_type keepsake_secret_libs.g_variant_is_of_type
#undef g_variant_lookup_value
#define g_variant_lookup_value keepsake_secret_libs.g_variant_lookup_value
#undef g_variant_n_children
#define g_variant_n_children keepsake_secret_libs.g_variant_n_children
#undef g_variant_new
#define g_variant_new keepsake_secret_libs.g_variant_new
#undef g_variant_new_fixed_array
#define g_variant_new_fixed_array keepsake_secret_libs.g_variant_new_fixed_array
#undef g_variant_new_objv
#define g_variant_new_objv keepsake_secret_libs.g_variant_new_objv
#undef g_variant_new_string
#define g_variant_new_string keepsake_secret_libs.g_variant_new_string
#undef g_variant_type_checked_
#define g_variant_type_checked_ keepsake_secret_libs.g_variant_type_checked_
#undef g_variant_unref
#define g_variant_unref keepsake_secret_libs.g_variant_unref
#undef secret_error_get_quark
#define secret_error_get_quark keepsake_secret_libs.secret_error_get_quark
#undef secret_service_encode_dbus_secret
#define secret_service_encode_dbus_secret keepsake_secret_libs.secret_service_encode_dbus_secret
#undef secret_service_ensure_session_sync
#define secret_service_ensure_session_sync keepsake_secret_libs.secret_service_ensure_session_sync
#undef secret_service_get_type
#define secret_service_get_type keepsake_secret_libs.secret_service_get_type
#undef secret_service_prompt_at_dbus_path_sync
#define secret_service_prompt_at_dbus_path_sync keepsake_secret_libs.secret_service_prompt_at_dbus_path_sync
#undef secret_value_get
#define secret_value_get keepsake_secret_libs.secret_value_get
#undef secret_value_new
#define secret_value_new keepsake_secret_libs.secret_value_new
#undef secret_value_unref
#define secret_value_unref keepsake_secret_libs.secret_value_unref
#endif

#endif
