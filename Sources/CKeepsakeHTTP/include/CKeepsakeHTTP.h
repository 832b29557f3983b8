#ifndef KEEPSAKE_HTTP_H
#define KEEPSAKE_HTTP_H

#include <stddef.h>

/// One HTTP exchange's outcome. `body` is malloc'ed (free it with keepsake_http_free).
typedef struct {
    long status;
    unsigned char *body;
    size_t length;
    /// The response's ETag and Last-Modified headers, verbatim ("" when absent).
    char etag[256];
    char last_modified[64];
    /// A WebDAV LOCK's Lock-Token header ("" when absent).
    char lock_token[256];
    /// The DAV header (the compliance classes an OPTIONS answer names, "" when absent).
    char dav[128];
    /// Why the exchange failed (when keepsake_http_request returned non-zero).
    char error[256];
} keepsake_http_response;

/// The outcome codes besides libcurl's own (which are positive).
enum { KEEPSAKE_HTTP_TOO_LARGE = -1, KEEPSAKE_HTTP_SETUP = -2 };

/// A client: one libcurl handle reused request after request (its connections and TLS sessions
/// kept alive), one request at a time. Thread-safe.
typedef struct keepsake_http_client keepsake_http_client;
keepsake_http_client *keepsake_http_client_new(void);
void keepsake_http_client_free(keepsake_http_client *client);

/// One request on `client` (NULL: a handle of its own), synchronously, bounded: at most `timeout_ms` in all (connect included), a
/// response body of at most `max_response` bytes (announced or as it arrives), no redirect
/// followed, http and https only, TLS peers verified (against `ca_file` when given, else the
/// system's store). `user` and `password` (both or neither) go as basic authentication to this
/// URL's host only. `headers` are "Name: value" lines. Returns 0 when a response arrived (any
/// status), else a libcurl code or one of the codes above, with `error` set.
int keepsake_http_request(keepsake_http_client *client, const char *method, const char *url,
                          const char *user,
                          const char *password, const char *const *headers, size_t header_count,
                          const void *body, size_t body_length, size_t max_response,
                          long timeout_ms, const char *ca_file, keepsake_http_response *out);

void keepsake_http_free(keepsake_http_response *response);

#endif
