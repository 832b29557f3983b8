#include "CKeepsakeHTTP.h"

#include <CKeepsakeLoader.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// libcurl is loaded when the first request is made, not linked: a process that never talks to a
// cloud (most `keepsake` commands, an app's first read) does not load it and the ~25 libraries it
// pulls in (TLS, HTTP/2, Kerberos, LDAP, …), which every start would otherwise pay for.
static struct curl_table {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *curl);
    void (*easy_reset)(CURL *curl);
    CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
    CURLcode (*easy_perform)(CURL *curl);
    CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *line);
    void (*slist_free_all)(struct curl_slist *list);
} lib;
static char load_error[200];
static int lib_loaded = 0;

static pthread_once_t initialized = PTHREAD_ONCE_INIT;
static void initialize(void) {
    static const char *const libraries[] = {"libcurl.so.4"};
#define SYMBOL(field) {"curl_" #field, offsetof(struct curl_table, field)}
    static const keepsake_symbol symbols[] = {
        SYMBOL(global_init), SYMBOL(easy_init),    SYMBOL(easy_cleanup),  SYMBOL(easy_reset),
        SYMBOL(easy_setopt), SYMBOL(easy_perform), SYMBOL(easy_getinfo),  SYMBOL(easy_strerror),
        SYMBOL(slist_append), SYMBOL(slist_free_all),
    };
#undef SYMBOL
    if (!keepsake_load_table(libraries, 1, RTLD_NOW, symbols, sizeof symbols / sizeof symbols[0],
                             &lib, "libcurl4", load_error, sizeof load_error))
        return;
    lib.global_init(CURL_GLOBAL_DEFAULT);
    lib_loaded = 1;
}

/// Whether libcurl is there to use (loaded on the first call).
static int loaded(void) {
    pthread_once(&initialized, initialize);
    return lib_loaded;
}

typedef struct {
    keepsake_http_response *out;
    size_t limit;
    size_t capacity;
    int too_large;
} collector;

static size_t on_body(char *data, size_t size, size_t count, void *context) {
    collector *c = context;
    size_t n = size * count;
    if (c->out->length + n > c->limit) {
        c->too_large = 1;
        return 0;  // aborts the transfer
    }
    if (c->out->length + n > c->capacity) {
        size_t capacity = c->capacity ? c->capacity : 4096;
        while (capacity < c->out->length + n) capacity *= 2;
        if (capacity > c->limit) capacity = c->limit;
        unsigned char *grown = realloc(c->out->body, capacity);
        if (!grown) return 0;
        c->out->body = grown;
        c->capacity = capacity;
    }
    memcpy(c->out->body + c->out->length, data, n);
    c->out->length += n;
    return n;
}

/// Copies a header's value (without its line end) when `line` is "name: value".
static void take_header(const char *line, size_t length, const char *name, char *into,
                        size_t room) {
    size_t name_length = strlen(name);
    if (length <= name_length + 1 || strncasecmp(line, name, name_length) != 0 ||
        line[name_length] != ':')
        return;
    const char *value = line + name_length + 1;
    size_t value_length = length - name_length - 1;
    while (value_length && (*value == ' ' || *value == '\t')) { value++; value_length--; }
    while (value_length && (value[value_length - 1] == '\r' || value[value_length - 1] == '\n'))
        value_length--;
    if (value_length >= room) value_length = room - 1;
    memcpy(into, value, value_length);
    into[value_length] = 0;
}

static size_t on_header(char *line, size_t size, size_t count, void *context) {
    keepsake_http_response *out = context;
    size_t n = size * count;
    // A new status line (after a 100 Continue) starts the headers over.
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        out->etag[0] = 0;
        out->last_modified[0] = 0;
        out->lock_token[0] = 0;
        out->dav[0] = 0;
    }
    take_header(line, n, "ETag", out->etag, sizeof out->etag);
    take_header(line, n, "Last-Modified", out->last_modified, sizeof out->last_modified);
    take_header(line, n, "Lock-Token", out->lock_token, sizeof out->lock_token);
    // DAV may come in several header lines (Apache: "1,2" and its property set): joined by ",".
    size_t had = strlen(out->dav);
    if (n > 4 && strncasecmp(line, "DAV:", 4) == 0 && had + 2 < sizeof out->dav) {
        if (had) out->dav[had++] = ',';
        take_header(line, n, "DAV", out->dav + had, sizeof out->dav - had);
    }
    return n;
}

struct keepsake_http_client {
    pthread_mutex_t lock;
    CURL *curl;
};

