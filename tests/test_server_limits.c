/* What a client may cost the server, through real loopback sockets: slow and idle sockets are
 * closed on their deadlines while others are served, a request's length is stated once, a
 * half-closed client still gets its answer, and the key is checked before routing. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "test.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static xi_server *start_cfg(xi_server_config *cfg, int *port) {
    static const char *const names[] = {"tiny"};
    char err[256];
    int fd = xi_server_listen("127.0.0.1", 0, NULL, port, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "    listen: %s\n", err);
        return NULL;
    }
    cfg->served_names = names;
    cfg->n_served_names = 1;
    cfg->model_path = "/none";
    if (!cfg->max_body_bytes) cfg->max_body_bytes = 1 << 20;
    xi_server *s = xi_server_start(cfg, fd, err, sizeof err);
    if (!s) fprintf(stderr, "    start: %s\n", err);
    return s;
}

xi_engine *open_engine(const char *model, char *err, size_t errlen); /* test_server_http.c */

/* A server on stories260K, or NULL after a failed check. */
static xi_server *start_engine(xi_server_config *cfg, int *port, xi_engine **eng) {
    char err[512] = "";
    *eng = open_engine("models/stories260K", err, sizeof err);
    xi_server *s = *eng ? start_cfg(cfg, port) : NULL;
    if (s && !xi_server_set_engine(s, *eng, err, sizeof err)) return s;
    xi_test_fail(__FILE__, __LINE__, "engine or server: %s", err);
    xi_server_free(s);
    if (*eng) xi_engine_close(*eng);
    return NULL;
}

static void stop_engine(xi_server *s, xi_engine *eng) {
    xi_server_stop(s);
    xi_engine_close(eng);
    xi_server_free(s);
}

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Everything the server sends until it closes or timeout_s passes (heap, NUL-terminated). */
static char *read_all(int fd, double timeout_s) {
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    double end = now_s() + timeout_s;
    while (buf && now_s() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n <= 0) break;
        len += (size_t)n;
        if (cap - len < 4096) buf = realloc(buf, cap *= 2);
    }
    if (buf) buf[len] = 0;
    return buf;
}

/* One raw request; shut_wr half-closes after sending. Returns the whole answer (heap). */
static char *raw(int port, const char *req, int shut_wr) {
    int fd = connect_to(port);
    if (fd < 0) return strdup("");
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        close(fd);
        return strdup("");
    }
    if (shut_wr) shutdown(fd, SHUT_WR);
    char *out = read_all(fd, 10);
    close(fd);
    return out;
}

/* POST body to path (Content-Length computed); shut_wr as raw(). */
static char *post(int port, const char *path, const char *body, int shut_wr) {
    size_t n = strlen(body) + 256;
    char *req = malloc(n);
    snprintf(req, n, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n%s",
             path, strlen(body), shut_wr ? "" : "Connection: close\r\n", body);
    char *o = raw(port, req, shut_wr);
    free(req);
    return o;
}

/* The status of "GET path" on a fresh connection, and how long it took. */
static int get_status(int port, const char *path, double *took) {
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    double t0 = now_s();
    char *o = raw(port, req, 0);
    if (took) *took = now_s() - t0;
    int status = 0;
    if (o && !strncmp(o, "HTTP/1.1 ", 9)) status = atoi(o + 9);
    free(o);
    return status;
}

/* A socket the server has closed: reading gives EOF or a reset without blocking. */
static int closed_by_server(int fd) {
    char b[256];
    for (;;) {
        ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 1;
        if (n < 0) return 0;
    }
}

/* Slowloris: a few hundred sockets that send a request line and then one header byte every
 * 100 ms, and a hundred that send nothing, against a server whose limit is below their
 * number. /health and completions still answer promptly throughout; every idle socket is
 * closed after the keep-alive timeout and every slow one by its request deadline. */
