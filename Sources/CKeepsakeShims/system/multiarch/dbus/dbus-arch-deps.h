#define KEEPSAKE_MULTIARCH_DBUS
#include "../../multiarch.h"
