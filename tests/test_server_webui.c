/* The web UI through real sockets with curl: every file of web/ is in the binary byte for
 * byte (and its gzip form unpacks to it), content types, ETag revalidation, gzip only when
 * the client takes it, no key for the pages but the key for /v1, --no-webui, and the open
 * status endpoint. The pages themselves run in a browser in tests/webui. */
#include <stdarg.h>
#include <stdlib.h>

#include "server/serve_args.h"
#include "server/server.h"
#include "server/webui.h"
#include "test.h"

static xi_server *start(int *port, const char *const *keys, int n_keys, int no_webui) {
    static const char *const names[] = {"tiny"};
    char err[256];
    int fd = xi_server_listen("127.0.0.1", 0, NULL, port, err, sizeof err);
    if (fd < 0) return NULL;
    xi_server_config cfg = {.served_names = names, .n_served_names = 1, .model_path = "/secret/path",
                            .api_keys = keys, .n_api_keys = n_keys, .max_body_bytes = 1 << 20,
                            .no_webui = no_webui};
    return xi_server_start(&cfg, fd, err, sizeof err);
}

/* GET path with curl's extra opts: the status, the headers into *headers and the body into
 * the file body_path (both under the test's temporary folder). */
static int get(int port, const char *opts, const char *path, char **headers, const char *body_path) {
    const char *dir = xi_test_tmpdir();
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "rm -f %s; curl -s -m 10 -D %s/headers -o %s -w '%%{http_code}' %s "
             "http://127.0.0.1:%d%s; echo; cat %s/headers",
             body_path, dir, body_path, opts, port, path, dir);
    char *out = NULL;
    xi_test_run(cmd, &out);
    if (!out) return -1;
    *headers = out;
    return atoi(out);
}

static int sh_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_ok(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return xi_test_run(cmd, NULL) == 0;
}

static char *tmp_path(const char *name) {
    static char p[8][512];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 512, "%s/%s", xi_test_tmpdir(), name);
    return s;
}

/* Every page of the web UI answers status when fetched without a key. */
static void expect_pages(int port, int status, int with_status_endpoint) {
    static const char *const pages[] = {"/", "/dashboard", "/webui/chat.js", "/webui/status"};
    char *h;
    for (int i = 0; i < 3 + with_status_endpoint; i++) {
        int got = get(port, "", pages[i], &h, tmp_path("ignored"));
        CHECKF(got == status, "GET %s: %d, not %d", pages[i], got, status);
    }
}

TEST(test_webui_every_file_of_web_is_embedded_and_its_gzip_unpacks_to_it) {
    CHECK(xi_webui_n_assets >= 6);
    for (int i = 0; i < xi_webui_n_assets; i++) {
        const xi_webui_asset *a = &xi_webui_assets[i];
        char src[256], *gz = tmp_path("asset.gz");
        snprintf(src, sizeof src, "web/%s", a->name);
        FILE *f = fopen(gz, "wb");
        CHECK(f);
        CHECK(fwrite(a->gz, 1, a->gz_len, f) == a->gz_len);
        fclose(f);
        f = fopen(src, "rb");
        CHECKF(f, "%s: cannot open (run the tests from the repository root)", src);
        char *buf = malloc(a->raw_len + 1);
        size_t n = fread(buf, 1, a->raw_len + 1, f);
        fclose(f);
        CHECKF(n == a->raw_len && !memcmp(buf, a->raw, n), "%s: the embedded bytes differ from the file", src);
        free(buf);
        CHECKF(sh_ok("gzip -dc %s | cmp -s - %s", gz, src), "%s: its gzip form does not unpack to it", src);
        CHECKF(a->gz_len < a->raw_len, "%s: gzip saves nothing", src);
        CHECKF(a->etag[0] == '"' && strlen(a->etag) == 22, "%s: ETag %s", src, a->etag);
    }
    CHECK(xi_webui_find("/") && !strcmp(xi_webui_find("/")->name, "chat.html"));
    CHECK(xi_webui_find("/dashboard") && !strcmp(xi_webui_find("/dashboard")->name, "dashboard.html"));
    CHECK(xi_webui_find("/webui/chat.js"));
    CHECK(!xi_webui_find("/webui/") && !xi_webui_find("/webui/../Makefile") && !xi_webui_find("/chat.html"));
}

TEST(test_webui_accept_encoding_takes_gzip_unless_refused) {
    CHECK(xi_webui_accepts_gzip("gzip"));
    CHECK(xi_webui_accepts_gzip("gzip, deflate, br"));
    CHECK(xi_webui_accepts_gzip("deflate, GZip;q=0.5"));
    CHECK(xi_webui_accepts_gzip("br, *"));
    CHECK(xi_webui_accepts_gzip("gzip; q=0.001"));
    CHECK(!xi_webui_accepts_gzip(NULL));
    CHECK(!xi_webui_accepts_gzip(""));
    CHECK(!xi_webui_accepts_gzip("identity"));
    CHECK(!xi_webui_accepts_gzip("x-gzip"));
    CHECK(!xi_webui_accepts_gzip("gzipx"));
    CHECK(!xi_webui_accepts_gzip("gzip;q=0"));
    CHECK(!xi_webui_accepts_gzip("gzip; q=0.000, identity"));
    CHECK(!xi_webui_accepts_gzip("br, *;q=0"));
}

