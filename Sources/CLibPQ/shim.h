// PostgreSQL's client library (Debian's libpq-dev): the escrow's shared store.
#include <libpq-fe.h>
