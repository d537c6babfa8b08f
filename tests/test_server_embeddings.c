/* POST /v1/embeddings through real sockets (curl) on an in-process engine and server:
 * every input form gives the same vectors, base64 decodes to the float answer's bits,
 * dimensions and normalize, usage and metrics, the 4xx answers; --runner / --task and the
 * sentence-transformers folder check. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "server/embeddings.h"
#include "server/serve_args.h"
#include "server/server.h"
#include "test.h"

#define QWEN2 "models/qwen2-tiny-random"

static xi_server *serve(const char *model, int pooling, xi_engine **eng, int *port) {
    static const char *const names[] = {"emb"};
    char err[512] = "";
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data(model);
    p.kv_cache_memory_bytes = 4 << 20;
    p.max_model_len = 64;
    p.n_threads = 1;
    *eng = xi_engine_open(&p, err, sizeof err);
    if (!*eng || xi_engine_start(*eng, err, sizeof err)) {
        fprintf(stderr, "    engine: %s\n", err);
        return NULL;
    }
    int fd = xi_server_listen("127.0.0.1", 0, NULL, port, err, sizeof err);
    xi_server_config cfg = {.served_names = names, .n_served_names = 1, .model_path = "/m",
                            .max_body_bytes = 1 << 20, .pooling = pooling};
    xi_server *s = fd >= 0 ? xi_server_start(&cfg, fd, err, sizeof err) : NULL;
    if (!s || xi_server_set_engine(s, *eng, err, sizeof err)) {
        fprintf(stderr, "    server: %s\n", err);
        return NULL;
    }
    return s;
}

static void shut(xi_server *s, xi_engine *e) {
    xi_server_stop(s);
    xi_engine_close(e);
    xi_server_free(s);
}

/* POST body to path; the HTTP status into *status, the body returned (heap). */
__attribute__((noinline)) static char *post(int port, const char *path, const char *body, int *status) {
    char file[600], cmd[1400];
    snprintf(file, sizeof file, "%s/body.json", xi_test_tmpdir());
    FILE *f = fopen(file, "w");
    if (!f) return NULL;
    fputs(body, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "curl -s -m 20 -w '\\n%%{http_code}' -H 'Content-Type: application/json' "
             "--data-binary @%s http://127.0.0.1:%d%s", file, port, path);
    char *out = NULL;
    xi_test_run(cmd, &out);
    char *nl = out ? strrchr(out, '\n') : NULL;
    *status = nl ? atoi(nl + 1) : -1;
    if (nl) *nl = 0;
    return out;
}

/* data[i].embedding of a 200 answer as floats (float or base64 form); count or -1. */
static int vectors(const char *body, float out[][64], int max) {
    json_t *j = json_loads(body, 0, NULL);
    json_t *data = json_object_get(j, "data");
    int n = (int)json_array_size(data);
    for (int i = 0; i < n && i < max; i++) {
        json_t *d = json_array_get(data, (size_t)i);
        json_t *emb = json_object_get(d, "embedding");
        if (json_integer_value(json_object_get(d, "index")) != i) n = -1;
        if (json_is_string(emb)) {
            unsigned char raw[64 * 4 + 8];
            size_t len = json_string_length(emb);
            if (len > 4 * ((sizeof raw - 8) / 3 + 1)) n = -1;
            int k = n < 0 ? -1 : EVP_DecodeBlock(raw, (const unsigned char *)json_string_value(emb), (int)len);
            int pad = len >= 2 ? (json_string_value(emb)[len - 1] == '=') + (json_string_value(emb)[len - 2] == '=') : 0;
            if (k < 0 || (k - pad) % 4) n = -1;
            for (int v = 0; n >= 0 && v < (k - pad) / 4; v++) {
                uint32_t u = 0;
                for (int b = 0; b < 4; b++) u |= (uint32_t)raw[v * 4 + b] << (8 * b);
                memcpy(&out[i][v], &u, 4);
            }
        } else {
            for (size_t v = 0; v < json_array_size(emb) && v < 64; v++)
                out[i][v] = (float)json_real_value(json_array_get(emb, v));
        }
    }
    json_decref(j);
    return n;
}

static long usage_prompt(const char *body) {
    json_t *j = json_loads(body, 0, NULL);
    long n = (long)json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
    json_decref(j);
    return n;
}

