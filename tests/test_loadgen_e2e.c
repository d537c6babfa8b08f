/* The load generator against the fake streaming server on loopback: timings it must measure,
 * concurrency it must hold, and every way a server can fail, counted and never fatal. Delays
 * are chosen so that lower bounds are exact (the server sleeps at least that long) and upper
 * bounds leave a loaded two-core machine hundreds of milliseconds of slack. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "loadgen/loadgen.h"
#include "test.h"
#include "test_loadgen_fake.h"

static void config_for(xi_loadgen_config *c, const char *url, const int *levels, int n_levels,
                       int num_requests, int output_len) {
    xi_loadgen_config_default(c);
    c->url = url;
    c->model = "fake-model";
    c->concurrency = levels;
    c->n_levels = n_levels;
    c->num_requests = num_requests;
    c->output_len = output_len;
    c->prompt_len_min = c->prompt_len_max = 8;
    c->timeout_s = 10;
}

static void free_levels(xi_loadgen_level *lv, int n) {
    for (int i = 0; i < n; i++) xi_loadgen_level_free(&lv[i]);
}

/* A fake server and a sweep against it. */
typedef struct sweep {
    fake_oai *f;
    xi_loadgen_config c;
    int levels[4];
    xi_loadgen_level lv[4];
    char err[256];
} sweep;

static int sweep_fake(sweep *s, const fake_oai_opts *o, const int *levels, int n_levels,
                      int num_requests, int output_len) {
    memset(s, 0, sizeof *s);
    if (n_levels > 4 || !(s->f = fake_oai_start(o))) return -1;
    memcpy(s->levels, levels, sizeof(int) * (size_t)n_levels);
    config_for(&s->c, fake_oai_url(s->f), s->levels, n_levels, num_requests, output_len);
    return 0;
}

static int sweep_run(sweep *s) { return xi_loadgen_run(&s->c, s->lv, NULL, NULL, s->err, sizeof s->err); }

static void sweep_free(sweep *s) {
    free_levels(s->lv, s->c.n_levels);
    fake_oai_stop(s->f);
}

TEST(test_loadgen_measures_ttft_itl_tpot_and_tokens_of_delayed_streams) {
    sweep s;
    fake_oai_opts o = {.tokens = 8, .first_delay_ms = 60, .delay_ms = 15};
    CHECK(sweep_fake(&s, &o, (int[]){1, 2}, 2, 4, 8) == 0);
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    for (int l = 0; l < 2; l++) {
        xi_loadgen_level *v = &s.lv[l];
        CHECKF(v->completed == 4 && v->n_errors == 0, "level %d: %d ok, first error %s", l,
               v->completed, v->first_error ? v->first_error : "-");
        CHECK_EQ(v->output_tokens, 32);
        CHECK_EQ(v->usage_reported, 4);
        CHECK_EQ(v->input_tokens, 4 * 8);
        CHECKF(v->ttft.min >= 59 && v->ttft.p50 < 60 + 400, "ttft %.1f..%.1f", v->ttft.min, v->ttft.p50);
        CHECKF(v->itl.n == 4 * 7 && v->itl.p50 >= 14 && v->itl.p50 < 15 + 200, "itl n %zu p50 %.1f",
               v->itl.n, v->itl.p50);
        CHECKF(v->tpot.min >= 14 && v->tpot.p50 < 15 + 200, "tpot %.1f", v->tpot.min);
        CHECKF(v->e2e.min >= 60 + 7 * 15 - 1, "e2e %.1f", v->e2e.min);
        CHECK(v->ttft.p50 <= v->ttft.p90 && v->ttft.p90 <= v->ttft.p99 && v->ttft.p99 <= v->ttft.max);
        CHECK(v->output_throughput > 0 && v->request_throughput > 0);
        CHECK_NEAR(v->output_throughput, v->output_tokens / v->duration_s, 1e-6);
    }
    /* Four 165 ms requests one at a time take at least 0.66 s; two at a time about half. */
    CHECKF(s.lv[0].duration_s >= 0.66 && s.lv[1].duration_s >= 0.33 &&
           s.lv[1].duration_s < s.lv[0].duration_s,
           "durations %.3f %.3f", s.lv[0].duration_s, s.lv[1].duration_s);
    CHECK_EQ(fake_oai_requests(s.f), 8);
    sweep_free(&s);
}

