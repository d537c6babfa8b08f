/* server: libmicrohttpd daemon, routing, auth and the small endpoints. One thread per
 * connection, so a handler may wait for the engine without holding up other clients; the
 * engine itself never waits for a connection (see completion.c). */
#include "server/server_internal.h"
#include "server/cors.h"
#include "server/embeddings.h"
#include "server/fingerprint.h"
#include "server/tokenizer_info.h"
#include "server/webui.h"

#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>


/* ---- helpers shared with completion.c ----------------------------------------------------- */

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

int xi_srv_append(char **data, size_t *len, size_t *cap, const void *src, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *b = realloc(*data, c);
        if (!b) return -1;
        *data = b;
        *cap = c;
    }
    memcpy(*data + *len, src, n);
    *len += n;
    (*data)[*len] = 0;
    return 0;
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

int xi_srv_peer_closed(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
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
        rendered = xi_engine_apply_chat_template(eng, t.messages_json, t.tools_json,
                                                 t.add_generation_prompt,
                                                 t.continue_final_message, err, sizeof err);
        if (!rendered) {
            xi_oai_fail(&e, 400, "messages", "%s", err);
            xi_oai_tokenize_free(&t);
            return xi_srv_respond_error(c, &e);
        }
        text = rendered;
    }
    int32_t *ids = NULL;
    int n = xi_engine_tokenize(eng, text, t.add_special_tokens, &ids, err, sizeof err);
    free(rendered);
    xi_oai_tokenize_free(&t);
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
    char *body;                      /* [len] bytes + NUL, owned */
    size_t len, cap;
    int too_big;                     /* body exceeded max_body_bytes: drained, then 413 */
    int answered;                    /* a response was queued before the body was read */
    xi_job *job;                     /* streaming job, released when the request completes */
} conn_state;

static int append_body(conn_state *st, const char *data, size_t n, int64_t limit) {
    if (st->too_big) return 0;
    if ((int64_t)(st->len + n) > limit) {
        st->too_big = 1;
        free(st->body);
        st->body = NULL;
        st->len = st->cap = 0;
        return 0;
    }
    return xi_srv_append(&st->body, &st->len, &st->cap, data, n);
}

static enum MHD_Result fail_status(struct MHD_Connection *c, int status, const char *param,
                                   const char *msg) {
    xi_oai_error e;
    xi_oai_fail(&e, status, param, "%s", msg);
    return xi_srv_respond_error(c, &e);
}

/* Checks that need only the request line and headers: route, method, auth, readiness, size. */
static int precheck(xi_server *s, struct MHD_Connection *c, const char *url, const char *method,
                    conn_state *st, enum MHD_Result *ret) {
    size_t i;
    int path_seen = 0;
    if (xi_cors_preflight(s, c, method, ret)) return 1; /* before auth, as vLLM's middleware */
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
    if (routes[i].auth && s->cfg.n_api_keys) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!xi_oai_auth_ok(h, s->cfg.api_keys, s->cfg.n_api_keys)) {
            *ret = fail_status(c, MHD_HTTP_UNAUTHORIZED, NULL, "Incorrect or missing API key (send `Authorization: Bearer KEY`)");
            return 1;
        }
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
    xi_engine *eng = atomic_load(&s->engine);
    if (st->route == R_HEALTH)
        return xi_srv_respond(c, eng && !atomic_load(&s->stopping) ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                              NULL, strdup(""));
    if (!eng) return fail_status(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, "the model is still loading");
    const char *body = st->body ? st->body : "";
    if (st->route == R_INVOCATIONS) { /* the request's own fields say which API it is for */
        const int api = xi_oai_invocation_api(body, st->len, s->cfg.pooling);
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
    if (st->route != R_MODELS && st->route != R_MODEL && st->route != R_METRICS && st->route != R_LOAD &&
        st->route != R_TOKENIZER_INFO && !json_content_type(c))
        return fail_status(c, MHD_HTTP_BAD_REQUEST, NULL, "Unsupported Media Type: Only 'application/json' is allowed");
    switch (st->route) {
    case R_CHAT: return xi_job_handle(s, c, XI_API_CHAT, body, st->len, &st->job);
    case R_COMPLETIONS: return xi_job_handle(s, c, XI_API_COMPLETIONS, body, st->len, &st->job);
    case R_RESPONSES: return xi_job_handle(s, c, XI_API_RESPONSES, body, st->len, &st->job);
    case R_MODELS: return route_models(s, c);
    case R_MODEL: return route_model(s, c, url + strlen("/v1/models/"));
    case R_TOKENIZE: return route_tokenize(s, eng, c, body, st->len);
    case R_DETOKENIZE: return route_detokenize(s, eng, c, body, st->len);
    case R_METRICS: return route_metrics(s, eng, c);
    case R_TOKENIZER_INFO: return xi_tokenizer_info_handle(s, c);
    case R_LOAD: /* vLLM's --enable-server-load-tracking: requests being answered */
        return respond_json(c, json_pack("{s:i}", "server_load", s->cfg.server_load_tracking ? xi_server_in_flight(s) : 0));
    case R_EMBEDDINGS: return xi_embeddings_handle(s, c, body, st->len);
    default: return MHD_NO;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    xi_server *s = cls;
    conn_state *st = *con_cls;
    xi_http_enter(s, c);
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return MHD_NO;
        *con_cls = st;
        enum MHD_Result ret;
        if (precheck(s, c, url, method, st, &ret)) {
            st->answered = 1;
            return ret;
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!st->answered && append_body(st, upload_data, *upload_data_size, s->cfg.max_body_bytes))
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (st->answered) return MHD_YES;
    st->answered = 1;
    return dispatch(s, c, st, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    conn_state *st = *con_cls;
    if (!st) return;
    if (st->job) xi_job_connection_done(st->job, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    free(st->body);
    free(st);
    *con_cls = NULL;
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
    s->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC, 0, NULL, NULL,
        on_request, s, MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "cannot start the HTTP server");
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
    atomic_store(&s->stopping, 1);
    if (s->listen_fd < 0) return;
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    s->listen_fd = -1;
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
    MHD_stop_daemon(s->daemon); /* closes the listening socket unless quiesced */
    s->daemon = NULL;
    s->listen_fd = -1;
}

void xi_server_free(xi_server *s) {
    if (!s) return;
    xi_server_stop(s);
    xi_metrics_free(s->metrics);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
