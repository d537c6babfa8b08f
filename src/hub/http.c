/* hub/http: one HTTP request through libcurl, with the response headers the hubs use for
 * caching (ETag, X-Linked-Etag, X-Linked-Size, X-Repo-Commit, X-Error-Code) picked out. */
#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/hub_internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct http_ctx {
    const xi_http_req *q;
    xi_http_resp *r;
} http_ctx;

/* Copy a header value without surrounding blanks; ETags lose their W/ and quotes the way
 * huggingface_hub normalises them, so the cache names blobs identically. */
static void header_value(const char *v, size_t n, char *out, size_t outlen, int etag) {
    while (n && (*v == ' ' || *v == '\t')) v++, n--;
    while (n && isspace((unsigned char)v[n - 1])) n--;
    if (etag) {
        if (n >= 2 && v[0] == 'W' && v[1] == '/') v += 2, n -= 2;
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
    }
    if (n >= outlen) n = outlen - 1;
    memcpy(out, v, n);
    out[n] = 0;
}

static int header_is(const char *line, size_t n, const char *name, const char **value,
                     size_t *vlen) {
    size_t k = strlen(name);
    if (n <= k || line[k] != ':' || strncasecmp(line, name, k)) return 0;
    *value = line + k + 1;
    *vlen = n - k - 1;
    return 1;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *user) {
    http_ctx *c = user;
    xi_http_resp *r = c->r;
    size_t n = size * nitems;
    const char *v;
    size_t vn;
    char num[32];
    if (n >= 5 && !strncmp(buf, "HTTP/", 5)) {
        /* A new response in a redirect chain: per-response fields start over, the hub's
         * metadata from the first hop is kept. */
        r->status = 0;
        r->content_length = -1;
        r->range_start = -1;
        const char *sp = memchr(buf, ' ', n);
        if (sp) r->status = strtol(sp + 1, NULL, 10);
    } else if (header_is(buf, n, "etag", &v, &vn)) {
        if (!r->etag[0]) header_value(v, vn, r->etag, sizeof r->etag, 1);
    } else if (header_is(buf, n, "x-linked-etag", &v, &vn)) {
        if (!r->linked_etag[0]) header_value(v, vn, r->linked_etag, sizeof r->linked_etag, 1);
    } else if (header_is(buf, n, "x-repo-commit", &v, &vn)) {
        if (!r->repo_commit[0]) header_value(v, vn, r->repo_commit, sizeof r->repo_commit, 0);
    } else if (header_is(buf, n, "x-error-code", &v, &vn)) {
        header_value(v, vn, r->error_code, sizeof r->error_code, 0);
    } else if (header_is(buf, n, "location", &v, &vn)) {
        header_value(v, vn, r->location, sizeof r->location, 0);
    } else if (header_is(buf, n, "x-linked-size", &v, &vn)) {
        header_value(v, vn, num, sizeof num, 0);
        if (r->linked_size < 0) r->linked_size = strtoll(num, NULL, 10);
    } else if (header_is(buf, n, "content-length", &v, &vn)) {
        header_value(v, vn, num, sizeof num, 0);
        r->content_length = strtoll(num, NULL, 10);
    } else if (header_is(buf, n, "content-range", &v, &vn)) {
        /* "bytes START-END/TOTAL" */
        char cr[96];
        header_value(v, vn, cr, sizeof cr, 0);
        long long a;
        if (sscanf(cr, "bytes %lld-", &a) == 1) r->range_start = a;
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    http_ctx *c = user;
    size_t n = size * nmemb;
    if (c->q->sink) return c->q->sink(c->q->user, data, n);
    if (c->q->body && xi_buf_append(c->q->body, data, n)) return 0;
    return n;
}

static xi_http_fail classify(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return XI_HTTP_UNREACHABLE;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return XI_HTTP_BROKEN;
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
        return XI_HTTP_ABORTED;
    default:
        return XI_HTTP_OTHER;
    }
}

int xi_http_do(const xi_http_req *q, xi_http_resp *r) {
    memset(r, 0, sizeof *r);
    r->linked_size = r->content_length = r->range_start = -1;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        r->fail = XI_HTTP_OTHER;
        snprintf(r->fail_msg, sizeof r->fail_msg, "libcurl: %s", curl_easy_strerror(curl_init_rc));
        return -1;
    }
    CURL *h = curl_easy_init();
    if (!h) {
        r->fail = XI_HTTP_OTHER;
        snprintf(r->fail_msg, sizeof r->fail_msg, "libcurl: out of memory");
        return -1;
    }
    http_ctx c = {q, r};
    struct curl_slist *hdrs = NULL;
    char auth[1024], range[64];
    if (q->token && *q->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", q->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    /* The size and etag headers describe the stored bytes; a compressed body would not
     * match them (huggingface_hub asks for identity for the same reason). */
    hdrs = curl_slist_append(hdrs, "Accept-Encoding: identity");
    curl_easy_setopt(h, CURLOPT_URL, q->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "xinfer/0.1");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 20L);
    /* A transfer slower than 1 KiB/s for a minute is stalled: give it back to the caller,
     * which resumes with a Range request. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &c);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
    /* libcurl does not send a custom Authorization header to another host after a
     * redirect, so the token never reaches the blob CDN. */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, q->follow ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    if (q->head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (q->range_from > 0) {
        snprintf(range, sizeof range, "%lld-", (long long)q->range_from);
        curl_easy_setopt(h, CURLOPT_RANGE, range);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    if (rc == CURLE_OK) return 0;
    r->fail = classify(rc);
    snprintf(r->fail_msg, sizeof r->fail_msg, "%s", curl_easy_strerror(rc));
    return -1;
}

char *xi_http_escape(const char *s, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
            (keep_slash && ch == '/')) {
            *o++ = (char)ch;
        } else {
            *o++ = '%';
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    *o = 0;
    return out;
}
