/* `xinfer bench` as a user runs it: flags, exit status, the table on stdout, the files it
 * writes; against the fake server of test_loadgen_fake.h and against `xinfer serve` with
 * stories260K on loopback. */
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"
#include "test_loadgen_fake.h"

/* Run `xinfer bench ARGS` with stderr into DIR/stderr; returns the exit status, stdout in *out. */
static int bench(const char *args, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s bench %s 2>%s/stderr", xi_test_bin(), args, xi_test_tmpdir());
    return xi_test_run(cmd, out);
}

static char *tmp_path(const char *name) { return xi_path_join(xi_test_tmpdir(), name); }

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* Checks on the three files of a sweep of n_levels levels; returns NULL or what is wrong. */
static const char *check_files(const char *json_path, const char *csv_path, const char *svg_path,
                               int n_levels, json_t **json_out) {
    char *csv = xi_read_file(csv_path, NULL, NULL, 0);
    char *svg = xi_read_file(svg_path, NULL, NULL, 0);
    json_t *j = json_load_file(json_path, 0, NULL);
    const char *bad = NULL;
    if (!j) bad = "JSON does not parse";
    else if ((int)json_array_size(json_object_get(j, "levels")) != n_levels) bad = "JSON level count";
    else if (!json_is_object(json_object_get(j, "config"))) bad = "JSON config";
    else if (!csv || count_lines(csv) != n_levels + 1 || strncmp(csv, "concurrency,", 12)) bad = "CSV shape";
    else if (!svg || strncmp(svg, "<?xml", 5) || !strstr(svg, "<svg") || !strstr(svg, "</svg>\n"))
        bad = "SVG shape";
    free(csv), free(svg);
    if (json_out && !bad) *json_out = j;
    else json_decref(j);
    return bad;
}

/* A run of `xinfer bench` with the given flags against a fake server started with o, writing
 * the three output files in the temporary folder: exit status, stdout and the paths. */
typedef struct bench_run {
    fake_oai *f;
    int rc;
    char *out, *js, *csv, *svg;
} bench_run;

static int bench_fake(const fake_oai_opts *o, const char *flags, bench_run *r) {
    memset(r, 0, sizeof *r);
    if (!(r->f = fake_oai_start(o))) return -1;
    r->js = tmp_path("r.json"), r->csv = tmp_path("r.csv"), r->svg = tmp_path("r.svg");
    char args[1024];
    snprintf(args, sizeof args, "--url %s --model fake-model %s --out %s --csv %s --svg %s",
             fake_oai_url(r->f), flags, r->js, r->csv, r->svg);
    r->rc = bench(args, &r->out);
    return 0;
}

static void bench_run_free(bench_run *r) {
    free(r->out), free(r->js), free(r->csv), free(r->svg);
    fake_oai_stop(r->f);
}

TEST(test_bench_cli_prints_a_table_and_writes_json_csv_svg) {
    fake_oai_opts o = {.tokens = 4, .first_delay_ms = 20, .delay_ms = 5};
    bench_run r;
    CHECK(bench_fake(&o, "--concurrency 1,2 --num-requests 4 --output-len 4 --prompt-len 4:12 "
                         "--shared-prefix-len 6 --seed 9", &r) == 0);
    CHECKF(r.rc == 0, "exit %d: %s", r.rc, r.out);
    CHECKF(strstr(r.out, "TTFT p50/p99 ms") && strstr(r.out, "4/4") && !strstr(r.out, "rate/s"),
           "%s", r.out);
    CHECK_EQ(count_lines(r.out), 3);
    json_t *j = NULL;
    const char *bad = check_files(r.js, r.csv, r.svg, 2, &j);
    CHECKF(!bad, "%s", bad);
    json_t *cfg = json_object_get(j, "config");
    CHECK_EQ(json_integer_value(json_object_get(cfg, "prompt_len_min")), 4);
    CHECK_EQ(json_integer_value(json_object_get(cfg, "prompt_len_max")), 12);
    CHECK_EQ(json_integer_value(json_object_get(cfg, "shared_prefix_len")), 6);
    CHECK_STR(json_string_value(json_object_get(cfg, "seed")), "9");
    json_t *l1 = json_array_get(json_object_get(j, "levels"), 1);
    CHECK_EQ(json_integer_value(json_object_get(l1, "concurrency")), 2);
    CHECK_EQ(json_integer_value(json_object_get(l1, "output_tokens")), 16);
    CHECK(json_number_value(json_object_get(json_object_get(l1, "ttft_ms"), "p50")) >= 19);
    json_decref(j);
    /* Not a terminal: plain log lines, no carriage-return progress bar. */
    char *se = tmp_path("stderr"), *err = xi_read_file(se, NULL, NULL, 0);
    CHECKF(err && strstr(err, "bench: concurrency 2: done") && !strchr(err, '\r'), "%s", err);
    free(err), free(se);
    bench_run_free(&r);
}

