/* server/cors: CORS and X-Request-Id headers (see cors.h). */
#include "server/cors.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server_internal.h"

typedef struct http_thread {
    xi_server *s;
    struct MHD_Connection *c;
    char client_id[40];              /* "" when the client sent none usable */
    char id[40];                     /* what X-Request-Id answers */
} http_thread;

static _Thread_local http_thread cur;

int xi_cors_check_list(const char *flag, const char *value, char *err, size_t errlen) {
    json_t *a = json_loads(value, 0, NULL);
    int ok = json_is_array(a);
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) ok &= json_is_string(v);
    json_decref(a);
    if (!ok) snprintf(err, errlen, "%s %s: a JSON list of strings, e.g. '[\"*\"]'", flag, value);
    return ok ? 0 : -1;
}

/* value is in the JSON list (NULL: ["*"]); "*" allows anything. nocase: header names. */
static int listed(const char *list, const char *value, size_t n, int nocase) {
    if (!list) return 1;
    json_t *a = json_loads(list, 0, NULL);
    int hit = 0;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        const char *s = json_string_value(v);
        if (s && (!strcmp(s, "*") ||
                  (strlen(s) == n && (nocase ? !strncasecmp(s, value, n) : !strncmp(s, value, n)))))
            hit = 1;
    }
    json_decref(a);
    return hit;
}

static int any(const char *list) { return listed(list, "*", 1, 0); }

void xi_http_enter(xi_server *s, struct MHD_Connection *c) {
    cur.s = s;
    cur.c = c;
    cur.client_id[0] = cur.id[0] = 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = h ? strlen(h) : 0;
    int ok = n > 0 && n <= 32;
    for (size_t i = 0; ok && i < n; i++) ok = isalnum((unsigned char)h[i]) || strchr("-_.", h[i]);
    if (ok) memcpy(cur.client_id, h, n + 1);
}

const char *xi_http_client_request_id(void) { return cur.client_id[0] ? cur.client_id : NULL; }

void xi_http_decorate(struct MHD_Response *r) {
    xi_server *s = cur.s;
    if (!s) return;
    const xi_server_config *cfg = &s->cfg;
    if (cfg->request_id_headers) {
        if (!cur.id[0]) {
            if (cur.client_id[0]) snprintf(cur.id, sizeof cur.id, "%s", cur.client_id);
            else xi_srv_new_id(s, "req", cur.id);
        }
        MHD_add_response_header(r, "X-Request-Id", cur.id);
    }
    const char *origin = MHD_lookup_connection_value(cur.c, MHD_HEADER_KIND, "Origin");
    if (!origin || !listed(cfg->allowed_origins, origin, strlen(origin), 0)) return;
    if (any(cfg->allowed_origins) && !cfg->allow_credentials) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    } else {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Vary", "Origin");
    }
    if (cfg->allow_credentials) MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
}

/* The comma-separated items of h all listed. */
static int all_listed(const char *list, const char *h) {
    while (h && *h) {
        h += strspn(h, " ,");
        size_t n = strcspn(h, ",");
        while (n && h[n - 1] == ' ') n--;
        if (n && !listed(list, h, n, 1)) return 0;
        h += strcspn(h, ",");
    }
    return 1;
}

/* A list flag joined by ", " (into out[cap]); "*" becomes all (methods) or the request's. */
static void joined(const char *list, const char *all, char *out, size_t cap) {
    out[0] = 0;
    if (any(list)) {
        snprintf(out, cap, "%s", all ? all : "");
        return;
    }
    json_t *a = json_loads(list, 0, NULL);
    size_t i, n = 0;
    json_t *v;
    json_array_foreach(a, i, v) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? ", " : "", json_string_value(v));
    json_decref(a);
}

int xi_cors_preflight(xi_server *s, struct MHD_Connection *c, const char *method, enum MHD_Result *ret) {
    const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method");
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (strcmp(method, "OPTIONS") || !want) return 0;
    const xi_server_config *cfg = &s->cfg;
    const char *hdrs = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    const char *why = !origin || !listed(cfg->allowed_origins, origin, strlen(origin), 0) ? "origin"
                      : !listed(cfg->allowed_methods, want, strlen(want), 0)             ? "method"
                      : !all_listed(cfg->allowed_headers, hdrs)                          ? "headers"
                                                                                         : NULL;
    char body[64];
    snprintf(body, sizeof body, why ? "Disallowed CORS %s" : "OK", why);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    if (!r) return *ret = MHD_NO, 1;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    char v[1024];
    joined(cfg->allowed_methods, "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT", v, sizeof v);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", v);
    if (any(cfg->allowed_headers)) snprintf(v, sizeof v, "%s", hdrs ? hdrs : "");
    else joined(cfg->allowed_headers, NULL, v, sizeof v);
    if (v[0]) MHD_add_response_header(r, "Access-Control-Allow-Headers", v);
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    if (!why) xi_http_decorate(r);
    else if (cfg->allow_credentials) MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
    *ret = MHD_queue_response(c, why ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return 1;
}