keepsake_http_client *keepsake_http_client_new(void) {
    keepsake_http_client *client = calloc(1, sizeof *client);
    if (!client) return NULL;
    pthread_mutex_init(&client->lock, NULL);
    // Without libcurl the client has no handle; each request then says why.
    if (loaded()) client->curl = lib.easy_init();
    return client;
}

void keepsake_http_client_free(keepsake_http_client *client) {
    if (!client) return;
    if (client->curl) lib.easy_cleanup(client->curl);
    pthread_mutex_destroy(&client->lock);
    free(client);
}

static int perform(CURL *curl, const char *method, const char *url, const char *user,
                   const char *password, const char *const *headers, size_t header_count,
                   const void *body, size_t body_length, size_t max_response, long timeout_ms,
                   const char *ca_file, keepsake_http_response *out);

int keepsake_http_request(keepsake_http_client *client, const char *method, const char *url,
                          const char *user, const char *password, const char *const *headers,
                          size_t header_count, const void *body, size_t body_length,
                          size_t max_response, long timeout_ms, const char *ca_file,
                          keepsake_http_response *out) {
    memset(out, 0, sizeof *out);
    if (!loaded()) {
        snprintf(out->error, sizeof out->error, "%s", load_error);
        return KEEPSAKE_HTTP_SETUP;
    }
    if (client && client->curl) {
        pthread_mutex_lock(&client->lock);
        // Every option back to its default; live connections and TLS sessions are kept.
        lib.easy_reset(client->curl);
        int result = perform(client->curl, method, url, user, password, headers, header_count,
                             body, body_length, max_response, timeout_ms, ca_file, out);
        pthread_mutex_unlock(&client->lock);
        return result;
    }
    CURL *curl = lib.easy_init();
    if (!curl) {
        strcpy(out->error, "libcurl could not start a transfer");
        return KEEPSAKE_HTTP_SETUP;
    }
    int result = perform(curl, method, url, user, password, headers, header_count, body,
                         body_length, max_response, timeout_ms, ca_file, out);
    lib.easy_cleanup(curl);
    return result;
}

static int perform(CURL *curl, const char *method, const char *url, const char *user,
                   const char *password, const char *const *headers, size_t header_count,
                   const void *body, size_t body_length, size_t max_response, long timeout_ms,
                   const char *ca_file, keepsake_http_response *out) {
    collector c = {out, max_response, 0, 0};
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < header_count; i++) list = lib.slist_append(list, headers[i]);
    // libcurl would add "Expect: 100-continue" to larger bodies: one more round trip.
    list = lib.slist_append(list, "Expect:");

    char error[CURL_ERROR_SIZE] = {0};
    lib.easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    lib.easy_setopt(curl, CURLOPT_URL, url);
    lib.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    lib.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    // A proxy from the environment never stands between a device and a server on its own host.
    lib.easy_setopt(curl, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
    lib.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    lib.easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    lib.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    lib.easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    lib.easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ca_file) lib.easy_setopt(curl, CURLOPT_CAINFO, ca_file);
    lib.easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_response);
    lib.easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    lib.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    lib.easy_setopt(curl, CURLOPT_WRITEDATA, &c);
    // HTTP/1.1 as every WebDAV client speaks it: rclone's HTTP/2 answered a PROPFIND with a
    // framing-layer stream error under load.
    lib.easy_setopt(curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    lib.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    lib.easy_setopt(curl, CURLOPT_HEADERDATA, out);
    if (user && password) {
        lib.easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        lib.easy_setopt(curl, CURLOPT_USERNAME, user);
        lib.easy_setopt(curl, CURLOPT_PASSWORD, password);
    }
    if (strcmp(method, "HEAD") == 0) {
        lib.easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        lib.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    }
    if (body) {
        lib.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
        lib.easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    }

    CURLcode code = lib.easy_perform(curl);
    lib.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    int result = 0;
    if (c.too_large || code == CURLE_FILESIZE_EXCEEDED) {
        snprintf(out->error, sizeof out->error, "a response larger than %zu bytes", max_response);
        result = KEEPSAKE_HTTP_TOO_LARGE;
    } else if (code != CURLE_OK) {
        snprintf(out->error, sizeof out->error, "%s", error[0] ? error : lib.easy_strerror(code));
        result = (int)code;
    }
    if (result != 0) {
        free(out->body);
        out->body = NULL;
        out->length = 0;
    }
    // The handle must not keep pointers into this call's stack or lists.
    lib.easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    lib.easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    lib.slist_free_all(list);
    return result;
}

void keepsake_http_free(keepsake_http_response *response) {
    free(response->body);
    response->body = NULL;
    response->length = 0;
}
