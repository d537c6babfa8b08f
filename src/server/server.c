/* server: libmicrohttpd daemon, routing, auth and the small endpoints. Connections are served
 * by a few epoll threads (conn_guard.c bounds what each may cost); a handler never waits for
 * the engine: a request whose answer is not ready suspends its connection, and the engine's
 * output callback resumes it (see completion_job.h). */
#include "server/server_internal.h"
#include "base/base.h"
#include "server/cors.h"
#include "server/embeddings.h"
#include "server/fingerprint.h"
#include "server/tokenizer_info.h"
#include "server/webui.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>


enum {
    XI_HTTP_THREADS = 8,             /* epoll threads serving all connections: a handler busy with a
                                        big template holds up only the sockets of its thread */
    XI_SEND_TIMEOUT_S = 60,          /* a client that reads nothing of its answer for this long */
};

/* ---- helpers shared with completion*.c -------------------------------------------------- */

void xi_srv_log(const char *fmt, ...) {
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "INFO %02d-%02d %02d:%02d:%02d serve] ", tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line); /* one call, so concurrent lines do not interleave */
}

void xi_srv_new_id(xi_server *s, const char *prefix, char out[40]) {
    pthread_mutex_lock(&s->mu);
    uint64_t a = s->rng, b;
    a ^= a << 13, a ^= a >> 7, a ^= a << 17;
    b = a;
    b ^= b << 13, b ^= b >> 7, b ^= b << 17;
    s->rng = b;
    pthread_mutex_unlock(&s->mu);
    snprintf(out, 40, "%s-%016llx%08llx", prefix, (unsigned long long)a,
             (unsigned long long)(b >> 32));
}

json_t *xi_srv_json_text(const char *s, size_t n) {
    json_t *v = json_stringn(s ? s : "", s ? n : 0);
    if (v) return v;
    size_t len;
    char *clean = xi_srv_utf8_clean(s, n, &len);
    v = clean ? json_stringn(clean, len) : NULL;
    free(clean);
    return v;
}

/* A 503 or 429 says Retry-After: every one of them here is a budget or queue that is full
 * now (parse bytes, template memory, waiting queue, connections) and may well have room a
 * moment later. */
enum MHD_Result xi_srv_respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                               char *body) {
    if (!body) {
        body = strdup("{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\", \"param\": null, \"code\": null}}");
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        ctype = "application/json";
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (ctype) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 503 || status == 429) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    xi_http_decorate(r);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result xi_srv_respond_error(struct MHD_Connection *c, const xi_oai_error *e) {
    return xi_srv_respond(c, (unsigned)e->status, "application/json", xi_oai_error_json(e));
}

static enum MHD_Result respond_json(struct MHD_Connection *c, json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return xi_srv_respond(c, MHD_HTTP_OK, "application/json", s);
}

int xi_srv_peer_closed(struct MHD_Connection *c, int eof_gone, int *probed) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    if (MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION)) {
        /* TLS: a client leaving sends a close_notify alert (bytes that stay unread while the
         * answer is pending) and then FIN. Plain bytes cannot probe a TLS stream, and HTTP
         * clients do not half-close TLS, so FIN after the request is the client gone. */
        if (n > 0) {
            struct tcp_info ti;
            socklen_t tl = sizeof ti;
            if (getsockopt(ci->connect_fd, IPPROTO_TCP, TCP_INFO, &ti, &tl)) return 0; /* a Unix socket */
            n = ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_CLOSE ? 0 : 1;
        }
        return !n && eof_gone;
    }
    if (n > 0) return 0;
    if (!probed) return eof_gone;
    /* EOF after a complete request: a client that only half-closed still reads its answer,
     * one that is gone answers the next bytes with a reset. An interim 100 Continue (which
     * HTTP/1.1 clients must skip) is those bytes, sent once, before any response bytes. */
    if (*probed) {
        /* the reset moved the socket to CLOSE; recv keeps reporting the EOF */
        struct tcp_info ti;
        socklen_t tl = sizeof ti;
        return !getsockopt(ci->connect_fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) && ti.tcpi_state == TCP_CLOSE;
    }
    *probed = 1;
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    return send(ci->connect_fd, probe, sizeof probe - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
           errno != EAGAIN && errno != EWOULDBLOCK;
}

/* ---- small endpoints ---------------------------------------------------------------------- */

