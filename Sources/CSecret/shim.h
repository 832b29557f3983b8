// The batched path API (search_for_dbus_paths, get_secrets_for_dbus_paths) is behind this macro.
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
