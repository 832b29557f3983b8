#ifndef CROGUE_SECRET_SERVICE_H
#define CROGUE_SECRET_SERVICE_H

#include <gio/gio.h>

/// A test-only impostor of the Secret Service: it owns org.freedesktop.secrets on a private bus
/// and answers as a broken or hostile provider would — sessions open, then SearchItems, GetSecrets
/// and Lock answer with replies of the wrong type, and the default collection says it is unlocked.
/// Never linked into anything shipped.
typedef struct KeepsakeRogue KeepsakeRogue;

/// Why: GDBus's object registration and main loop are C callbacks and macros. Returns NULL and
/// sets `error` when the bus cannot be reached or the name is taken.
KeepsakeRogue *keepsake_rogue_start(const char *bus_address, GError **error);

/// How many method calls the impostor answered.
guint keepsake_rogue_calls(KeepsakeRogue *rogue);

void keepsake_rogue_stop(KeepsakeRogue *rogue);

/// Why: a hostile program on the bus flooding another's connections with signals (GDBus calls and
/// variants). Sends `count` signals of `payload` bytes to every unique name of process `pid` on the
/// bus, then waits until the bus has routed them; returns how many names it flooded.
guint keepsake_rogue_flood(const char *bus_address, guint pid, guint count, gsize payload,
                           GError **error);

#endif