static int model_known(xi_server *s, const char *name) {
    if (!name) return 1;
    for (int i = 0; i < s->cfg.n_served_names; i++)
        if (!strcmp(name, s->cfg.served_names[i])) return 1;
    return 0;
}

static enum MHD_Result unknown_model(struct MHD_Connection *c, const char *name) {
    xi_oai_error e;
    xi_oai_fail(&e, 404, "model", "The model `%s` does not exist.", name);
    return xi_srv_respond_error(c, &e);
}

static json_t *model_card(xi_server *s, int i) {
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:n, s:i, s:[]}", "id", s->cfg.served_names[i], "object",
                     "model", "created", (json_int_t)s->created, "owned_by", "xinfer", "root",
                     s->cfg.model_path, "parent", "max_model_len", s->info.max_model_len, "permission");
}

static enum MHD_Result route_models(xi_server *s, struct MHD_Connection *c) {
    json_t *data = json_array();
    for (int i = 0; i < s->cfg.n_served_names; i++) json_array_append_new(data, model_card(s, i));
    return respond_json(c, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* GET /v1/models/{id}: one served name's card (ids may hold '/': the rest of the path) */
static enum MHD_Result route_model(xi_server *s, struct MHD_Connection *c, const char *id) {
    for (int i = 0; i < s->cfg.n_served_names; i++)
        if (!strcmp(id, s->cfg.served_names[i])) return respond_json(c, model_card(s, i));
    return unknown_model(c, id);
}

/* A JSON body's Content-Type (parameters after ';' aside), which vLLM requires of them. */
static int json_content_type(struct MHD_Connection *c) {
    const char *t = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const size_t n = t ? strcspn(t, "; \t") : 0;
    return n == 16 && !strncasecmp(t, "application/json", 16);
}

/* A route's path; one ending in '*' takes any non-empty rest. */
static int path_matches(const char *pattern, const char *url) {
    const size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*') return !strncmp(pattern, url, n - 1) && url[n - 1];
    return !strcmp(pattern, url);
}

static enum MHD_Result route_tokenize(xi_server *s, xi_engine *eng, struct MHD_Connection *c,
                                      const char *body, size_t len) {
    xi_oai_tokenize t;
    xi_oai_error e;
    char err[512] = "";
    if (xi_oai_parse_tokenize(&t, body, len, &e)) {
        xi_oai_tokenize_free(&t);
        return xi_srv_respond_error(c, &e);
    }
    if (!model_known(s, t.model)) {
        enum MHD_Result r = unknown_model(c, t.model);
        xi_oai_tokenize_free(&t);
        return r;
    }
    char *text = t.prompt;
    char *rendered = NULL;
    const int strs = t.return_token_strs;
    if (t.messages_json) {
        rendered = xi_engine_apply_chat_template(eng, t.messages_json, t.tools_json, t.kwargs_json,
                                                 t.add_generation_prompt,
                                                 t.continue_final_message, err, sizeof err);
        if (!rendered) {
            xi_oai_fail(&e, strstr(err, "retry later") ? 503 : 400, "messages", "%s", err);
            xi_oai_tokenize_free(&t);
            return xi_srv_respond_error(c, &e);
        }
        text = rendered;
    }
    int32_t *ids = NULL;
    const int max_len = s->info.max_model_len > 0 ? s->info.max_model_len : INT_MAX - 1;
    int n = xi_engine_tokenize_limit(eng, text, t.add_special_tokens, max_len, &ids, err, sizeof err);
    free(rendered);
    xi_oai_tokenize_free(&t);
    if (n > max_len) {
        free(ids);
        xi_oai_fail(&e, 400, "prompt", "the text has more than max_model_len (%d) tokens", max_len);
        return xi_srv_respond_error(c, &e);
    }
    if (n < 0) {
        xi_oai_fail(&e, 400, "prompt", "%s", err);
        return xi_srv_respond_error(c, &e);
    }
    json_t *tokens = json_array(), *token_strs = strs ? json_array() : json_null();
    for (int i = 0; i < n; i++) {
        json_array_append_new(tokens, json_integer(ids[i]));
        const char *ts = strs ? xi_engine_token_str(eng, ids[i]) : NULL;
        if (strs) json_array_append_new(token_strs, ts ? xi_srv_json_text(ts, strlen(ts)) : json_null());
    }
    free(ids);
    return respond_json(c, json_pack("{s:i, s:i, s:o, s:o}", "count", n, "max_model_len",
                                     s->info.max_model_len, "tokens", tokens, "token_strs", token_strs));
}

static enum MHD_Result route_detokenize(xi_server *s, xi_engine *eng, struct MHD_Connection *c,
                                        const char *body, size_t len) {
    xi_oai_error e;
    int32_t *ids;
    char *model, err[512] = "";
    int n = xi_oai_parse_detokenize(body, len, &ids, &model, &e);
    if (n >= 0 && !model_known(s, model)) {
        enum MHD_Result r = unknown_model(c, model);
        free(ids);
        free(model);
        return r;
    }
    free(model);
    if (n < 0) return xi_srv_respond_error(c, &e);
    char *text = xi_engine_detokenize(eng, ids, n, 0, err, sizeof err);
    free(ids);
    if (!text) {
        xi_oai_fail(&e, 400, "tokens", "%s", err);
        return xi_srv_respond_error(c, &e);
    }
    json_t *o = json_pack("{s:s}", "prompt", text);
    free(text);
    return respond_json(c, o);
}

static enum MHD_Result route_metrics(xi_server *s, xi_engine *eng, struct MHD_Connection *c) {
    xi_engine_stats st;
    xi_engine_get_stats(eng, &st);
    return xi_srv_respond(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                          xi_metrics_render(s->metrics, &st));
}

/* ---- routing ------------------------------------------------------------------------------ */

typedef enum { R_NONE, R_CHAT, R_COMPLETIONS, R_MODELS, R_HEALTH, R_VERSION, R_TOKENIZE,
               R_DETOKENIZE, R_METRICS, R_EMBEDDINGS, R_RESPONSES, R_MODEL, R_INVOCATIONS, R_LOAD,
               R_TOKENIZER_INFO } route_id;

static const struct {
    const char *path, *method;
    route_id id;
    int auth;                        /* needs the API key when one is set (vLLM's rule) */
} routes[] = {
    {"/v1/chat/completions", "POST", R_CHAT, 1},
    {"/v1/completions", "POST", R_COMPLETIONS, 1},
    {"/v1/responses", "POST", R_RESPONSES, 1},
    {"/v1/models", "GET", R_MODELS, 1},
    {"/v1/models/*", "GET", R_MODEL, 1},
    {"/ping", "GET", R_HEALTH, 0},                /* SageMaker's routes, as vLLM serves them */
    {"/ping", "POST", R_HEALTH, 0},
    {"/invocations", "POST", R_INVOCATIONS, 0},
    {"/v1/embeddings", "POST", R_EMBEDDINGS, 1},
    {"/tokenize", "POST", R_TOKENIZE, 1},
    {"/detokenize", "POST", R_DETOKENIZE, 1},
    {"/health", "GET", R_HEALTH, 0},
    {"/version", "GET", R_VERSION, 0},
    {"/metrics", "GET", R_METRICS, 0},
    {"/load", "GET", R_LOAD, 0},
    {"/tokenizer_info", "GET", R_TOKENIZER_INFO, 0},
};

/* Per-connection-request state (MHD's con_cls). */
typedef struct conn_state {
    route_id route;
    xi_buf body;                     /* the bytes so far + NUL, owned */
    int too_big;                     /* body exceeded max_body_bytes: drained, then 413 */
    int answered;                    /* a response was queued before the body was read */
    int over;                        /* the connection came in past --limit-concurrency */
    int http11;                      /* the request says HTTP/1.1 */
    int busy;                        /* the parse budget could not take the body: drained, then 503 */
    int64_t charged;                 /* bytes charged to the parse budget, returned when parsed */
    xi_job *job;                     /* job answering this request, released when it completes */
    emb_job *emb;                    /* the same for /v1/embeddings */
} conn_state;

static void drop_body(conn_state *st) {
    xi_buf_free(&st->body);
}

static int append_body(xi_server *s, conn_state *st, const char *data, size_t n) {
    if (st->too_big || st->busy) return 0;
    if ((int64_t)(st->body.len + n) > s->cfg.max_body_bytes) {
        st->too_big = 1;
        drop_body(st);
        return 0;
    }
    const int64_t more = (int64_t)(st->body.len + n) - st->charged; /* chunked, or past the length */
    if (more > 0) {
        if (xi_srv_charge(s, more)) {
            st->busy = 1;
            drop_body(st);
            return 0;
        }
        st->charged += more;
    }
    return xi_buf_append(&st->body, data, n);
}

static enum MHD_Result fail_status(struct MHD_Connection *c, int status, const char *param,
                                   const char *msg) {
    xi_oai_error e;
    xi_oai_fail(&e, status, param, "%s", msg);
    return xi_srv_respond_error(c, &e);
}

/* 503 or 429 (with Retry-After, as every one). */
enum MHD_Result xi_srv_respond_busy(struct MHD_Connection *c, unsigned status, const char *msg) {
    xi_oai_error e;
    xi_oai_fail(&e, (int)status, NULL, "%s", msg);
    return xi_srv_respond_error(c, &e);
}

typedef struct framing {
    int content_length, chunked;     /* Content-Length headers seen; Transfer-Encoding: chunked */
    int other_coding;                /* a Transfer-Encoding other than chunked */
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) f->content_length++;
    else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        if (value && !strcasecmp(value, "chunked")) f->chunked++;
        else f->other_coding = 1;
    }
    return MHD_YES;
}

