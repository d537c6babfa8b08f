/* HTTPS (server/tls, --ssl-*): a throwaway CA, server and client certificates made with the
 * openssl command at test time, the server started with them, and libcurl talking to it with
 * that CA as its only trust. The model-backed checks use the random-weight Qwen2 model. */
#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"

#include "server_util.h"
#include "test.h"

/* ---- certificates ------------------------------------------------------------------------ */

/* The folder with ca.pem, srv.pem/srv.key (127.0.0.1 and localhost), cli.pem/cli.key (signed
 * by the CA) and rogue.pem/rogue.key (self-signed); NULL when openssl failed. Made once. */
static const char *certs(void) {
    static char dir[512];
    static int made = -1;
    if (made >= 0) return made ? dir : NULL;
    snprintf(dir, sizeof dir, "%s/tls", xi_test_tmpdir());
    char cmd[4096];
    /* P-256 keys: made in milliseconds, and GnuTLS and OpenSSL both take them */
    snprintf(cmd, sizeof cmd,
             "(set -e; mkdir -p %s && cd %s; K='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes';"
             "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj /CN=xinfer-test-ca;"
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > srv.ext;"
             "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext;"
             "for n in srv cli; do openssl req $K -keyout $n.key -out $n.csr -subj /CN=$n;"
             "  openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
             "    -extfile $n.ext -out $n.pem; done;"
             "openssl req -x509 $K -keyout rogue.key -out rogue.pem -days 2 -subj /CN=rogue;"
             "cat srv.pem srv.key > both.pem; echo 'not a certificate' > junk.pem; : > empty.pem) 2>&1",
             dir, dir);
    char *out = NULL;
    const int rc = xi_test_run(cmd, &out);
    if (rc) fprintf(stderr, "    openssl: %s\n", out ? out : "");
    free(out);
    made = rc == 0;
    return made ? dir : NULL;
}

/* dir/name, one slot per name (a server keeps the paths it was started with) */
static const char *file(const char *name) {
    static char names[16][32], paths[16][600];
    int i = 0;
    while (i < 16 && names[i][0] && strcmp(names[i], name)) i++;
    if (i == 16) abort();
    snprintf(names[i], sizeof names[i], "%s", name);
    snprintf(paths[i], sizeof paths[i], "%s/%s", certs(), name);
    return paths[i];
}

/* ---- a client ------------------------------------------------------------------------------ */

typedef struct reply {
    long status;                     /* 0: no HTTP answer */
    CURLcode rc;
    char *body;                      /* heap, never NULL */
} reply;

/* GET (json NULL) or POST url with the test CA as the only trust (ca NULL: the system's) and
 * client certificate name (NULL: none). */