TEST(test_bench_cli_exits_2_and_reports_a_refusing_server_without_crashing) {
    char url[64];
    int fd;
    CHECK(fake_oai_refusing_url(url, sizeof url, &fd) == 0);
    char *js = tmp_path("r.json"), *csv = tmp_path("r.csv"), *svg = tmp_path("r.svg");
    char args[1024], *out = NULL;
    snprintf(args, sizeof args,
             "--url %s --model m --concurrency 1,4 --num-requests 3 --out %s --csv %s --svg %s",
             url, js, csv, svg);
    int rc = bench(args, &out);
    CHECKF(rc == 2, "exit %d: %s", rc, out);
    CHECKF(strstr(out, "concurrency 1: 3 errors (connect 3); first: connect: ") &&
           strstr(out, "concurrency 4: 3 errors (connect 3)"), "%s", out);
    json_t *j = NULL;
    const char *bad = check_files(js, csv, svg, 2, &j);
    CHECKF(!bad, "%s", bad);
    json_t *l0 = json_array_get(json_object_get(j, "levels"), 0);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(l0, "errors"), "connect")), 3);
    CHECK(json_is_null(json_object_get(json_object_get(l0, "ttft_ms"), "p50")));
    json_decref(j);
    char *s = xi_read_file(svg, NULL, NULL, 0);
    CHECK(s && strstr(s, "no data"));
    free(s), free(out), free(js), free(csv), free(svg);
    close(fd);
}

TEST(test_bench_cli_counts_server_errors_and_continues_to_the_next_level) {
    fake_oai_opts o = {.tokens = 4, .status_every = 2, .status = 503};
    fake_oai *f = fake_oai_start(&o);
    CHECK(f);
    char args[512], *out = NULL;
    snprintf(args, sizeof args, "--url %s/v1 --model m --concurrency 1,2 --num-requests 4 --output-len 4",
             fake_oai_url(f));
    int rc = bench(args, &out);
    CHECKF(rc == 2, "exit %d: %s", rc, out);
    CHECKF(strstr(out, "2/4") && strstr(out, "http_5xx 2") && strstr(out, "HTTP 503: fake failure"),
           "%s", out);
    CHECK_EQ(fake_oai_requests(f), 8);
    free(out);
    fake_oai_stop(f);
}

TEST(test_bench_cli_finds_the_model_in_v1_models_when_none_is_given) {
    fake_oai_opts o = {.tokens = 2};
    fake_oai *f = fake_oai_start(&o);
    CHECK(f);
    char args[512], *out = NULL;
    snprintf(args, sizeof args, "--url %s --concurrency 1 --num-requests 1 --output-len 2 --api-key sk-x",
             fake_oai_url(f));
    int rc = bench(args, &out);
    CHECKF(rc == 0, "exit %d: %s", rc, out);
    char *body = fake_oai_last_body(f), *auth = fake_oai_last_auth(f);
    CHECKF(body && strstr(body, "\"model\":\"fake-model\""), "%s", body);
    CHECK_STR(auth, "Bearer sk-x");
    free(body), free(auth), free(out);
    fake_oai_stop(f);
}

