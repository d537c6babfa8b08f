/* hub internals: the HTTP client (libcurl), one-file downloads into the blob store, and the
 * cache layout. Only the hub module includes this. */
#ifndef XI_HUB_INTERNAL_H
#define XI_HUB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "hub/hub.h"

/* ---- http.c: one request with libcurl ------------------------------------------------- */

/* Receives body bytes of the final response; returns n, or 0 to abort the transfer. */
typedef size_t (*xi_http_sink)(void *user, const char *data, size_t n);

typedef struct xi_http_req {
    const char *url;
    const char *token;          /* NULL, or sent as "Authorization: Bearer TOKEN" */
    int head;                   /* HEAD instead of GET */
    int follow;                 /* follow redirects (to the blob CDN) */
    int64_t range_from;         /* > 0: ask for bytes range_from.. */
    xi_http_sink sink;          /* NULL: the body is collected into body */
    void *user;
    xi_buf *body;               /* small bodies (JSON listings, error pages) */
} xi_http_req;

typedef enum xi_http_fail {
    XI_HTTP_OK = 0,             /* a response arrived (any status) */
    XI_HTTP_UNREACHABLE,        /* DNS, refused connection, connect timeout: no network */
    XI_HTTP_BROKEN,             /* the connection broke or stalled mid-transfer: resumable */
    XI_HTTP_ABORTED,            /* the sink stopped the transfer (its own error says why) */
    XI_HTTP_OTHER,              /* TLS, bad URL, ... */
} xi_http_fail;

typedef struct xi_http_resp {
    long status;                /* of the last response (after redirects) */
    char etag[160];             /* ETag of the first response that had one, quotes/W/ removed */
    char linked_etag[160];      /* X-Linked-Etag: the sha256 of an LFS file */
    char repo_commit[80];       /* X-Repo-Commit */
    char location[2048];        /* Location of a redirect not followed */
    char error_code[64];        /* X-Error-Code: RepoNotFound, GatedRepo, RevisionNotFound */
    int64_t linked_size;        /* X-Linked-Size, else -1 */
    int64_t content_length;     /* of the last response, else -1 */
    int64_t range_start;        /* Content-Range start of a 206, else -1 */
    xi_http_fail fail;
    char fail_msg[256];         /* libcurl's words for a failed transfer */
} xi_http_resp;

/* Run the request. Returns 0 when a response arrived (look at r->status), -1 when the
 * transfer failed (r->fail, r->fail_msg). */
int xi_http_do(const xi_http_req *q, xi_http_resp *r);
/* Percent-encode one URL component ('/' kept when keep_slash). Heap string. */
char *xi_http_escape(const char *s, int keep_slash);

/* ---- fetch.c: one file into the blob store -------------------------------------------- */

typedef struct xi_hub_fetch {
    const char *url;
    const char *token;
    const char *token_env;      /* where a token comes from, for the 401/403 message */
    const char *blob_path;      /* final name; BLOB.incomplete while downloading */
    const char *display;        /* file name shown in progress and errors */
    const char *sha256;         /* expected hex digest, or NULL (then size is checked) */
    int64_t size;               /* expected bytes, or -1 */
    int retries;
    int progress;               /* 1: a terminal bar on stderr */
    int quiet;
    int64_t bytes_received;     /* out: body bytes received in this call */
} xi_hub_fetch;

/* Download (resuming BLOB.incomplete), verify, rename into place. -1 with err. */
int xi_hub_fetch_file(xi_hub_fetch *f, char *err, size_t errlen);
/* Check a blob already in the store: size, and sha256 when given. 1 good, 0 bad, -1 error. */
int xi_hub_blob_ok(const char *blob_path, const char *sha256, int64_t size, char *err,
                   size_t errlen);

/* ---- cache.c: the hub-cache layout ---------------------------------------------------- */

/* CACHE root from options/environment (heap). */
char *xi_hub_cache_root(const xi_hub_options *o);
/* CACHE/models--ORG--NAME (heap). */
char *xi_hub_repo_dir(const char *root, const char *repo);
/* mkdir -p. */
int xi_hub_mkdirs(const char *path, char *err, size_t errlen);
/* refs/REV → commit into out; 0, or -1 when there is no such ref. */
int xi_hub_ref_read(const char *repo_dir, const char *rev, char *out, size_t outlen);
int xi_hub_ref_write(const char *repo_dir, const char *rev, const char *commit, char *err,
                     size_t errlen);
/* snapshots/COMMIT/FILE → ../../blobs/ETAG, replacing an old link atomically. */
int xi_hub_snapshot_link(const char *repo_dir, const char *commit, const char *file,
                         const char *etag, char *err, size_t errlen);
/* The commit a cached revision names: REV itself when its snapshot exists, else refs/REV. */
int xi_hub_cached_commit(const char *repo_dir, const char *rev, char *out, size_t outlen);

/* Human-readable byte count ("1.5 GiB") into buf. */
const char *xi_hub_fmt_bytes(int64_t n, char *buf, size_t len);

#endif