TEST(test_serve_limits_slowloris_sockets_are_cut_while_others_are_served) {
    xi_engine *eng;
    xi_server_config cfg = {.limit_concurrency = 256, .timeout_keep_alive = 1.0, .timeout_request_read = 2.0};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;

    enum { SLOW = 300, IDLE = 100 };
    static int slow[SLOW], idle[IDLE];
    for (int i = 0; i < IDLE; i++) CHECK((idle[i] = connect_to(port)) >= 0);
    for (int i = 0; i < SLOW; i++) {
        CHECK((slow[i] = connect_to(port)) >= 0);
        static const char line[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
        send(slow[i], line, sizeof line - 1, MSG_NOSIGNAL);
    }
    const double t0 = now_s();
    double worst = 0;
    int answered = 0, probes = 0, completions = 0;
    while (now_s() - t0 < 3.5) {
        for (int i = 0; i < SLOW; i++) send(slow[i], "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        double took;
        int st = get_status(port, "/health", &took);
        probes++;
        answered += st == 200;
        if (took > worst) worst = took;
        if (probes % 5 == 0) {
            char *o = post(port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4}", 0);
            completions += o && strstr(o, " 200 OK") && strstr(o, "\"completion_tokens\":4");
            free(o);
        }
        sleep_s(0.1);
    }
    CHECKF(answered == probes, "/health answered %d of %d probes", answered, probes);
    CHECKF(worst < 1.0, "slowest /health took %.3f s", worst);
    CHECKF(completions >= probes / 5 && completions > 0, "%d completions answered of %d", completions, probes / 5);
    int cut_slow = 0, cut_idle = 0;
    for (int i = 0; i < SLOW; i++) cut_slow += closed_by_server(slow[i]);
    for (int i = 0; i < IDLE; i++) cut_idle += closed_by_server(idle[i]);
    CHECKF(cut_slow == SLOW && cut_idle == IDLE, "closed: %d of %d slow, %d of %d idle", cut_slow, SLOW,
           cut_idle, IDLE);
    for (int i = 0; i < SLOW; i++) close(slow[i]);
    for (int i = 0; i < IDLE; i++) close(idle[i]);
    fprintf(stderr, "    %d /health probes, slowest %.0f ms; %d completions\n", probes, worst * 1e3, completions);
    stop_engine(s, eng);
}

/* A client that half-closes after its request (EOF after a complete request) gets its answer,
 * streamed or not. */
TEST(test_serve_limits_half_closed_client_gets_its_answer) {
    xi_engine *eng;
    xi_server_config cfg = {0};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;
    char *o = post(port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"ignore_eos\":true}", 1);
    CHECKF(strstr(o, "HTTP/1.1 200 OK") && strstr(o, "\"completion_tokens\":6"), "%s", o);
    free(o);
    o = post(port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true}", 1);
    CHECKF(strstr(o, "HTTP/1.1 200 OK") && strstr(o, "data: [DONE]"), "%s", o);
    free(o);
    /* sixteen at once, so they wait for the engine (suspended) after their EOF arrived */
    enum { N = 16 };
    int fds[N];
    static const char body[] = "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"ignore_eos\":true}";
    char req[256];
    snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    for (int i = 0; i < N; i++) {
        CHECK((fds[i] = connect_to(port)) >= 0);
        CHECK(send(fds[i], req, strlen(req), MSG_NOSIGNAL) > 0);
        shutdown(fds[i], SHUT_WR);
    }
    int answered = 0;
    for (int i = 0; i < N; i++) {
        o = read_all(fds[i], 10);
        answered += o && strstr(o, "HTTP/1.1 200 OK") && strstr(o, "\"completion_tokens\":24");
        free(o);
        close(fds[i]);
    }
    CHECK_EQ(answered, N);
    stop_engine(s, eng);
}

/* Request smuggling: two Content-Length headers, or one with Transfer-Encoding, is a 400. */
TEST(test_serve_limits_conflicting_body_lengths_are_400) {
    xi_server_config cfg = {0};
    int port;
    xi_server *s = start_cfg(&cfg, &port);
    CHECK(s);
    static const char *const reqs[] = {
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        char *o = raw(port, reqs[i], 0);
        CHECKF(!strncmp(o, "HTTP/1.1 400", 12) && strstr(o, "\"error\""), "request %zu: %s", i, o);
        free(o);
    }
    /* one length, stated once, still reaches the route (503: no model loaded) */
    char *o = raw(port, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 503", 12), "%s", o);
    free(o);
    xi_server_free(s);
}

/* With --api-key, every /v1 path answers 401 before routing (vLLM): no 404/405 leaks which
 * routes exist; with the key the same requests get their 404 and 405. */
TEST(test_serve_limits_api_key_is_checked_before_routing) {
    static const char *const keys[] = {"sekrit"};
    xi_server_config cfg = {.api_keys = keys, .n_api_keys = 1};
    int port;
    xi_server *s = start_cfg(&cfg, &port);
    CHECK(s);
    static const struct { const char *req; int keyed; } cases[] = {
        {"GET /v1/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404},
        {"DELETE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405},
        {"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *o = raw(port, cases[i].req, 0);
        CHECKF(!strncmp(o, "HTTP/1.1 401", 12), "%s", o);
        free(o);
        char keyed[256];
        const char *eol = strstr(cases[i].req, "\r\n");
        snprintf(keyed, sizeof keyed, "%.*s\r\nAuthorization: Bearer sekrit%s", (int)(eol - cases[i].req),
                 cases[i].req, eol);
        o = raw(port, keyed, 0);
        CHECKF(atoi(o + 9) == cases[i].keyed, "%s", o);
        free(o);
    }
    /* outside /v1 an unknown path is still a plain 404 */
    CHECK_EQ(get_status(port, "/nope", NULL), 404);
    xi_server_free(s);
}

/* While draining (SIGTERM), /health answers 503 instead of refusing the connection, new
 * completions get 503, and /version still answers. */
TEST(test_serve_limits_health_is_503_while_draining) {
    xi_engine *eng;
    xi_server_config cfg = {0};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;
    CHECK_EQ(get_status(port, "/health", NULL), 200);
    xi_server_quiesce(s);
    CHECK_EQ(get_status(port, "/health", NULL), 503);
    CHECK_EQ(get_status(port, "/version", NULL), 200);
    char *o = post(port, "/v1/completions", "{\"prompt\":\"a\"}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 503", 12) && strstr(o, "shutting down"), "%s", o);
    free(o);
    stop_engine(s, eng);
}

/* A request may create at most --max-seqs-per-request sequences (prompts x n): past it a 400
 * that names the numbers and the flag; at the limit it is served. */
TEST(test_serve_limits_sequences_per_request_are_capped) {
    xi_engine *eng;
    xi_server_config cfg = {.max_seqs_per_request = 8};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;
    char *o = post(port, "/v1/completions", "{\"prompt\":[\"a\",\"b\",\"c\"],\"n\":3,\"max_tokens\":2}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 400", 12) && strstr(o, "9 sequences") && strstr(o, "--max-seqs-per-request"), "%s", o);
    free(o);
    o = post(port, "/v1/completions", "{\"prompt\":[\"a\",\"b\"],\"n\":4,\"max_tokens\":2}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 200", 12) && strstr(o, "\"index\":7"), "%s", o);
    free(o);
    stop_engine(s, eng);
}

/* The parse budget: a body is charged its bytes while it arrives and its JSON elements once
 * whole. Nested too deep is a 400, more elements than the whole budget a 413, and a body that
 * does not fit next to the others now a 503 with Retry-After, which passes once they are gone. */
TEST(test_serve_limits_parse_budget_refuses_with_retry_after) {
    xi_engine *eng;
    xi_server_config cfg = {.max_parse_bytes = 4 << 20, .max_body_bytes = 8 << 20};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;
    char *body = malloc(2 << 20);
    CHECK(body);
    int n = snprintf(body, 64, "{\"prompt\":");
    for (int i = 0; i < 200; i++) body[n++] = '[';
    for (int i = 0; i < 200; i++) body[n++] = ']';
    strcpy(body + n, "}");
    char *o = post(port, "/tokenize", body, 0);
    CHECKF(!strncmp(o, "HTTP/1.1 400", 12) && strstr(o, "nested deeper"), "%.300s", o);
    free(o);
    /* 20000 token ids: 10 MB of parsing against a 4 MiB budget */
    n = snprintf(body, 64, "{\"prompt\":[");
    for (int i = 0; i < 20000; i++) n += snprintf(body + n, 16, "%s%d", i ? "," : "", 100 + i % 50);
    strcpy(body + n, "]}");
    o = post(port, "/tokenize", body, 0);
    CHECKF(!strncmp(o, "HTTP/1.1 413", 12) && strstr(o, "elements"), "%.300s", o);
    free(o);

    /* a client announcing 3 MiB holds that much of the budget while it sends */
    int holder = connect_to(port);
    CHECK(holder >= 0);
    char head[200];
    snprintf(head, sizeof head, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"prompt\":\"", 3 << 20);
    CHECK(send(holder, head, strlen(head), MSG_NOSIGNAL) > 0);
    sleep_s(0.2);
    n = snprintf(body, 64, "{\"prompt\":\"");
    memset(body + n, 'a', 1200 << 10);
    strcpy(body + n + (1200 << 10), "\"}");
    o = post(port, "/tokenize", body, 0);
    CHECKF(!strncmp(o, "HTTP/1.1 503", 12) && strstr(o, "Retry-After: 1\r\n") && strstr(o, "--max-parse-bytes-in-flight"),
           "%.300s", o);
    free(o);
    close(holder);
    sleep_s(0.3);
    o = post(port, "/tokenize", "{\"prompt\":\"Once upon a time\"}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 200", 12) && strstr(o, "\"count\":"), "%.300s", o);
    free(o);
    free(body);
    stop_engine(s, eng);
}

/* Amplification: one request of 1024 sequences (8 prompts x n=128, 64 tokens each) on an
 * engine running 8 at a time cannot hold a bystander's 4-token request: it is answered within
 * a second while the big one is still far from done (it used to wait for all of it). */
TEST(test_serve_limits_one_large_request_cannot_hold_a_small_one) {
    char err[512] = "";
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = xi_test_data("models/stories260K");
    p.kv_cache_memory_bytes = 4 << 20;
    p.n_threads = 1;
    p.max_num_seqs = 8;
    xi_engine *eng = xi_engine_open(&p, err, sizeof err);
    CHECKF(eng && !xi_engine_start(eng, err, sizeof err), "%s", err);
    xi_server_config cfg = {0};
    int port;
    xi_server *s = start_cfg(&cfg, &port);
    CHECK(s && !xi_server_set_engine(s, eng, err, sizeof err));

    const char *big = "{\"prompt\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\"],\"n\":128,\"max_tokens\":64,"
                      "\"ignore_eos\":true,\"temperature\":1,\"seed\":1}";
    char req[512];
    snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(big), big);
    int attacker = connect_to(port);
    CHECK(attacker >= 0 && send(attacker, req, strlen(req), MSG_NOSIGNAL) > 0);
    xi_engine_stats st = {0};
    for (int i = 0; i < 100 && st.num_running < 8; i++) {
        sleep_s(0.02);
        xi_engine_get_stats(eng, &st);
    }
    CHECK_EQ(st.num_running, 8);
    const double t0 = now_s();
    char *o = post(port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"ignore_eos\":true}", 0);
    const double took = now_s() - t0;
    xi_engine_get_stats(eng, &st);
    CHECKF(!strncmp(o, "HTTP/1.1 200", 12) && strstr(o, "\"completion_tokens\":4"), "%.300s", o);
    free(o);
    CHECKF(took < 1.0, "the bystander waited %.2f s", took);
    CHECKF(st.num_waiting > 500, "the big request was nearly done already (%d waiting)", st.num_waiting);
    fprintf(stderr, "    bystander answered in %.0f ms with %d of the big request's sequences waiting\n", took * 1e3,
            st.num_waiting);
    close(attacker);
    for (int i = 0; i < 200 && (st.num_running || st.num_waiting); i++) {
        sleep_s(0.02);
        xi_engine_get_stats(eng, &st);
    }
    CHECK_EQ(st.num_running + st.num_waiting, 0);
    stop_engine(s, eng);
}

/* A prompt far over max_model_len is refused without tokenizing all of it, on completions
 * and /tokenize alike; the message says it has more tokens than the limit. */
TEST(test_serve_limits_long_prompt_is_refused_by_its_token_count) {
    xi_engine *eng;
    xi_server_config cfg = {.max_body_bytes = 8 << 20};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;
    const size_t n = 4u << 20;
    char *body = malloc(n + 64);
    CHECK(body);
    size_t at = (size_t)snprintf(body, 64, "{\"prompt\":\"");
    for (size_t i = 0; at < n; i++) at += (size_t)snprintf(body + at, 16, "%s ", i % 3 ? "upon" : "time");
    strcpy(body + at, "\"}");
    double t0 = now_s();
    char *o = post(port, "/v1/completions", body, 0);
    const double took = now_s() - t0;
    CHECKF(!strncmp(o, "HTTP/1.1 400", 12) && strstr(o, "more than 512 tokens"), "%.300s", o);
    free(o);
    o = post(port, "/tokenize", body, 0);
    CHECKF(!strncmp(o, "HTTP/1.1 400", 12) && strstr(o, "more than max_model_len (512)"), "%.300s", o);
    free(o);
    fprintf(stderr, "    4 MB prompt refused in %.0f ms\n", took * 1e3);
    free(body);
    stop_engine(s, eng);
}

/* Past --limit-concurrency with every connection busy answering, a newcomer's completion gets
 * 503 with Retry-After while /health still answers 200 on a connection of its own; once the
 * busy ones end, completions are served again. */
TEST(test_serve_limits_busy_past_the_connection_limit_is_503_but_health_answers) {
    xi_engine *eng;
    xi_server_config cfg = {.limit_concurrency = 4};
    int port;
    xi_server *s = start_engine(&cfg, &port, &eng);
    if (!s) return;
    /* 64 samples of 480 tokens each: far more than the socket buffers of a client that reads
     * nothing, so these stay busy */
    static const char body[] = "{\"prompt\":\"Once\",\"n\":64,\"max_tokens\":480,\"ignore_eos\":true,\"stream\":true}";
    char req[256];
    snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    int busy[4];
    for (int i = 0; i < 4; i++) {
        CHECK((busy[i] = connect_to(port)) >= 0);
        CHECK(send(busy[i], req, strlen(req), MSG_NOSIGNAL) > 0);
    }
    sleep_s(0.3);
    char *o = post(port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":2}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 503", 12) && strstr(o, "Retry-After: 1\r\n") && strstr(o, "--limit-concurrency"), "%.300s", o);
    free(o);
    CHECK_EQ(get_status(port, "/health", NULL), 200);
    for (int i = 0; i < 4; i++) close(busy[i]);
    sleep_s(0.5);
    o = post(port, "/v1/completions", "{\"prompt\":\"Once upon a time\",\"max_tokens\":2}", 0);
    CHECKF(!strncmp(o, "HTTP/1.1 200", 12), "%.300s", o);
    free(o);
    stop_engine(s, eng);
}