TEST(test_bench_cli_sweeps_request_rates_open_loop_with_a_rate_column) {
    fake_oai_opts o = {.tokens = 3, .first_delay_ms = 5, .delay_ms = 2};
    bench_run r;
    CHECK(bench_fake(&o, "--request-rate 40,inf --max-concurrency 3 --num-requests 6 "
                         "--output-len 3 --prompt-len 4", &r) == 0);
    CHECKF(r.rc == 0, "exit %d: %s", r.rc, r.out);
    CHECKF(strstr(r.out, "rate/s") && strstr(r.out, "inf") && strstr(r.out, "6/6"), "%s", r.out);
    CHECK_EQ(count_lines(r.out), 3);
    json_t *j = NULL;
    const char *bad = check_files(r.js, r.csv, r.svg, 2, &j);
    CHECKF(!bad, "%s", bad);
    json_t *l0 = json_array_get(json_object_get(j, "levels"), 0);
    json_t *l1 = json_array_get(json_object_get(j, "levels"), 1);
    CHECK(json_number_value(json_object_get(l0, "request_rate")) == 40.0);
    CHECK_STR(json_string_value(json_object_get(l1, "request_rate")), "inf");
    CHECK_EQ(json_integer_value(json_object_get(l0, "concurrency")), 3);
    CHECK(json_number_value(json_object_get(json_object_get(j, "config"), "burstiness")) == 1.0);
    /* Six arrivals 1/40 s apart on average: the open level cannot finish in much less than
     * the five gaps before the last one; vanishingly unlikely under 20 ms for this seed. */
    CHECKF(json_number_value(json_object_get(l0, "duration_s")) > 0.02, "duration %g",
           json_number_value(json_object_get(l0, "duration_s")));
    json_decref(j);
    char *csvt = xi_read_file(r.csv, NULL, NULL, 0), *svgt = xi_read_file(r.svg, NULL, NULL, 0);
    CHECKF(csvt && strstr(csvt, "concurrency,request_rate,") && strstr(csvt, "\n3,40,") &&
           strstr(csvt, "\n3,inf,"), "%s", csvt);
    CHECKF(svgt && strstr(svgt, "request rate (requests/s)"), "svg axis");
    char *se = tmp_path("stderr"), *err = xi_read_file(se, NULL, NULL, 0);
    CHECKF(err && strstr(err, "bench: rate 40/s: done"), "%s", err);
    free(err), free(se), free(csvt), free(svgt);
    bench_run_free(&r);
}

TEST(test_bench_cli_rejects_bad_flags_with_exit_1) {
    static const char *const bad[] = {
        "--url http://127.0.0.1:1 --model m --request-rate 0",
        "--url http://127.0.0.1:1 --model m --request-rate -2",
        "--url http://127.0.0.1:1 --model m --request-rate 1,fast",
        "--url http://127.0.0.1:1 --model m --request-rate 1,2 --concurrency 1,2",
        "--url http://127.0.0.1:1 --model m --request-rate 1 --burstiness 0",
        "--url http://127.0.0.1:1 --model m --concurrency 0",
        "--url http://127.0.0.1:1 --model m --concurrency 1,x",
        "--url http://127.0.0.1:1 --model m --prompt-len 9:3",
        "--url http://127.0.0.1:1 --model m --endpoint embeddings",
        "--url http://127.0.0.1:1 --model m --output-len",
        "--url ftp://127.0.0.1:1 --model m",
        "--url http://127.0.0.1:1 --model m --frobnicate",
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(bad); i++) {
        char *out = NULL;
        int rc = bench(bad[i], &out);
        CHECKF(rc == 1, "'%s': exit %d", bad[i], rc);
        char *se = tmp_path("stderr"), *err = xi_read_file(se, NULL, NULL, 0);
        CHECKF(err && strstr(err, "xinfer bench: "), "'%s': %s", bad[i], err);
        free(out), free(se), free(err);
    }
    char *out = NULL;
    CHECK(bench("--help", &out) == 0 && strstr(out, "--shared-prefix-len"));
    free(out);
}

/* ---- against xinfer serve ------------------------------------------------------------------ */

/* Start `xinfer serve` on a free loopback port; returns its pid and fills url, or -1. */
static pid_t start_serve(const char *model, char *url, size_t urllen, char *why, size_t whylen) {
    /* One compute thread: the test machine's cores are shared, and a thread pool that waits
     * for busy siblings turns a sub-second sweep into many seconds under load. */
    char *log = tmp_path("serve.log");
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(127);
        execl(xi_test_bin(), xi_test_bin(), "serve", model, "--host", "127.0.0.1", "--port", "0",
              "--kv-cache-memory-bytes", "8000000", "--threads", "1", (char *)NULL);
        _exit(127);
    }
    /* The server logs the port it bound; wait for it (model load takes well under a second). */
    for (int tries = 0; pid > 0 && tries < 200; tries++) {
        usleep(50000);
        char *text = xi_read_file(log, NULL, NULL, 0);
        const char *at = text ? strstr(text, "Starting server on http://127.0.0.1:") : NULL;
        if (at) {
            int port = atoi(at + strlen("Starting server on http://127.0.0.1:"));
            snprintf(url, urllen, "http://127.0.0.1:%d", port);
            free(text);
            free(log);
            return pid;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            snprintf(why, whylen, "serve exited: %s", text ? text : "");
            free(text);
            free(log);
            return -1;
        }
        free(text);
    }
    snprintf(why, whylen, "serve did not start in 10 s");
    if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    free(log);
    return -1;
}