TEST(test_loadgen_keeps_exactly_the_level_concurrency_in_flight) {
    /* 64 streams on one client thread as well: the multi loop must not serialise them. */
    static const int concs[] = {3, 4, 64};
    for (size_t t = 0; t < XI_ARRAY_LEN(concs); t++) {
        int conc = concs[t], n = conc * 3;
        sweep s;
        fake_oai_opts o = {.tokens = 3, .first_delay_ms = 100, .delay_ms = 5};
        CHECK(sweep_fake(&s, &o, &conc, 1, n, 3) == 0);
        CHECKF(sweep_run(&s) == 0, "%s", s.err);
        CHECKF(s.lv[0].completed == n, "%d of %d, first error %s", s.lv[0].completed, n,
               s.lv[0].first_error ? s.lv[0].first_error : "-");
        CHECK_EQ(fake_oai_requests(s.f), n);
        CHECK_EQ(fake_oai_max_inflight(s.f), conc);
        sweep_free(&s);
    }
}

TEST(test_loadgen_open_loop_sends_each_request_when_it_is_due_never_before) {
    fake_oai_opts o = {.tokens = 2, .first_delay_ms = 5, .delay_ms = 2};
    fake_oai *f = fake_oai_start(&o);
    CHECK(f);
    enum { N = 12 };
    int conc = N;
    double rate = 25.0, due[N];
    xi_loadgen_config c;
    config_for(&c, fake_oai_url(f), &conc, 1, N, 2);
    c.request_rate = &rate;
    c.seed = 3;
    xi_loadgen_arrivals(c.seed, 0, N, rate, c.burstiness, due);
    xi_loadgen_result res[N];
    char err[256];
    /* The level's clock starts after this, so offsets from here are never smaller than the
     * level's own; offsets from the first request are not: it may itself start late. */
    const double before = xi_now();
    CHECKF(xi_loadgen_run_level(&c, 0, res, NULL, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(due[N - 1] > 0.1); /* the schedule spreads them out */
    for (int i = 0; i < N; i++) {
        CHECKF(res[i].err == XI_LG_OK, "request %d: %s", i, res[i].err_msg);
        /* Never early (1 ms for the clock), late by at most a loaded machine's slack. */
        const double at = res[i].start - before;
        CHECKF(at >= due[i] - 1e-3 && at <= due[i] + 0.25, "request %d at %.4f s, due %.4f s", i,
               at, due[i]);
    }
    for (int i = 0; i < N; i++) xi_loadgen_result_free(&res[i]);
    fake_oai_stop(f);
}

TEST(test_loadgen_open_loop_holds_requests_beyond_the_cap_until_a_slot_frees) {
    /* 1000 requests/s: all six are due within milliseconds, but only two may be in flight, so
     * three waves of the server's 60 ms. */
    sweep s;
    fake_oai_opts o = {.tokens = 2, .first_delay_ms = 60, .delay_ms = 2};
    int conc = 2;
    double rate = 1000.0;
    CHECK(sweep_fake(&s, &o, &conc, 1, 6, 2) == 0);
    s.c.request_rate = &rate;
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    CHECK_EQ(s.lv[0].completed, 6);
    CHECK_EQ(fake_oai_max_inflight(s.f), 2);
    CHECK(s.lv[0].request_rate == 1000.0);
    CHECKF(s.lv[0].duration_s >= 0.18, "duration %.3f", s.lv[0].duration_s);
    sweep_free(&s);
}

TEST(test_loadgen_chat_ttft_waits_for_content_not_the_role_chunk) {
    sweep s;
    fake_oai_opts o = {.tokens = 4, .first_delay_ms = 80, .delay_ms = 5};
    CHECK(sweep_fake(&s, &o, (int[]){2}, 1, 2, 4) == 0);
    s.c.endpoint = XI_LG_CHAT;
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    CHECK_EQ(s.lv[0].completed, 2);
    CHECKF(s.lv[0].ttft.min >= 79, "ttft %.1f", s.lv[0].ttft.min);
    CHECK_EQ(s.lv[0].output_tokens, 8);
    char *path = fake_oai_last_path(s.f), *body = fake_oai_last_body(s.f);
    CHECK_STR(path, "/v1/chat/completions");
    CHECK(strstr(body, "\"messages\"") && !strstr(body, "\"prompt\""));
    free(path), free(body);
    sweep_free(&s);
}

TEST(test_loadgen_counts_content_chunks_when_the_server_sends_no_usage) {
    sweep s;
    fake_oai_opts o = {.tokens = 5, .no_usage = 1};
    CHECK(sweep_fake(&s, &o, (int[]){2}, 1, 3, 5) == 0);
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    CHECK_EQ(s.lv[0].completed, 3);
    CHECK_EQ(s.lv[0].usage_reported, 0);
    CHECK_EQ(s.lv[0].output_tokens, 15);
    CHECK_EQ(s.lv[0].input_tokens, 0);
    sweep_free(&s);
}

TEST(test_loadgen_sends_the_key_the_body_and_the_shared_prefix) {
    sweep s;
    fake_oai_opts o = {.tokens = 2};
    CHECK(sweep_fake(&s, &o, (int[]){1}, 1, 2, 2) == 0);
    s.c.api_key = "k-123";
    s.c.shared_prefix_len = 5;
    s.c.prompt_len_min = s.c.prompt_len_max = 3;
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    CHECK_EQ(s.lv[0].input_tokens, 2 * 8);   /* the fake counts prompt words as tokens */
    char *auth = fake_oai_last_auth(s.f), *body = fake_oai_last_body(s.f);
    char *path = fake_oai_last_path(s.f);
    CHECK_STR(auth, "Bearer k-123");
    CHECK_STR(path, "/v1/completions");
    json_t *j = json_loads(body, 0, NULL);
    CHECK(j);
    char *prefix = xi_loadgen_prompt(s.c.seed, 0, 0, 5, 0);
    const char *prompt = json_string_value(json_object_get(j, "prompt"));
    CHECK(prompt && !strncmp(prompt, prefix, strlen(prefix)));
    CHECK_EQ(json_integer_value(json_object_get(j, "max_tokens")), 2);
    CHECK(json_is_true(json_object_get(j, "stream")) && json_is_true(json_object_get(j, "ignore_eos")));
    json_decref(j);
    free(auth), free(body), free(path), free(prefix);
    sweep_free(&s);
}

TEST(test_loadgen_counts_5xx_answers_and_cut_streams_as_errors_and_goes_on) {
    sweep s;
    fake_oai_opts o = {.tokens = 6, .delay_ms = 2, .status_every = 3, .cut_every = 4};
    CHECK(sweep_fake(&s, &o, (int[]){2, 4}, 2, 12, 6) == 0);
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    /* Requests 1..12 then 13..24 as the server numbers them: multiples of 3 answer 500, the
     * other multiples of 4 are cut after 3 chunks. */
    for (int l = 0; l < 2; l++) {
        const xi_loadgen_level *v = &s.lv[l];
        CHECK_EQ(v->errors[XI_LG_ERR_HTTP_5XX], 4);
        CHECK_EQ(v->errors[XI_LG_ERR_STREAM], 2);
        CHECK_EQ(v->n_errors, 6);
        CHECK_EQ(v->completed, 6);
        CHECK_EQ(v->output_tokens, 36);
        CHECK(v->first_error);
        CHECKF(strstr(v->first_error, "HTTP 500: fake failure of request") ||
               strstr(v->first_error, "stream cut after 3 content chunks"), "%s", v->first_error);
    }
    sweep_free(&s);
}

TEST(test_loadgen_reports_a_refusing_server_as_connect_errors_on_every_level) {
    char url[64];
    int fd;
    CHECK(fake_oai_refusing_url(url, sizeof url, &fd) == 0);
    int levels[] = {1, 4};
    xi_loadgen_config c;
    config_for(&c, url, levels, 2, 5, 4);
    xi_loadgen_level lv[2];
    char err[256] = "";
    CHECKF(xi_loadgen_run(&c, lv, NULL, NULL, err, sizeof err) == 0, "%s", err);
    for (int l = 0; l < 2; l++) {
        CHECK_EQ(lv[l].errors[XI_LG_ERR_CONNECT], 5);
        CHECK_EQ(lv[l].completed, 0);
        CHECK(lv[l].first_error && !strncmp(lv[l].first_error, "connect: ", 9));
        CHECK(isnan(lv[l].ttft.p50));
    }
    free_levels(lv, 2);
    char *m = xi_loadgen_first_model(url, NULL, 5, err, sizeof err);
    CHECK(!m && strstr(err, "/v1/models"));
    close(fd);
}

TEST(test_loadgen_reports_4xx_answers_with_the_server_message) {
    sweep s;
    fake_oai_opts o = {.tokens = 2, .status_every = 1, .status = 401};
    CHECK(sweep_fake(&s, &o, (int[]){2}, 1, 3, 2) == 0);
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    CHECK_EQ(s.lv[0].errors[XI_LG_ERR_HTTP_4XX], 3);
    CHECKF(s.lv[0].first_error && strstr(s.lv[0].first_error, "http_4xx: HTTP 401: fake failure of request"),
           "%s", s.lv[0].first_error ? s.lv[0].first_error : "(null)");
    sweep_free(&s);
}

/* One level against a server with the given fault; the first error must contain `want`. */
static int stream_fault(const fake_oai_opts *o, const char *want, char *got, size_t gotlen) {
    sweep s;
    if (sweep_fake(&s, o, (int[]){1}, 1, 2, o->tokens)) return snprintf(got, gotlen, "no server"), 0;
    int ok = sweep_run(&s) == 0;
    const xi_loadgen_level *v = &s.lv[0];
    if (!ok) {
        snprintf(got, gotlen, "run failed: %s", s.err);
    } else {
        snprintf(got, gotlen, "%d stream errors, first %s", v->errors[XI_LG_ERR_STREAM],
                 v->first_error ? v->first_error : "-");
        ok = v->errors[XI_LG_ERR_STREAM] == 2 && v->first_error && strstr(v->first_error, want);
    }
    sweep_free(&s);
    return ok;
}

TEST(test_loadgen_flags_streams_without_an_end_with_bad_json_or_without_sse) {
    char got[512];
    fake_oai_opts no_done = {.tokens = 3, .no_done = 1};
    CHECKF(stream_fault(&no_done, "stream ended without [DONE] or a finish_reason after 3", got,
                        sizeof got), "%s", got);
    fake_oai_opts bad = {.tokens = 3, .bad_json_every = 1};
    CHECKF(stream_fault(&bad, "event 2 is not a JSON object", got, sizeof got), "%s", got);
    fake_oai_opts plain = {.tokens = 3, .plain_json = 1};
    CHECKF(stream_fault(&plain, "not an SSE stream: {\"choices\"", got, sizeof got), "%s", got);
}

TEST(test_loadgen_times_out_a_server_that_never_streams) {
    sweep s;
    fake_oai_opts o = {.tokens = 2, .first_delay_ms = 3000};
    CHECK(sweep_fake(&s, &o, (int[]){2}, 1, 2, 2) == 0);
    s.c.timeout_s = 0.3;
    double t0 = xi_now();
    CHECKF(sweep_run(&s) == 0, "%s", s.err);
    double took = xi_now() - t0;
    CHECK_EQ(s.lv[0].errors[XI_LG_ERR_TIMEOUT], 2);
    CHECKF(took >= 0.29 && took < 2.0, "took %.2f s", took);
    sweep_free(&s);
}

TEST(test_loadgen_first_model_comes_from_v1_models) {
    fake_oai_opts o = {.tokens = 1};
    fake_oai *f = fake_oai_start(&o);
    CHECK(f);
    char err[256] = "", url[96];
    char *m = xi_loadgen_first_model(fake_oai_url(f), NULL, 5, err, sizeof err);
    CHECKF(m && !strcmp(m, "fake-model"), "%s", err);
    free(m);
    snprintf(url, sizeof url, "%s/v1/", fake_oai_url(f));
    m = xi_loadgen_first_model(url, NULL, 5, err, sizeof err);
    CHECKF(m && !strcmp(m, "fake-model"), "%s", err);
    free(m);
    fake_oai_stop(f);
}

typedef struct progress_log {
    int calls, starts, last_done, last_total, monotonic;
} progress_log;

static void log_progress(void *ud, int level_idx, int conc, int done, int total, int errors) {
    (void)level_idx, (void)conc, (void)errors;
    progress_log *p = ud;
    p->calls++;
    if (done == 0) p->starts++;
    else if (done != p->last_done + 1) p->monotonic = 0;
    p->last_done = done;
    p->last_total = total;
}

TEST(test_loadgen_progress_reports_each_level_start_and_every_finished_request) {
    sweep s;
    fake_oai_opts o = {.tokens = 2};
    CHECK(sweep_fake(&s, &o, (int[]){1, 3}, 2, 5, 2) == 0);
    progress_log p = {.monotonic = 1};
    CHECKF(xi_loadgen_run(&s.c, s.lv, log_progress, &p, s.err, sizeof s.err) == 0, "%s", s.err);
    CHECK_EQ(p.starts, 2);
    CHECK_EQ(p.calls, 2 + 2 * 5);
    CHECK(p.monotonic && p.last_done == 5 && p.last_total == 5);
    sweep_free(&s);
}