TEST(test_serve_embeddings_every_input_form_gives_the_same_bits) {
    xi_engine *eng;
    int port, st;
    xi_server *s = serve(QWEN2, 1, &eng, &port);
    CHECK(s);
    static float a[4][64], b[4][64], c[4][64], d[4][64];
    char *o = post(port, "/v1/embeddings", "{\"model\":\"emb\",\"input\":[\"Hello\",\"The quick brown fox\"]}", &st);
    CHECKF(st == 200, "%d %s", st, o);
    CHECK_EQ(vectors(o, a, 4), 2);
    CHECKF(strstr(o, "\"object\":\"list\"") && strstr(o, "\"model\":\"emb\"") && strstr(o, "\"id\":\"embd-"), "%s", o);
    const long both = usage_prompt(o);
    o = post(port, "/v1/embeddings", "{\"input\":\"The quick brown fox\"}", &st);
    CHECKF(st == 200, "%d %s", st, o);
    CHECK_EQ(vectors(o, b, 4), 1);
    CHECK_EQ(usage_prompt(o) + 1, both); /* "Hello" is one token */
    CHECK(!memcmp(a[1], b[0], sizeof a[1]));
    /* ids: one list, and a list of lists; Hello = 9707 */
    o = post(port, "/v1/embeddings", "{\"input\":[9707]}", &st);
    CHECK_EQ(vectors(o, c, 4), 1);
    CHECK(!memcmp(a[0], c[0], sizeof a[0]));
    o = post(port, "/v1/embeddings", "{\"input\":[[9707],[9707]],\"encoding_format\":\"base64\"}", &st);
    CHECKF(st == 200 && strstr(o, "\"embedding\":\""), "%d %s", st, o);
    CHECK_EQ(vectors(o, d, 4), 2);
    CHECK(!memcmp(a[0], d[0], sizeof a[0]) && !memcmp(a[0], d[1], sizeof a[0]));
    double n2 = 0;
    for (int k = 0; k < 64; k++) n2 += (double)a[0][k] * a[0][k];
    CHECK_NEAR(n2, 1.0, 1e-6);
    CHECK(memcmp(a[0], a[1], sizeof a[0]));
    /* dimensions: the first 8 raw values, normalised again; normalize false: the raw vector */
    o = post(port, "/v1/embeddings", "{\"input\":\"Hello\",\"normalize\":false}", &st);
    CHECK_EQ(vectors(o, b, 4), 1);
    o = post(port, "/v1/embeddings", "{\"input\":\"Hello\",\"dimensions\":8}", &st);
    CHECKF(st == 200, "%d %s", st, o);
    CHECK_EQ(vectors(o, c, 4), 1);
    json_t *j = json_loads(o, 0, NULL);
    CHECK_EQ(json_array_size(json_object_get(json_array_get(json_object_get(j, "data"), 0), "embedding")), 8);
    json_decref(j);
    double raw = 0, r8 = 0;
    for (int k = 0; k < 64; k++) raw += (double)b[0][k] * b[0][k];
    for (int k = 0; k < 8; k++) r8 += (double)b[0][k] * b[0][k];
    CHECKF(raw > 2, "raw norm^2 %g", raw);
    for (int k = 0; k < 64; k++) CHECK_NEAR(a[0][k], b[0][k] / sqrt(raw), 1e-7);
    for (int k = 0; k < 8; k++) CHECK_NEAR(c[0][k], b[0][k] / sqrt(r8), 1e-7);
    /* every prompt token counted once in the metrics: 2+1 ... of the requests above */
    char cmd[256], *m = NULL;
    snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics", port);
    xi_test_run(cmd, &m);
    char want[128];
    snprintf(want, sizeof want, "vllm:prompt_tokens_total{model_name=\"emb\"} %ld\n", both * 2 - 1 + 1 + 2 + 1 + 1);
    CHECKF(m && strstr(m, want), "want %s in %s", want, m);
    shut(s, eng);
}

