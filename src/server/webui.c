/* server/webui: static files of the web UI with their content type, an ETag that revalidates
 * to 304, gzip when the client takes it, and headers that keep the pages to their own origin;
 * plus /webui/status, the dashboard's one-request view of the engine. */
#include "server/server_internal.h"
#include "server/webui.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Model output is rendered as HTML by the chat page; this policy makes sure nothing it
 * renders can load or run anything from elsewhere, whatever the renderer lets through. */
static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const xi_webui_asset *xi_webui_find(const char *url) {
    const char *name = NULL;
    if (!strcmp(url, "/")) name = "chat.html";
    else if (!strcmp(url, "/dashboard")) name = "dashboard.html";
    else if (!strncmp(url, "/webui/", 7)) name = url + 7;
    if (!name || !*name) return NULL;
    for (int i = 0; i < xi_webui_n_assets; i++)
        if (!strcmp(name, xi_webui_assets[i].name)) return &xi_webui_assets[i];
    return NULL;
}

/* q=0 (or 0.0, 0.000) refuses a coding (RFC 9110 12.5.3); any other weight accepts it. */
static int q_is_zero(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ';')) p++;
    if (end - p < 2 || strncasecmp(p, "q=", 2)) return 0;
    p += 2;
    if (p >= end || *p != '0') return 0;
    for (p++; p < end && (*p == '.' || *p == '0'); p++) {}
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    return p == end;
}

int xi_webui_accepts_gzip(const char *ae) {
    if (!ae) return 0;
    for (const char *p = ae; *p;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        size_t n = 0;
        while (p + n < end && p[n] != ';' && p[n] != ' ' && p[n] != '\t') n++;
        if (((n == 4 && !strncasecmp(p, "gzip", 4)) || (n == 1 && *p == '*')) &&
            !q_is_zero(p + n, end))
            return 1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    if (!r) return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static void common_headers(struct MHD_Response *r) {
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
}

static enum MHD_Result serve_asset(struct MHD_Connection *c, const xi_webui_asset *a) {
    /* "no-cache": the browser keeps the file but asks each time, so a new binary's pages
     * show up at once and an unchanged page costs a 304. */
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (inm && (strstr(inm, a->etag) || !strcmp(inm, "*"))) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (r) {
            MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a->etag);
            MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
            MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
        }
        return queue(c, MHD_HTTP_NOT_MODIFIED, r);
    }
    const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    int gz = xi_webui_accepts_gzip(ae) && a->gz_len < a->raw_len;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        gz ? a->gz_len : a->raw_len, (void *)(gz ? a->gz : a->raw), MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a->etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    if (gz) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    if (strstr(a->content_type, "text/html")) {
        MHD_add_response_header(r, "Content-Security-Policy", csp);
        MHD_add_response_header(r, "X-Frame-Options", "DENY");
    }
    common_headers(r);
    return queue(c, MHD_HTTP_OK, r);
}

/* What the dashboard shows: how the engine was set up, and its gauges and counters now.
 * Served without the API key, like /metrics, so it holds nothing more secret than that:
 * no model path, no key, no request content. */
static json_t *status_json(xi_server *s) {
    xi_engine *eng = atomic_load(&s->engine);
    json_t *o = json_pack("{s:s, s:s, s:b, s:I, s:s?, s:s?}", "version", XINFER_VERSION, "model",
                          s->cfg.served_names[0], "api_key_required", s->cfg.n_api_keys > 0,
                          "uptime_s", (json_int_t)(time(NULL) - s->created), "reasoning_parser",
                          s->cfg.reasoning_parser, "tool_parser", s->cfg.tool_parser);
    if (!o) return NULL;
    json_object_set_new(o, "loading", json_boolean(!eng));
    if (!eng) return o;
    const xi_engine_info *i = &s->info;
    xi_engine_stats st;
    xi_engine_get_stats(eng, &st);
    json_object_set_new(o, "engine", json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:i, s:i, s:b, s:b, s:f}",
        "architecture", i->architecture, "dtype", i->dtype, "kv_cache_dtype", i->kv_cache_dtype,
        "quantization", i->quantization, "kernels", i->kernels, "threads", i->n_threads,
        "max_model_len", i->max_model_len, "block_size", i->block_size, "num_kv_blocks",
        i->num_kv_blocks, "kv_cache_bytes", (json_int_t)i->kv_cache_bytes, "weight_bytes",
        (json_int_t)i->weight_bytes, "n_params", (json_int_t)i->n_params, "max_num_seqs",
        i->max_num_seqs, "max_num_batched_tokens", i->max_num_batched_tokens, "prefix_caching",
        i->enable_prefix_caching, "chunked_prefill", i->enable_chunked_prefill,
        "max_concurrency", i->max_concurrency));
    json_object_set_new(o, "stats", json_pack(
        "{s:i, s:i, s:f, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:i}", "running", st.num_running,
        "waiting", st.num_waiting, "kv_cache_usage", st.kv_cache_usage, "kv_blocks_used",
        (int)(st.kv_cache_usage * i->num_kv_blocks + 0.5), "prefix_cache_queries",
        (json_int_t)st.prefix_cache_queries, "prefix_cache_hits",
        (json_int_t)st.prefix_cache_hits, "preemptions", (json_int_t)st.num_preemptions,
        "prompt_tokens", (json_int_t)st.prompt_tokens_total, "generation_tokens",
        (json_int_t)st.generation_tokens_total, "steps", (json_int_t)st.steps, "in_flight",
        xi_server_in_flight(s)));
    return o;
}

static enum MHD_Result serve_status(xi_server *s, struct MHD_Connection *c) {
    json_t *o = status_json(s);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body) return xi_srv_respond(c, MHD_HTTP_OK, NULL, NULL); /* the out-of-memory 500 */
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    common_headers(r);
    return queue(c, MHD_HTTP_OK, r);
}

int xi_webui_serve(xi_server *s, struct MHD_Connection *c, const char *url, const char *method,
                   enum MHD_Result *ret) {
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return 0;
    if (!strcmp(url, "/webui/status")) {
        *ret = serve_status(s, c);
        return 1;
    }
    const xi_webui_asset *a = xi_webui_find(url);
    if (!a) return 0;
    *ret = serve_asset(c, a);
    return 1;
}