/* Request smuggling: a body's length must be stated once, one way (RFC 9112 6.1/6.3). */
static const char *framing_error(struct MHD_Connection *c) {
    framing f = {0, 0, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    if (f.content_length > 1) return "more than one Content-Length header";
    if (f.content_length && (f.chunked || f.other_coding)) return "both Content-Length and Transfer-Encoding";
    if (f.other_coding || f.chunked > 1) return "unsupported Transfer-Encoding (only one 'chunked')";
    return NULL;
}

static int auth_ok(xi_server *s, struct MHD_Connection *c) {
    if (!s->cfg.n_api_keys) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    return xi_oai_auth_ok(h, s->cfg.api_keys, s->cfg.n_api_keys);
}

/* Checks that need only the request line and headers: route, method, auth, readiness, size. */
static int precheck(xi_server *s, struct MHD_Connection *c, const char *url, const char *method,
                    conn_state *st, enum MHD_Result *ret) {
    const char *bad = framing_error(c);
    if (bad) {
        *ret = fail_status(c, MHD_HTTP_BAD_REQUEST, NULL, bad);
        return 1;
    }
    if (xi_cors_preflight(s, c, method, ret)) return 1; /* before auth, as vLLM's middleware */
    /* vLLM checks the key on every /v1 path before routing: no 404/405 without it */
    const int v1 = !strncmp(url, "/v1/", 4) || !strcmp(url, "/v1");
    if (v1 && !auth_ok(s, c)) {
        *ret = fail_status(c, MHD_HTTP_UNAUTHORIZED, NULL, "Incorrect or missing API key (send `Authorization: Bearer KEY`)");
        return 1;
    }
    size_t i;
    int path_seen = 0;
    if (!s->cfg.no_webui && xi_webui_serve(s, c, url, method, ret)) return 1; /* no key needed */
    for (i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!path_matches(routes[i].path, url)) continue;
        path_seen = 1;
        if (!strcmp(method, routes[i].method) || (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")))
            break;
    }
    if (i == sizeof routes / sizeof routes[0]) {
        char msg[300];
        snprintf(msg, sizeof msg, path_seen ? "Method %.16s not allowed on %.200s" : "Not found: %.200s",
                 path_seen ? method : url, url);
        *ret = fail_status(c, path_seen ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND, NULL, msg);
        return 1;
    }
    st->route = routes[i].id;
    if (routes[i].auth && !auth_ok(s, c)) {
        *ret = fail_status(c, MHD_HTTP_UNAUTHORIZED, NULL, "Incorrect or missing API key (send `Authorization: Bearer KEY`)");
        return 1;
    }
    if (st->over && routes[i].auth) {
        *ret = xi_srv_respond_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                                   "the server is at its connection limit (--limit-concurrency); retry later");
        return 1;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const long long clen = cl ? strtoll(cl, NULL, 10) : 0;
    if (clen > s->cfg.max_body_bytes && clen / 16 <= s->cfg.max_body_bytes) {
        /* Moderately over: read and discard the body, then answer 413. Answering before the
         * body is read makes the server close a socket the client is still writing to, and
         * many clients then report a reset instead of the 413. */
        st->too_big = 1;
        return 0;
    }
    if (clen > s->cfg.max_body_bytes) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body of %s bytes is over the limit of %lld bytes", cl,
                 (long long)s->cfg.max_body_bytes);
        *ret = fail_status(c, MHD_HTTP_CONTENT_TOO_LARGE, NULL, msg);
        return 1;
    }
    if (!st->too_big && clen > 0) {
        if (xi_srv_charge(s, clen)) st->busy = 1; /* drained, then 503 */
        else st->charged = clen;
    }
    return 0;
}

