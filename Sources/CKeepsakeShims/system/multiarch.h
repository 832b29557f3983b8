/* GLib's and libdbus's configuration headers (glibconfig.h, dbus/dbus-arch-deps.h) live in
 * Debian's multiarch directory, /usr/lib/<triplet>/, which no fixed search path of the package
 * can name: the two headers of the same name under multiarch/ ask for theirs here, by
 * architecture. Included once by each, with its own selector. */
#if defined(__x86_64__) && !defined(__ILP32__) && defined(KEEPSAKE_MULTIARCH_GLIB)
#include "/usr/lib/x86_64-linux-gnu/glib-2.0/include/glibconfig.h"
#elif defined(__x86_64__) && !defined(__ILP32__) && defined(KEEPSAKE_MULTIARCH_DBUS)
#include "/usr/lib/x86_64-linux-gnu/dbus-1.0/include/dbus/dbus-arch-deps.h"
#elif defined(__aarch64__) && defined(KEEPSAKE_MULTIARCH_GLIB)
#include "/usr/lib/aarch64-linux-gnu/glib-2.0/include/glibconfig.h"
#elif defined(__aarch64__) && defined(KEEPSAKE_MULTIARCH_DBUS)
#include "/usr/lib/aarch64-linux-gnu/dbus-1.0/include/dbus/dbus-arch-deps.h"
#else
#error "Keepsake's shims know the multiarch directories of x86_64 and aarch64 Debian only"
#endif
#undef KEEPSAKE_MULTIARCH_GLIB
#undef KEEPSAKE_MULTIARCH_DBUS
