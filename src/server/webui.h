/* server/webui: the chat page (GET /) and the engine dashboard (GET /dashboard), compiled
 * into the binary from web/ by tools/embed_web.sh, and GET /webui/status, the dashboard's
 * JSON view of the engine (no secrets: names, sizes and counters only). The static files
 * never need the API key; the /v1 calls the pages make do. Any HTTP thread. */
#ifndef XI_SERVER_WEBUI_H
#define XI_SERVER_WEBUI_H

#include <microhttpd.h>
#include <stddef.h>

#include "server/server.h"

typedef struct xi_webui_asset {
    const char *name;                /* file name in web/, e.g. "chat.js" */
    const char *content_type;
    const char *etag;                /* quoted, from the file's sha256 */
    const unsigned char *raw;        /* [raw_len] the file */
    size_t raw_len;
    const unsigned char *gz;         /* [gz_len] the file gzip'ed (gzip -n -9) */
    size_t gz_len;
} xi_webui_asset;

/* Generated: every file of web/ (build/gen/webui_assets.c). */
extern const xi_webui_asset xi_webui_assets[];
extern const int xi_webui_n_assets;

/* The asset a GET of url serves ("/" is chat.html, "/dashboard" dashboard.html,
 * "/webui/NAME" the file NAME), or NULL. */
const xi_webui_asset *xi_webui_find(const char *url);

/* Whether an Accept-Encoding header value accepts gzip (a "gzip" or "*" coding whose q is
 * not 0). NULL accepts nothing. */
int xi_webui_accepts_gzip(const char *accept_encoding);

/* Answer a GET or HEAD of a web UI path (an asset or /webui/status) on c: returns 1 with
 * *ret set, or 0 when url is not one of them (or the method is another). */
int xi_webui_serve(xi_server *s, struct MHD_Connection *c, const char *url, const char *method,
                   enum MHD_Result *ret);

#endif