static const char busy_msg[] = "the server is parsing too many request bytes at once "
                               "(--max-parse-bytes-in-flight); retry later";

/* The body's JSON, weighed before it is parsed: too deep is a 400, more than the whole budget
 * a 413, more than what is left of it now a 503. Returns 1 with *ret set when refused. */
static int weigh_body(xi_server *s, struct MHD_Connection *c, conn_state *st, enum MHD_Result *ret) {
    int64_t elements;
    char msg[200];
    if (xi_srv_json_shape(st->body.data ? st->body.data : "", st->body.len, &elements) > XI_JSON_MAX_DEPTH) {
        snprintf(msg, sizeof msg, "the JSON body is nested deeper than %d levels", XI_JSON_MAX_DEPTH);
        *ret = fail_status(c, MHD_HTTP_BAD_REQUEST, NULL, msg);
        return 1;
    }
    const int64_t extra = elements * XI_JSON_ELEMENT_COST;
    if (st->charged + extra > s->cfg.max_parse_bytes) {
        snprintf(msg, sizeof msg, "the JSON body has %lld elements, more than the server parses at once "
                 "(--max-parse-bytes-in-flight %lld)", (long long)elements, (long long)s->cfg.max_parse_bytes);
        *ret = fail_status(c, MHD_HTTP_CONTENT_TOO_LARGE, NULL, msg);
        return 1;
    }
    if (xi_srv_charge(s, extra)) {
        *ret = xi_srv_respond_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE, busy_msg);
        return 1;
    }
    st->charged += extra;
    return 0;
}