TEST(test_webui_pages_have_their_type_gzip_and_revalidate_by_etag) {
    int port;
    xi_server *s = start(&port, NULL, 0, 0);
    CHECK(s);
    char *h, *body = tmp_path("body");
    /* curl --compressed asks for gzip and unpacks: the same bytes as the file */
    CHECK_EQ(get(port, "--compressed", "/", &h, body), 200);
    CHECKF(strcasestr(h, "content-type: text/html; charset=utf-8") && strcasestr(h, "content-encoding: gzip") &&
           strcasestr(h, "vary: accept-encoding") && strcasestr(h, "cache-control: no-cache") &&
           strcasestr(h, "content-security-policy: default-src 'none'"), "%s", h);
    CHECK(sh_ok("cmp -s %s %s", body, "web/chat.html"));
    /* without Accept-Encoding: the file as it is */
    CHECK_EQ(get(port, "", "/dashboard", &h, body), 200);
    CHECKF(!strcasestr(h, "content-encoding") && strcasestr(h, "text/html"), "%s", h);
    CHECK(sh_ok("cmp -s %s %s", body, "web/dashboard.html"));
    CHECK_EQ(get(port, "--compressed", "/webui/chat.js", &h, body), 200);
    CHECKF(strcasestr(h, "content-type: text/javascript"), "%s", h);
    CHECK(sh_ok("cmp -s %s %s", body, "web/chat.js"));
    CHECK_EQ(get(port, "-H 'Accept-Encoding: gzip;q=0'", "/webui/style.css", &h, body), 200);
    CHECKF(strcasestr(h, "content-type: text/css") && !strcasestr(h, "content-encoding"), "%s", h);
    CHECK(sh_ok("cmp -s %s %s", body, "web/style.css"));

    /* the ETag it gave revalidates to an empty 304; another one gets the file */
    const xi_webui_asset *a = xi_webui_find("/webui/style.css");
    CHECKF(strstr(h, a->etag), "%s lacks ETag %s", h, a->etag);
    char opt[128];
    snprintf(opt, sizeof opt, "-H 'If-None-Match: %s'", a->etag);
    CHECK_EQ(get(port, opt, "/webui/style.css", &h, body), 304);
    CHECK(sh_ok("test ! -s %s", body));
    CHECK_EQ(get(port, "-H 'If-None-Match: \"other\"'", "/webui/style.css", &h, body), 200);
    /* HEAD: the headers only; a POST to a page is not a page */
    CHECK_EQ(get(port, "-I", "/", &h, body), 200);
    CHECKF(strcasestr(h, "text/html"), "%s", h);
    CHECK_EQ(get(port, "-X POST -d x", "/", &h, body), 404);
    CHECK_EQ(get(port, "", "/webui/nope.js", &h, body), 404);
    xi_server_free(s);
}

TEST(test_webui_needs_no_key_but_v1_does_and_status_tells_no_secret) {
    static const char *const keys[] = {"sekrit-key"};
    int port;
    xi_server *s = start(&port, keys, 1, 0);
    CHECK(s);
    char *h, *body = tmp_path("body");
    expect_pages(port, 200, 0);
    CHECK(!xi_test_failed());
    CHECK_EQ(get(port, "", "/v1/models", &h, body), 401);
    CHECK_EQ(get(port, "", "/webui/status", &h, body), 200);
    CHECKF(strcasestr(h, "application/json") && strcasestr(h, "cache-control: no-store"), "%s", h);
    char *st = NULL;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cat %s", body);
    xi_test_run(cmd, &st);
    /* no model is loaded yet: the dashboard is told so */
    CHECKF(st && strstr(st, "\"api_key_required\":true") && strstr(st, "\"loading\":true") &&
           strstr(st, "\"model\":\"tiny\""), "%s", st);
    CHECKF(!strstr(st, "sekrit") && !strstr(st, "/secret/path"), "%s", st);
    free(st);
    xi_server_free(s);
}

TEST(test_webui_no_webui_turns_the_pages_off) {
    int port;
    xi_server *s = start(&port, NULL, 0, 1);
    CHECK(s);
    expect_pages(port, 404, 1);
    char *h;
    CHECK_EQ(get(port, "", "/version", &h, tmp_path("ignored")), 200);
    xi_server_free(s);
}

static int is_dir(const char *p) { (void)p; return 1; }
static const char *no_env(const char *name) { (void)name; return NULL; }

TEST(test_webui_is_on_by_default_and_no_webui_turns_it_off) {
    xi_serve_args a;
    char err[256] = "";
    char *on[] = {"serve", "/m", NULL}, *off[] = {"serve", "/m", "--no-webui", NULL};
    CHECKF(xi_serve_args_parse(&a, 2, on, no_env, is_dir, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(a.no_webui, 0);
    CHECKF(xi_serve_args_parse(&a, 3, off, no_env, is_dir, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(a.no_webui, 1);
    CHECK(strstr(xi_serve_args_help(), "--no-webui"));
}