static reply call_as(const char *url, const char *json, const char *ca, const char *client, long timeout_ms) {
    reply r = {0};
    ts_body b = {0};
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    char cert[64], key[64];
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (json) curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    if (ca) curl_easy_setopt(c, CURLOPT_CAINFO, file(ca));
    if (ca) curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
    if (client) {
        snprintf(cert, sizeof cert, "%s.pem", client);
        snprintf(key, sizeof key, "%s.key", client);
        curl_easy_setopt(c, CURLOPT_SSLCERT, file(cert));
        curl_easy_setopt(c, CURLOPT_SSLKEY, file(key));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ts_on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    r.rc = curl_easy_perform(c);
    if (r.rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    r.body = b.p ? b.p : strdup("");
    return r;
}

static reply call(const char *url, const char *json, const char *ca, const char *client) {
    return call_as(url, json, ca, client, 60000);
}

/* POST with the test CA, the client giving up after timeout_ms */
static reply call_within(const char *url, const char *json, long timeout_ms) {
    return call_as(url, json, "ca.pem", NULL, timeout_ms);
}

static char *url(const char *scheme, int port, const char *path) {
    static char slots[4][256];
    static int next;
    char *p = slots[next++ % 4];
    snprintf(p, sizeof slots[0], "%s://127.0.0.1:%d%s", scheme, port, path);
    return p;
}

/* A server without an engine (enough for /version) on TLS; NULL with err filled. */
static xi_server *start_bare(int *port, xi_server_config cfg, char *err, size_t errlen) {
    static const char *const names[] = {"tiny"};
    const int fd = xi_server_listen("127.0.0.1", 0, NULL, port, err, errlen);
    if (fd < 0) return NULL;
    cfg.served_names = names;
    cfg.n_served_names = 1;
    cfg.model_path = "/none";
    cfg.max_body_bytes = 1 << 20;
    return xi_server_start(&cfg, fd, err, errlen);
}

/* ---- tests --------------------------------------------------------------------------------- */

TEST(test_tls_serves_health_and_completions_verified_against_the_test_ca) {
    CHECK(certs());
    server s = {0};
    xi_server_config cfg = {.ssl_certfile = file("srv.pem"), .ssl_keyfile = file("srv.key")};
    CHECK(ts_start_cfg(&s, "models/qwen2-tiny-random", cfg) == 0);
    reply r = call(url("https", s.port, "/health"), NULL, "ca.pem", NULL);
    CHECKF(r.status == 200, "rc %d (%s) status %ld", r.rc, curl_easy_strerror(r.rc), r.status);
    free(r.body);
    r = call(url("https", s.port, "/v1/completions"), "{\"model\": \"tiny\", \"prompt\": \"Hello\", \"max_tokens\": 5, \"temperature\": 0}",
             "ca.pem", NULL);
    CHECKF(r.status == 200 && strstr(r.body, "\"text_completion\"") && strstr(r.body, "\"completion_tokens\":5"),
           "%ld %s", r.status, r.body);
    free(r.body);
    /* a stream: its connection is suspended and resumed between chunks */
    r = call(url("https", s.port, "/v1/chat/completions"),
             "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 8, \"stream\": true}",
             "ca.pem", NULL);
    CHECKF(r.status == 200 && strstr(r.body, "chat.completion.chunk") && strstr(r.body, "data: [DONE]"), "%ld %s",
           r.status, r.body);
    free(r.body);
    /* a client that leaves before its answer is noticed: its request ends as "abort" long
     * before its 3000 tokens are made (no plain-text probe can be sent into a TLS stream) */
    r = call_within(url("https", s.port, "/v1/completions"), "{\"model\": \"tiny\", \"prompt\": \"Hello\", "
                    "\"max_tokens\": 3000, \"ignore_eos\": true}", 300);
    CHECK(r.rc == CURLE_OPERATION_TIMEDOUT);
    free(r.body);
    for (int i = 0; i < 200 && xi_server_in_flight(s.srv); i++) usleep(50 * 1000);
    r = call(url("https", s.port, "/metrics"), NULL, "ca.pem", NULL);
    CHECKF(strstr(r.body, "vllm:request_success_total{finished_reason=\"abort\",model_name=\"tiny\"} 1\n"), "%s", r.body);
    free(r.body);
    /* the certificate really is the test CA's: with the system's CAs it does not verify */
    r = call(url("https", s.port, "/health"), NULL, NULL, NULL);
    CHECKF(r.rc == CURLE_PEER_FAILED_VERIFICATION && r.status == 0, "rc %d status %ld", r.rc, r.status);
    free(r.body);
    /* plain HTTP to the TLS port gets no HTTP answer */
    r = call(url("http", s.port, "/health"), NULL, NULL, NULL);
    CHECKF(r.rc != CURLE_OK && r.status == 0, "rc %d status %ld: %s", r.rc, r.status, r.body);
    free(r.body);
    /* and the server is still there after both */
    r = call(url("https", s.port, "/v1/models"), NULL, "ca.pem", NULL);
    CHECKF(r.status == 200 && strstr(r.body, "\"tiny\""), "%ld %s", r.status, r.body);
    free(r.body);
    ts_stop(&s);
}

/* GET /version over TLS with the client certificate `client` (NULL: none): 1 answered, 0 no
 * HTTP answer (the handshake failed), -1 anything else (printed). */
static int answered(int port, const char *client) {
    reply r = call(url("https", port, "/version"), NULL, "ca.pem", client);
    const int v = r.status == 200 && strstr(r.body, "\"version\"") ? 1 : r.rc != CURLE_OK && !r.status ? 0 : -1;
    if (v < 0) fprintf(stderr, "    client %s: rc %d status %ld: %s\n", client, r.rc, r.status, r.body);
    free(r.body);
    return v;
}

/* A server without an engine with client certificates as reqs says; port in *port. */
static xi_server *start_reqs(int *port, int reqs) {
    char err[512];
    xi_server_config cfg = {.ssl_certfile = file("srv.pem"), .ssl_keyfile = file("srv.key"),
                            .ssl_ca_certs = file("ca.pem"), .ssl_cert_reqs = reqs};
    xi_server *srv = start_bare(port, cfg, err, sizeof err);
    if (!srv) fprintf(stderr, "    %s\n", err);
    return srv;
}

TEST(test_tls_cert_reqs_2_demands_a_client_certificate_of_the_ca) {
    CHECK(certs());
    int port;
    xi_server *srv = start_reqs(&port, 2);
    CHECK(srv);
    CHECK_EQ(answered(port, "cli"), 1);
    CHECK_EQ(answered(port, NULL), 0);    /* none: the handshake fails */
    CHECK_EQ(answered(port, "rogue"), 0); /* not the CA's */
    xi_server_free(srv);
}

TEST(test_tls_cert_reqs_1_checks_a_client_certificate_only_when_one_is_sent) {
    CHECK(certs());
    int port;
    xi_server *srv = start_reqs(&port, 1);
    CHECK(srv);
    CHECK_EQ(answered(port, NULL), 1);
    CHECK_EQ(answered(port, "cli"), 1);
    CHECK_EQ(answered(port, "rogue"), 0);
    xi_server_free(srv);
    /* 0 (the default) with CAs given asks for nothing: a rogue certificate is never looked at */
    srv = start_reqs(&port, 0);
    CHECK(srv);
    CHECK_EQ(answered(port, "rogue"), 1);
    xi_server_free(srv);
}

TEST(test_tls_key_inside_the_certificate_file_serves) {
    CHECK(certs());
    char err[512];
    int port;
    xi_server *srv = start_bare(&port, (xi_server_config){.ssl_certfile = file("both.pem")}, err, sizeof err);
    CHECKF(srv, "%s", err);
    CHECK_EQ(answered(port, NULL), 1);
    xi_server_free(srv);
}

TEST(test_tls_bad_files_are_one_line_errors_naming_the_file) {
    CHECK(certs());
    static const struct {
        const char *cert, *key, *ca;
        int reqs;
        const char *named, *says;    /* the file (or flag) the error names, and a word of it */
    } cases[] = {
        {"missing.pem", "srv.key", NULL, 0, "missing.pem", "No such file"},
        {"junk.pem", "srv.key", NULL, 0, "junk.pem", "--ssl-certfile"},
        {"empty.pem", "srv.key", NULL, 0, "empty.pem", "empty"},
        {"srv.pem", "junk.pem", NULL, 0, "junk.pem", "--ssl-keyfile"},
        {"srv.pem", "cli.key", NULL, 0, "cli.key", "does not match"},
        {"srv.pem", "srv.key", "junk.pem", 2, "junk.pem", "--ssl-ca-certs"},
        {"srv.pem", "srv.key", "missing-ca.pem", 1, "missing-ca.pem", "No such file"},
        {"srv.pem", NULL, NULL, 0, "srv.pem", "private key"}, /* no key in the certificate file */
        {"srv.pem", "srv.key", NULL, 2, "--ssl-ca-certs", "--ssl-cert-reqs"},
        {NULL, "srv.key", NULL, 0, "--ssl-certfile", "--ssl-keyfile"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        int port;
        xi_server_config cfg = {.ssl_certfile = cases[i].cert ? file(cases[i].cert) : NULL,
                                .ssl_keyfile = cases[i].key ? file(cases[i].key) : NULL,
                                .ssl_ca_certs = cases[i].ca ? file(cases[i].ca) : NULL,
                                .ssl_cert_reqs = cases[i].reqs};
        xi_server *srv = start_bare(&port, cfg, err, sizeof err);
        CHECKF(!srv, "case %zu started", i);
        xi_server_free(srv);
        CHECKF(strstr(err, cases[i].named) && strstr(err, cases[i].says) && !strchr(err, '\n'), "case %zu: %s", i, err);
    }
}

/* `xinfer serve` with vLLM's flags: the HTTPS URL in its start-up line, the client
 * certificate demanded; a bad file stops it with one line naming the file. */
TEST(test_tls_xinfer_serve_takes_the_ssl_flags) {
    CHECK(certs());
    char *model = xi_test_data("models/qwen2-tiny-random");
    const char *log = file("serve.log");
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(127);
        execl(xi_test_bin(), xi_test_bin(), "serve", model, "--host", "127.0.0.1", "--port", "0", "--threads", "1",
              "--kv-cache-memory-bytes", "8000000", "--ssl-certfile", file("srv.pem"), "--ssl-keyfile",
              file("srv.key"), "--ssl-ca-certs", file("ca.pem"), "--ssl-cert-reqs", "2", (char *)NULL);
        _exit(127);
    }
    static const char line[] = "Starting server on https://127.0.0.1:";
    int port = 0;
    for (int tries = 0; pid > 0 && !port && tries < 400; tries++) {
        usleep(50000);
        char *text = xi_read_file(log, NULL, NULL, 0);
        const char *at = text ? strstr(text, line) : NULL;
        if (at) port = atoi(at + strlen(line));
        free(text);
        if (waitpid(pid, NULL, WNOHANG) == pid) break;
    }
    CHECKF(port > 0, "no start-up line in %s", log);
    CHECK_EQ(answered(port, "cli"), 1);
    CHECK_EQ(answered(port, NULL), 0);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);

    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s serve %s --port 0 --ssl-certfile %s --ssl-keyfile %s 2>&1; echo \"rc=$?\"",
             xi_test_bin(), model, file("srv.pem"), file("cli.key"));
    xi_test_run(cmd, &out);
    CHECKF(out && strstr(out, "cli.key: the key does not match") && strstr(out, "\nrc=1\n"), "%s", out ? out : "");
    free(out);
    free(model);
}