static enum MHD_Result dispatch(xi_server *s, struct MHD_Connection *c, conn_state *st, const char *url) {
    if (st->route == R_VERSION) {
        const xi_build_info *b = xi_build_info_get();
        return respond_json(c, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "version", b->version,
                                         "commit", b->commit, "build_date", b->date, "compiler",
                                         b->compiler, "kernels", b->kernels, "linkage", b->linkage));
    }
    if (st->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is over the limit of %lld bytes", (long long)s->cfg.max_body_bytes);
        return fail_status(c, MHD_HTTP_CONTENT_TOO_LARGE, NULL, msg);
    }
    if (st->busy) return xi_srv_respond_busy(c, MHD_HTTP_SERVICE_UNAVAILABLE, busy_msg);
    xi_engine *eng = atomic_load(&s->engine);
    if (st->route == R_HEALTH)
        return xi_srv_respond(c, eng && !atomic_load(&s->stopping) ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                              NULL, strdup(""));
    if (!eng) return fail_status(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, "the model is still loading");
    const char *body = st->body.data ? st->body.data : "";
    if (st->route == R_INVOCATIONS) { /* the request's own fields say which API it is for */
        const int api = xi_oai_invocation_api(body, st->body.len, s->cfg.pooling);
        if (api < 0)
            return fail_status(c, MHD_HTTP_BAD_REQUEST, NULL, s->cfg.pooling
                               ? "/invocations takes an embeddings request here (with \"input\")"
                               : "/invocations takes a chat (\"messages\") or completions (\"prompt\") request");
        st->route = api == XI_OAI_API_CHAT ? R_CHAT : api == XI_OAI_API_COMPLETIONS ? R_COMPLETIONS : R_EMBEDDINGS;
    }
    const int work = st->route == R_CHAT || st->route == R_COMPLETIONS || st->route == R_EMBEDDINGS ||
                     st->route == R_RESPONSES;
    if (atomic_load(&s->stopping) && work)
        return fail_status(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, "the server is shutting down");
    if (s->cfg.pooling && (st->route == R_CHAT || st->route == R_COMPLETIONS || st->route == R_RESPONSES))
        return fail_status(c, MHD_HTTP_BAD_REQUEST, NULL, st->route == R_CHAT
                           ? "The model does not support Chat Completions API (it is served with --runner pooling: use /v1/embeddings)"
                           : "The model does not support Completions API (it is served with --runner pooling: use /v1/embeddings)");
    const int bodyless = st->route == R_MODELS || st->route == R_MODEL || st->route == R_METRICS ||
                         st->route == R_LOAD || st->route == R_TOKENIZER_INFO;
    if (!bodyless && !json_content_type(c))
        return fail_status(c, MHD_HTTP_BAD_REQUEST, NULL, "Unsupported Media Type: Only 'application/json' is allowed");
    enum MHD_Result ret;
    if (!bodyless && weigh_body(s, c, st, &ret)) return ret;
    switch (st->route) {
    case R_CHAT: return xi_job_handle(s, c, XI_API_CHAT, st->http11, body, st->body.len, &st->job);
    case R_COMPLETIONS: return xi_job_handle(s, c, XI_API_COMPLETIONS, st->http11, body, st->body.len, &st->job);
    case R_RESPONSES: return xi_job_handle(s, c, XI_API_RESPONSES, st->http11, body, st->body.len, &st->job);
    case R_MODELS: return route_models(s, c);
    case R_MODEL: return route_model(s, c, url + strlen("/v1/models/"));
    case R_TOKENIZE: return route_tokenize(s, eng, c, body, st->body.len);
    case R_DETOKENIZE: return route_detokenize(s, eng, c, body, st->body.len);
    case R_METRICS: return route_metrics(s, eng, c);
    case R_TOKENIZER_INFO: return xi_tokenizer_info_handle(s, c);
    case R_LOAD: /* vLLM's --enable-server-load-tracking: requests being answered */
        return respond_json(c, json_pack("{s:i}", "server_load", s->cfg.server_load_tracking ? xi_server_in_flight(s) : 0));
    case R_EMBEDDINGS: return xi_embeddings_handle(s, c, st->http11, body, st->body.len, &st->emb);
    default: return MHD_NO;
    }
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line has arrived, the request's deadline starts. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)uri;
    xi_guard_phase(cls, c, XI_CONN_READING);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    xi_server *s = cls;
    conn_state *st = *con_cls;
    xi_http_enter(s, c);
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return MHD_NO;
        *con_cls = st;
        st->over = xi_guard_phase(s, c, XI_CONN_READING);
        st->http11 = !strcmp(version, MHD_HTTP_VERSION_1_1);
        enum MHD_Result ret;
        if (precheck(s, c, url, method, st, &ret)) {
            st->answered = 1;
            return ret;
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!st->answered && append_body(s, st, upload_data, *upload_data_size)) return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (st->job) return xi_job_resume(st->job); /* a suspended answer was resumed */
    if (st->emb) return xi_embeddings_resume(st->emb);
    if (st->answered) return MHD_YES;
    st->answered = 1;
    xi_guard_phase(s, c, XI_CONN_BUSY);
    enum MHD_Result ret = dispatch(s, c, st, url);
    /* parsed, templated and tokenized by now: what the request keeps is its own */
    xi_srv_uncharge(s, st->charged);
    st->charged = 0;
    drop_body(st);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    conn_state *st = *con_cls;
    if (!st) return;
    xi_guard_phase(cls, c, XI_CONN_IDLE); /* keep-alive: the next request's clock starts */
    xi_srv_uncharge(cls, st->charged);
    if (st->job) xi_job_connection_done(st->job, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (st->emb) xi_embeddings_connection_done(st->emb, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    xi_buf_free(&st->body);
    free(st);
    *con_cls = NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: the guard counts the socket; with TLS, the session (set up,
 * not yet shaken hands) learns whether to ask for a client certificate. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    xi_server *s = cls;
    xi_guard_notify(cls, c, socket_context, code);
    if (code != MHD_CONNECTION_NOTIFY_STARTED || !s->tls.cert_pem) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (ci) xi_tls_session_start(&s->tls, ci->tls_session);
}

/* ---- life cycle --------------------------------------------------------------------------- */

int xi_server_listen(const char *host, int port, const char *uds, int *bound_port, char *err,
                     size_t errlen) {
    int fd = -1;
    if (uds) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (strlen(uds) >= sizeof a.sun_path) {
            snprintf(err, errlen, "--uds %s: path too long", uds);
            return -1;
        }
        strcpy(a.sun_path, uds);
        struct stat sb;
        if (!stat(uds, &sb) && S_ISSOCK(sb.st_mode)) unlink(uds); /* a stale socket of ours */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1024)) {
            snprintf(err, errlen, "--uds %s: %s", uds, strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        if (bound_port) *bound_port = 0;
        return fd;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc) {
        snprintf(err, errlen, "--host %s: %s", host, gai_strerror(rc));
        return -1;
    }
    int saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, 1024)) break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", host, port, strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (bound_port && !getsockname(fd, (struct sockaddr *)&ss, &sl))
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                    : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