TEST(test_serve_embeddings_bad_requests_are_4xx) {
    xi_engine *eng;
    int port, st;
    xi_server *s = serve(QWEN2, 1, &eng, &port);
    CHECK(s);
    static const struct { const char *body, *param; int status; } cases[] = {
        {"{\"input\":\"x\",\"dimensions\":65}", "dimensions", 400},
        {"{\"input\":\"x\",\"dimensions\":0}", "dimensions", 400},
        {"{\"input\":\"x\",\"encoding_format\":\"hex\"}", "encoding_format", 400},
        {"{\"input\":\"x\",\"normalize\":1}", "normalize", 400},
        {"{}", "input", 400},
        {"{\"input\":[]}", "input", 400},
        {"{\"input\":\"\"}", "input", 400},
        {"{\"input\":[\"a\",3]}", "input", 400},
        {"{\"input\":[[1],[]]}", "input", 400},
        {"{\"input\":[-1]}", "input", 400},
        {"{\"input\":[151936]}", "input", 400},
        {"{\"input\":{\"a\":1}}", "input", 400},
        {"{\"input\":\"x\",\"model\":\"other\"}", "model", 404},
        {"{\"input\":\"x\",\"truncate_prompt_tokens\":0}", "truncate_prompt_tokens", 400},
        {"[1,2]", NULL, 400},
        {"{\"input\":", NULL, 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *o = post(port, "/v1/embeddings", cases[i].body, &st);
        CHECKF(st == cases[i].status, "%s: %d %s", cases[i].body, st, o);
        char want[96];
        if (cases[i].param) snprintf(want, sizeof want, "\"param\":\"%s\"", cases[i].param);
        else snprintf(want, sizeof want, "\"error\"");
        CHECKF(o && strstr(o, want), "%s: %s", cases[i].body, o);
    }
    /* 65 tokens against max_model_len 64, and the same cut to its last 64 tokens */
    char body[1024] = "{\"input\":[";
    for (int i = 0; i < 65; i++) snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "", 100 + i);
    strcat(body, "]");
    char body2[1100];
    snprintf(body2, sizeof body2, "%s, \"truncate_prompt_tokens\": 64}", body);
    strcat(body, "}");
    char *o = post(port, "/v1/embeddings", body, &st);
    CHECKF(st == 400 && strstr(o, "maximum context length is 64 tokens"), "%d %s", st, o);
    o = post(port, "/v1/embeddings", body2, &st);
    CHECKF(st == 200 && usage_prompt(o) == 64, "%d %s", st, o);
    /* a pooling model generates nothing */
    o = post(port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &st);
    CHECKF(st == 400 && strstr(o, "does not support Chat Completions API"), "%d %s", st, o);
    o = post(port, "/v1/completions", "{\"prompt\":\"hi\"}", &st);
    CHECKF(st == 400 && strstr(o, "does not support Completions API"), "%d %s", st, o);
    shut(s, eng);
}

TEST(test_serve_embeddings_from_a_generative_model_is_400) {
    xi_engine *eng;
    int port, st;
    xi_server *s = serve("models/stories260K", 0, &eng, &port);
    CHECK(s);
    char *o = post(port, "/v1/embeddings", "{\"input\":\"Once\"}", &st);
    CHECKF(st == 400 && strstr(o, "does not support Embeddings API") && strstr(o, "--runner pooling"), "%d %s", st, o);
    o = post(port, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":2}", &st);
    CHECKF(st == 200, "%d %s", st, o);
    shut(s, eng);
}

/* curl's status and total seconds for method path (body for POST, else GET). */
static int timed(int port, const char *path, const char *body, double *took) {
    char cmd[600], *out = NULL;
    snprintf(cmd, sizeof cmd, "curl -s -m 10 -o /dev/null -w '%%{http_code} %%{time_total}' %s%s%s "
             "http://127.0.0.1:%d%s", body ? "-H 'Content-Type: application/json' --data-binary '" : "",
             body ? body : "", body ? "'" : "", port, path);
    xi_test_run(cmd, &out);
    int status = -1;
    *took = 1e9;
    if (out) sscanf(out, "%d %lf", &status, took);
    free(out);
    return status;
}

/* n slow embedding requests on sockets of their own (into fds): 512 inputs of 63 ids each,
 * each starting with its own id so the prefix cache shares nothing. Sent one at a time, so that
 * each lands on an HTTP thread free to take it (a thread that waited for the engine would take
 * no more). Returns 0, or -1 when a socket could not send. */
