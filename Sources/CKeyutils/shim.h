#include <keyutils.h>
