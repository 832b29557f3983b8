#define KEEPSAKE_MULTIARCH_GLIB
#include "../multiarch.h"