xi_server *xi_server_start(const xi_server_config *cfg, int listen_fd, char *err, size_t errlen) {
    xi_server *s = calloc(1, sizeof *s);
    if (!s) {
        close(listen_fd);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->listen_fd = listen_fd;
    s->created = (long)time(NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ 0x9e3779b97f4a7c15ULL;
    pthread_mutex_init(&s->mu, NULL);
    if (s->cfg.limit_concurrency <= 0) s->cfg.limit_concurrency = xi_guard_default_limit();
    if (s->cfg.timeout_keep_alive <= 0) s->cfg.timeout_keep_alive = 5;
    if (s->cfg.timeout_request_read <= 0) s->cfg.timeout_request_read = 30;
    if (s->cfg.max_seqs_per_request <= 0) s->cfg.max_seqs_per_request = 1024;
    if (s->cfg.max_parse_bytes <= 0) s->cfg.max_parse_bytes = 1LL << 30;
    const xi_server_config *c = &s->cfg;
    if ((c->ssl_certfile || c->ssl_keyfile || c->ssl_ca_certs || c->ssl_cert_reqs) &&
        xi_tls_load(&s->tls, c->ssl_keyfile, c->ssl_certfile, c->ssl_ca_certs, c->ssl_cert_reqs, err, errlen)) {
        close(listen_fd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    if (xi_guard_start(s)) {
        snprintf(err, errlen, "cannot start the HTTP server's watchdog thread");
        xi_tls_free(&s->tls);
        close(listen_fd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    /* A few epoll threads serve every socket; handlers only parse, template and tokenize
     * (bounded by the body limit and max_model_len) and never wait for the engine. The
     * inactivity timeout only matters while answering (a client that stops reading): the
     * watchdog enforces the tighter deadlines before that. */
    const unsigned limit = (unsigned)(s->cfg.limit_concurrency + xi_guard_reserve(s->cfg.limit_concurrency));
    struct MHD_OptionItem tls[4] = {{MHD_OPTION_END, 0, NULL}};
    if (s->tls.cert_pem) {
        int n = 0;
        tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls.key_pem};
        tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls.cert_pem};
        /* the CAs only with client certificates asked for: libmicrohttpd asks once it has them */
        if (s->tls.cert_reqs != XI_TLS_CERT_NONE)
            tls[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->tls.ca_pem};
        tls[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    s->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
            (s->tls.cert_pem ? MHD_USE_TLS : 0),
        0, NULL, NULL,
        on_request, s, MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)XI_HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)XI_SEND_TIMEOUT_S,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "cannot start the HTTP server%s", s->tls.cert_pem ? " with TLS" : "");
        xi_guard_stop(s);
        xi_tls_free(&s->tls);
        close(listen_fd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

int xi_server_set_engine(xi_server *s, xi_engine *e, char *err, size_t errlen) {
    xi_engine_get_info(e, &s->info);
    s->metrics = xi_metrics_new(s->cfg.served_names[0], s->info.max_model_len);
    if (!s->metrics) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    xi_metrics_configure(s->metrics, &s->info, s->cfg.show_hidden_metrics);
    xi_fingerprint_build(s->cfg.fingerprint_mode, s->cfg.fingerprint_value, s->cfg.model_path, &s->info,
                         s->fingerprint, sizeof s->fingerprint);
    atomic_store(&s->engine, e);
    return 0;
}

void xi_server_quiesce(xi_server *s) {
    /* the socket stays open: load balancers read the drain from /health's 503 */
    atomic_store(&s->stopping, 1);
}

int xi_server_in_flight(xi_server *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_jobs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void xi_server_stop(xi_server *s) {
    if (!s || !s->daemon) return;
    atomic_store(&s->stopping, 1);
    atomic_store(&s->closing, 1);
    xi_job_watch(s); /* resumes every suspended connection: MHD must find none */
    MHD_stop_daemon(s->daemon); /* closes the listening socket */
    s->daemon = NULL;
    s->listen_fd = -1;
    xi_guard_stop(s);
}

void xi_server_free(xi_server *s) {
    if (!s) return;
    xi_server_stop(s);
    xi_metrics_free(s->metrics);
    xi_tls_free(&s->tls);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