TEST(test_bench_cli_sweeps_xinfer_serve_with_exact_token_counts) {
    char *model = xi_test_data("models/stories260K"), url[64], why[2048] = "";
    pid_t pid = start_serve(model, url, sizeof url, why, sizeof why);
    CHECKF(pid > 0, "%s", why);
    char *js = tmp_path("r.json"), *csv = tmp_path("r.csv"), *svg = tmp_path("r.svg");
    char args[2048], *out = NULL;
    snprintf(args, sizeof args,
             "--url %s --model %s --concurrency 1,4 --num-requests 8 --output-len 16 --prompt-len 24 "
             "--shared-prefix-len 8 --timeout 30 --out %s --csv %s --svg %s",
             url, model, js, csv, svg);
    int rc = bench(args, &out);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    CHECKF(rc == 0, "exit %d: %s", rc, out);
    json_t *j = NULL;
    const char *bad = check_files(js, csv, svg, 2, &j);
    CHECKF(!bad, "%s", bad);
    json_t *levels = json_object_get(j, "levels");
    for (size_t i = 0; i < 2; i++) {
        json_t *l = json_array_get(levels, i);
        CHECK_EQ(json_integer_value(json_object_get(l, "completed")), 8);
        CHECK_EQ(json_integer_value(json_object_get(json_object_get(l, "errors"), "total")), 0);
        /* ignore_eos: every request generates exactly output-len tokens, reported in usage. */
        CHECK_EQ(json_integer_value(json_object_get(l, "output_tokens")), 8 * 16);
        CHECK_EQ(json_integer_value(json_object_get(l, "usage_reported")), 8);
        CHECK(json_integer_value(json_object_get(l, "input_tokens")) >= 8 * 32);
        double ttft = json_number_value(json_object_get(json_object_get(l, "ttft_ms"), "p50"));
        double tpot = json_number_value(json_object_get(json_object_get(l, "tpot_ms"), "p50"));
        double e2e = json_number_value(json_object_get(json_object_get(l, "e2e_ms"), "p50"));
        CHECKF(ttft > 0 && tpot > 0 && e2e > ttft, "ttft %g tpot %g e2e %g", ttft, tpot, e2e);
        CHECK(json_number_value(json_object_get(l, "output_throughput")) > 0);
        CHECK(json_number_value(json_object_get(l, "request_throughput")) > 0);
        CHECK_EQ(json_integer_value(json_object_get(json_object_get(l, "itl_ms"), "count")) > 0, 1);
    }
    json_decref(j);
    free(out), free(js), free(csv), free(svg), free(model);
}

TEST(test_bench_cli_chat_endpoint_against_xinfer_serve_with_a_chat_template) {
    char *model = xi_test_data("models/qwen2-tiny-random"), url[64], why[2048] = "";
    pid_t pid = start_serve(model, url, sizeof url, why, sizeof why);
    CHECKF(pid > 0, "%s", why);
    char *js = tmp_path("r.json"), args[2048], *out = NULL;
    snprintf(args, sizeof args,
             "--url %s --endpoint chat --concurrency 2 --num-requests 4 --output-len 8 --prompt-len 16 "
             "--timeout 30 --out %s", url, js);
    int rc = bench(args, &out);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    CHECKF(rc == 0, "exit %d: %s", rc, out);
    json_t *j = json_load_file(js, 0, NULL);
    json_t *l = json_array_get(json_object_get(j, "levels"), 0);
    CHECK(l);
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "config"), "endpoint")), "chat");
    CHECK_EQ(json_integer_value(json_object_get(l, "completed")), 4);
    CHECK_EQ(json_integer_value(json_object_get(l, "output_tokens")), 4 * 8);
    /* 16 words are 16 Qwen tokens; the chat template adds its own around them. */
    CHECK(json_integer_value(json_object_get(l, "input_tokens")) > 4 * 16);
    CHECK(json_number_value(json_object_get(json_object_get(l, "ttft_ms"), "p50")) > 0);
    json_decref(j);
    free(out), free(js), free(model);
}