enum { N_IN = 512, N_IDS = 63 };
static int send_slow(int port, int n, int *fds) {
    size_t cap = (size_t)N_IN * (N_IDS * 2 + 16) + 64, len = 0;
    char *body = malloc(cap);
    if (!body) return -1;
    len += (size_t)snprintf(body + len, cap - len, "{\"input\":[");
    for (int i = 0; i < N_IN; i++) {
        len += (size_t)snprintf(body + len, cap - len, "%s[%d", i ? "," : "", 100 + i);
        for (int k = 1; k < N_IDS; k++) len += (size_t)snprintf(body + len, cap - len, ",%d", 1 + k % 9);
        len += (size_t)snprintf(body + len, cap - len, "]");
    }
    len += (size_t)snprintf(body + len, cap - len, "]}");
    char head[200];
    int hl = snprintf(head, sizeof head, "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n", len);
    struct timespec pause = {0, 20 * 1000000L};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        nanosleep(&pause, NULL);
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof a) ||
            send(fds[i], head, (size_t)hl, MSG_NOSIGNAL) != hl || send(fds[i], body, len, MSG_NOSIGNAL) != (ssize_t)len)
            rc = -1;
    }
    free(body);
    return rc;
}

/* More slow embedding requests than the server has HTTP threads: each waits for the engine
 * suspended, so /health, a completion (refused at once on a pooling model) and /tokenize answer
 * in under half a second while more of them than there are threads are still unanswered; once
 * their clients leave, their engine requests are aborted and a small embedding is served. */
TEST(test_serve_embeddings_in_flight_leave_the_http_threads_free) {
    xi_engine *eng;
    int port;
    xi_server *s = serve(QWEN2, 1, &eng, &port);
    CHECK(s);
    enum { N_BUSY = 16, HTTP_THREADS = 8 };
    int busy[N_BUSY];
    CHECK(!send_slow(port, N_BUSY, busy));
    struct timespec pause = {0, 20 * 1000000L};
    nanosleep(&pause, NULL);
    double t_health, t_cmpl, t_tok;
    CHECK_EQ(timed(port, "/health", NULL, &t_health), 200);
    CHECK_EQ(timed(port, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":2}", &t_cmpl), 400);
    CHECK_EQ(timed(port, "/tokenize", "{\"prompt\":\"Once upon a time\"}", &t_tok), 200);
    fprintf(stderr, "    with %d embedding requests in flight: /health %.3f s, completion %.3f s, /tokenize %.3f s\n",
            N_BUSY, t_health, t_cmpl, t_tok);
    CHECKF(t_health < 0.5 && t_cmpl < 0.5 && t_tok < 0.5, "%.3f %.3f %.3f", t_health, t_cmpl, t_tok);
    /* the check means something only while more of the slow ones than there are HTTP threads
     * are still waiting (the engine answers them in turn: the first may be done already) */
    int answered = 0;
    for (int i = 0; i < N_BUSY; i++) {
        struct pollfd pf = {.fd = busy[i], .events = POLLIN};
        answered += poll(&pf, 1, 0) > 0;
    }
    fprintf(stderr, "    %d of them still waiting\n", N_BUSY - answered);
    CHECKF(N_BUSY - answered > HTTP_THREADS, "%d of the %d slow requests were answered already: not slow enough",
           answered, N_BUSY);
    /* a graceful shutdown would wait for them: they count among the requests in flight */
    CHECKF(xi_server_in_flight(s) >= N_BUSY - answered, "%d in flight", xi_server_in_flight(s));
    for (int i = 0; i < N_BUSY; i++) close(busy[i]);
    double t_small;
    CHECK_EQ(timed(port, "/v1/embeddings", "{\"input\":\"Hello\"}", &t_small), 200);
    fprintf(stderr, "    after the slow clients left: a small embedding %.3f s\n", t_small);
    CHECKF(t_small < 10, "%.3f", t_small);
    /* most of the engine requests of the clients still waiting were aborted, not computed */
    char cmd[200], *m = NULL;
    snprintf(cmd, sizeof cmd, "curl -s -m 10 http://127.0.0.1:%d/metrics", port);
    xi_test_run(cmd, &m);
    const char *line = m ? strstr(m, "vllm:request_success_total{finished_reason=\"abort\"") : NULL;
    const char *val = line ? strstr(line, "} ") : NULL;
    const long aborted = val ? atol(val + 2) : -1;
    free(m);
    fprintf(stderr, "    %ld engine requests aborted\n", aborted);
    CHECKF(aborted >= (long)(N_BUSY - answered) * N_IN / 2, "%ld aborted", aborted);
    for (int i = 0; i < 100 && xi_server_in_flight(s); i++) nanosleep(&pause, NULL);
    CHECK_EQ(xi_server_in_flight(s), 0);
    shut(s, eng);
}

/* Stopping the server with embedding requests suspended resumes and closes each of them (their
 * clients see the connection end, not a hang) and leaves nothing behind (ASan's leak check). */
TEST(test_serve_embeddings_stop_with_requests_suspended_closes_them) {
    xi_engine *eng;
    int port;
    xi_server *s = serve(QWEN2, 1, &eng, &port);
    CHECK(s);
    enum { N = 4 };
    int fds[N];
    CHECK(!send_slow(port, N, fds));
    CHECK(xi_server_in_flight(s) > 0);
    shut(s, eng);
    int closed = 0;
    for (int i = 0; i < N; i++) {
        struct pollfd pf = {.fd = fds[i], .events = POLLIN};
        char buf[4096];
        while (poll(&pf, 1, 5000) > 0 && recv(fds[i], buf, sizeof buf, 0) > 0) continue;
        closed += poll(&pf, 1, 0) > 0 && recv(fds[i], buf, sizeof buf, MSG_DONTWAIT) <= 0;
        close(fds[i]);
    }
    CHECK_EQ(closed, N);
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static const char *no_env(const char *name) { (void)name; return NULL; }
static int is_dir(const char *p) { (void)p; return 1; }

TEST(test_serve_runner_flags_and_sentence_transformers_detection) {
    xi_serve_args a;
    char err[512] = "";
    char *argv1[] = {"serve", "/m", "--task", "embed", NULL};
    CHECKF(xi_serve_args_parse(&a, 4, argv1, no_env, is_dir, err, sizeof err) == 0, "%s", err);
    CHECK_STR(a.runner, "pooling");
    char *argv2[] = {"serve", "/m", "--runner=pooling", NULL};
    CHECK(xi_serve_args_parse(&a, 3, argv2, no_env, is_dir, err, sizeof err) == 0);
    CHECK_STR(a.runner, "pooling");
    char *argv3[] = {"serve", "/m", "--runner", "draft", NULL};
    CHECK(xi_serve_args_parse(&a, 4, argv3, no_env, is_dir, err, sizeof err) == -1);
    CHECKF(strstr(err, "--runner"), "%s", err);
    char *argv4[] = {"serve", "/m", NULL};
    CHECK(xi_serve_args_parse(&a, 2, argv4, no_env, is_dir, err, sizeof err) == 0);
    CHECK_STR(a.runner, "auto");

    const char *dir = xi_test_tmpdir();
    CHECK_EQ(xi_pooling_resolve("auto", dir, err, sizeof err), 0); /* a plain folder */
    CHECK_EQ(xi_pooling_resolve("pooling", dir, err, sizeof err), 1);
    write_file(dir, "modules.json",
               "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
               "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
               "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]");
    err[0] = 0;
    CHECK_EQ(xi_pooling_resolve("auto", dir, err, sizeof err), -1); /* Pooling listed, no config */
    CHECKF(strstr(err, "1_Pooling/config.json"), "%s", err);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    CHECK(mkdir(sub, 0755) == 0);
    write_file(sub, "config.json", "{\"word_embedding_dimension\":1024,\"pooling_mode_cls_token\":false,"
               "\"pooling_mode_mean_tokens\":false,\"pooling_mode_lasttoken\":true}");
    CHECK_EQ(xi_pooling_resolve("auto", dir, err, sizeof err), 1);
    CHECK_EQ(xi_pooling_resolve("generate", dir, err, sizeof err), 0);
    write_file(sub, "config.json", "{\"pooling_mode_mean_tokens\":true,\"pooling_mode_lasttoken\":false}");
    CHECK_EQ(xi_pooling_resolve("auto", dir, err, sizeof err), -1);
    CHECKF(strstr(err, "pooling_mode_mean_tokens") && strstr(err, "last-token"), "%s", err);
}
