/* loadgen units without a network: percentiles, SSE framing, prompts, aggregation and the shape
 * of the JSON, CSV and SVG reports. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "loadgen/loadgen.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* ---- percentiles ----------------------------------------------------------------------- */

TEST(test_loadgen_percentile_interpolates_between_ranks_like_numpy) {
    /* numpy.percentile([10, 1, 7, 3, 9, 2, 8, 4, 6, 5], q) for q = 0, 50, 90, 99, 100. */
    double v[] = {10, 1, 7, 3, 9, 2, 8, 4, 6, 5};
    CHECK_NEAR(xi_loadgen_percentile(v, 10, 50), 5.5, 1e-12);
    CHECK_NEAR(xi_loadgen_percentile(v, 10, 90), 9.1, 1e-12);
    CHECK_NEAR(xi_loadgen_percentile(v, 10, 99), 9.91, 1e-12);
    CHECK_NEAR(xi_loadgen_percentile(v, 10, 0), 1, 0);
    CHECK_NEAR(xi_loadgen_percentile(v, 10, 100), 10, 0);
    double one[] = {42};
    CHECK_NEAR(xi_loadgen_percentile(one, 1, 99), 42, 0);
    double two[] = {3, 1};
    CHECK_NEAR(xi_loadgen_percentile(two, 2, 25), 1.5, 1e-12);
    CHECK(isnan(xi_loadgen_percentile(NULL, 0, 50)));
}

TEST(test_loadgen_dist_reports_milliseconds_and_nan_when_empty) {
    double v[] = {0.004, 0.001, 0.002, 0.003};
    xi_loadgen_dist d;
    xi_loadgen_dist_of(v, 4, &d);
    CHECK_EQ(d.n, 4);
    CHECK_NEAR(d.mean, 2.5, 1e-9);
    CHECK_NEAR(d.min, 1, 1e-9);
    CHECK_NEAR(d.max, 4, 1e-9);
    CHECK_NEAR(d.p50, 2.5, 1e-9);
    CHECK_NEAR(d.p90, 3.7, 1e-9);
    xi_loadgen_dist_of(NULL, 0, &d);
    CHECK(d.n == 0 && isnan(d.mean) && isnan(d.p50) && isnan(d.p99) && isnan(d.max));
}

/* ---- SSE framing ----------------------------------------------------------------------- */

typedef struct collected {
    char items[16][128];
    int n;
    int stop_at;   /* return nonzero from the callback at this event (1-based); 0 never */
} collected;

static int collect_event(void *ud, const char *data, size_t len) {
    collected *c = ud;
    if (c->n < 16) snprintf(c->items[c->n], sizeof c->items[0], "%.*s", (int)len, data);
    c->n++;
    return c->stop_at && c->n == c->stop_at ? 7 : 0;
}

/* Every line ending, a comment, other fields, a field without a space, multi-line data, an event
 * without data, a "data" line with no colon, and a final event the stream never terminates. */
static const char stream[] =
    ": keep-alive comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: message\nid: 7\ndata:{\"b\":2}\n\n"
    "data: line one\rdata: line two\r\r"
    "retry: 100\n\n"
    "data\n\n"
    "data:  two spaces keep one\n\n"
    "data: [DONE]\n\n"
    "data: tail";
static const char *const expected[] = {"{\"a\":1}", "{\"b\":2}", "line one\nline two", "",
                                       " two spaces keep one", "[DONE]"};

static int check_events(const collected *c, int with_tail) {
    int want = (int)XI_ARRAY_LEN(expected) + with_tail;
    if (c->n != want) return 0;
    for (size_t i = 0; i < XI_ARRAY_LEN(expected); i++)
        if (strcmp(c->items[i], expected[i])) return 0;
    return !with_tail || !strcmp(c->items[want - 1], "tail");
}

TEST(test_sse_splits_events_the_same_at_every_byte_boundary) {
    size_t n = sizeof stream - 1;
    /* Two chunks cut at every position, including between '\r' and '\n'. */
    for (size_t cut = 0; cut <= n; cut++) {
        collected c = {0};
        xi_sse s;
        xi_sse_init(&s, collect_event, &c);
        CHECK(xi_sse_feed(&s, stream, cut) == 0);
        CHECK(xi_sse_feed(&s, stream + cut, n - cut) == 0);
        CHECK(xi_sse_finish(&s, 1) == 0);
        xi_sse_free(&s);
        CHECKF(check_events(&c, 1), "cut at %zu: %d events, first '%s'", cut, c.n, c.items[0]);
    }
    /* One byte at a time, and chunks of pseudo-random sizes. */
    for (int trial = 0; trial < 50; trial++) {
        collected c = {0};
        xi_sse s;
        xi_sse_init(&s, collect_event, &c);
        uint64_t r = 0x1234567 + (uint64_t)trial * 7919;
        for (size_t i = 0; i < n;) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            size_t k = trial == 0 ? 1 : 1 + (size_t)((r >> 33) % 9);
            if (k > n - i) k = n - i;
            CHECK(xi_sse_feed(&s, stream + i, k) == 0);
            i += k;
        }
        CHECK(xi_sse_finish(&s, 1) == 0);
        xi_sse_free(&s);
        CHECKF(check_events(&c, 1), "trial %d: %d events", trial, c.n);
    }
}

TEST(test_sse_drops_an_unterminated_event_unless_the_stream_completed) {
    collected c = {0};
    xi_sse s;
    xi_sse_init(&s, collect_event, &c);
    CHECK(xi_sse_feed(&s, stream, sizeof stream - 1) == 0);
    CHECK(xi_sse_finish(&s, 0) == 0);
    xi_sse_free(&s);
    CHECK(check_events(&c, 0));
}

TEST(test_sse_stops_feeding_when_the_callback_says_so) {
    collected c = {.stop_at = 2};
    xi_sse s;
    xi_sse_init(&s, collect_event, &c);
    CHECK_EQ(xi_sse_feed(&s, stream, sizeof stream - 1), 7);
    CHECK_EQ(c.n, 2);
    xi_sse_free(&s);
}

/* Feed `chunk` until the parser refuses; returns its code, with the bytes fed in *fed. */
static int feed_until_refused(xi_sse *s, const char *chunk, size_t n, size_t *fed) {
    int rc = 0;
    for (*fed = 0; rc == 0 && *fed <= 2 * (size_t)XI_SSE_MAX_EVENT; *fed += n) rc = xi_sse_feed(s, chunk, n);
    return rc;
}

TEST(test_sse_refuses_a_line_or_event_longer_than_the_limit_instead_of_buffering_it) {
    size_t n = 1u << 20, fed;
    char *junk = malloc(n + 1);
    CHECK(junk);
    memset(junk, 'x', n);
    memcpy(junk, "data: ", 6);
    /* One endless line. */
    collected c = {0};
    xi_sse s;
    xi_sse_init(&s, collect_event, &c);
    CHECK_EQ(feed_until_refused(&s, junk, n, &fed), -2);
    CHECK(fed <= XI_SSE_MAX_EVENT + n && s.line.len <= XI_SSE_MAX_EVENT);
    xi_sse_free(&s);
    /* Short lines, but an event that never ends. */
    junk[n - 1] = '\n';
    xi_sse_init(&s, collect_event, &c);
    CHECK_EQ(feed_until_refused(&s, junk, n, &fed), -2);
    CHECK(fed <= XI_SSE_MAX_EVENT + n && s.data.len <= XI_SSE_MAX_EVENT);
    CHECK_EQ(c.n, 0);
    xi_sse_free(&s);
    free(junk);
}

/* ---- prompts --------------------------------------------------------------------------- */

static int count_words(const char *s) {
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == ' ' && p[1] && p[1] != ' ') n++;
    return n;
}

TEST(test_loadgen_prompts_are_a_function_of_seed_level_and_index) {
    char *a = xi_loadgen_prompt(42, 0, 5, 0, 64);
    char *b = xi_loadgen_prompt(42, 0, 5, 0, 64);
    char *other_seed = xi_loadgen_prompt(43, 0, 5, 0, 64);
    char *other_index = xi_loadgen_prompt(42, 0, 6, 0, 64);
    char *other_level = xi_loadgen_prompt(42, 1, 5, 0, 64);
    CHECK(a && b && other_seed && other_index && other_level);
    CHECK_STR(a, b);
    CHECK(strcmp(a, other_seed) && strcmp(a, other_index) && strcmp(a, other_level));
    CHECK_EQ(count_words(a), 64);
    CHECK(a[0] == ' ' && a[strlen(a) - 1] != ' ');
    /* A recorded prompt for seed 0: a change to the generator or the word list makes results of
     * different xinfer versions incomparable, and must show up here. */
    char *z = xi_loadgen_prompt(0, 0, 0, 0, 6);
    CHECK_STR(z, " garden best year more time star");
    free(a), free(b), free(other_seed), free(other_index), free(other_level), free(z);
}

TEST(test_loadgen_shared_prefix_is_identical_across_requests_and_levels) {
    char *p1 = xi_loadgen_prompt(7, 0, 0, 20, 10);
    char *p2 = xi_loadgen_prompt(7, 3, 99, 20, 10);
    char *prefix_only = xi_loadgen_prompt(7, 5, 1, 20, 0);
    CHECK(p1 && p2 && prefix_only);
    size_t pl = strlen(prefix_only);
    CHECK_EQ(count_words(prefix_only), 20);
    CHECK(!strncmp(p1, prefix_only, pl) && !strncmp(p2, prefix_only, pl));
    CHECK(strcmp(p1 + pl, p2 + pl));
    CHECK_EQ(count_words(p1), 30);
    free(p1), free(p2), free(prefix_only);
}

TEST(test_loadgen_prompt_lengths_are_uniform_over_the_range) {
    int seen[11] = {0};
    for (int i = 0; i < 2000; i++) {
        int n = xi_loadgen_prompt_len(1, 0, i, 10, 20);
        CHECKF(n >= 10 && n <= 20, "length %d", n);
        seen[n - 10]++;
        CHECK_EQ(xi_loadgen_prompt_len(1, 0, i, 10, 20), n);
    }
    /* 2000 draws over 11 values: each near 182; a biased or stuck generator fails this. */
    for (int k = 0; k < 11; k++) CHECKF(seen[k] > 120 && seen[k] < 250, "value %d seen %d", 10 + k, seen[k]);
    CHECK_EQ(xi_loadgen_prompt_len(1, 0, 3, 17, 17), 17);
}

/* Mean and coefficient of variation of the gaps of n arrivals. */
static void gap_stats(const double *t, int n, double *mean, double *cv) {
    double s = 0, s2 = 0;
    for (int i = 1; i < n; i++) {
        const double g = t[i] - t[i - 1];
        s += g, s2 += g * g;
    }
    *mean = s / (n - 1);
    *cv = sqrt(s2 / (n - 1) - *mean * *mean) / *mean;
}

TEST(test_loadgen_arrivals_have_the_rate_the_burstiness_and_the_seed) {
    enum { N = 20000 };
    static double t[N], u[N];
    double mean, cv;
    /* Poisson at 5/s: exponential gaps, mean 0.2 s, coefficient of variation 1. Tolerances are
     * about 3 standard errors of 20,000 samples; the seed fixes the draw. */
    xi_loadgen_arrivals(7, 0, N, 5.0, 1.0, t);
    CHECK(t[0] == 0.0);
    for (int i = 1; i < N; i++) CHECK(t[i] >= t[i - 1]);
    gap_stats(t, N, &mean, &cv);
    CHECKF(fabs(mean - 0.2) < 0.2 * 0.025 && fabs(cv - 1.0) < 0.03, "mean %g cv %g", mean, cv);
    /* Same seed and level, same times; another level or seed, others. */
    xi_loadgen_arrivals(7, 0, N, 5.0, 1.0, u);
    CHECK(!memcmp(t, u, sizeof t));
    xi_loadgen_arrivals(7, 1, N, 5.0, 1.0, u);
    CHECK(u[1] != t[1] && u[2] != t[2]);
    xi_loadgen_arrivals(8, 0, N, 5.0, 1.0, u);
    CHECK(u[1] != t[1] && u[2] != t[2]);
    /* Gamma gaps: shape 4 is more even (cv 1/2), shape 1/4 burstier (cv 2); same mean. */
    xi_loadgen_arrivals(7, 0, N, 5.0, 4.0, t);
    gap_stats(t, N, &mean, &cv);
    CHECKF(fabs(mean - 0.2) < 0.2 * 0.02 && fabs(cv - 0.5) < 0.02, "mean %g cv %g", mean, cv);
    xi_loadgen_arrivals(7, 0, N, 5.0, 0.25, t);
    gap_stats(t, N, &mean, &cv);
    CHECKF(fabs(mean - 0.2) < 0.2 * 0.05 && fabs(cv - 2.0) < 0.15, "mean %g cv %g", mean, cv);
    /* An infinite rate: everything is due at once. */
    xi_loadgen_arrivals(7, 0, N, INFINITY, 1.0, t);
    for (int i = 0; i < N; i++) CHECK(t[i] == 0.0);
}

TEST(test_loadgen_word_list_has_no_duplicates_or_blanks) {
    xi_buf b = {0};
    size_t nw = xi_loadgen_word_count();
    CHECK(nw >= 200 && nw <= 512);
    /* 5000 draws see every one of ~250 words (a miss has probability ~1e-6, and the seed is
     * fixed): as many distinct words as the list holds means the list has no duplicates. */
    CHECK(xi_loadgen_words(&b, 3, 0, 0, 5000) == 0);
    static char distinct[512][32];
    size_t n_distinct = 0;
    int words = 0;
    for (char *tok = strtok(b.data, " "); tok; tok = strtok(NULL, " ")) {
        CHECK(strlen(tok) > 0 && strlen(tok) < 32);
        for (char *p = tok; *p; p++) CHECKF(*p >= 'a' && *p <= 'z', "word '%s'", tok);
        size_t k = 0;
        while (k < n_distinct && strcmp(distinct[k], tok)) k++;
        if (k == n_distinct) {
            CHECK(n_distinct < 512);
            snprintf(distinct[n_distinct++], 32, "%s", tok);
        }
        words++;
    }
    CHECK_EQ(words, 5000);
    CHECK_EQ(n_distinct, nw);
    xi_buf_free(&b);
}

/* ---- request shape --------------------------------------------------------------------- */

TEST(test_loadgen_endpoint_url_accepts_base_v1_or_full_urls) {
    struct { const char *in; xi_loadgen_endpoint e; const char *out; } cases[] = {
        {"http://h:1", XI_LG_COMPLETIONS, "http://h:1/v1/completions"},
        {"http://h:1/", XI_LG_CHAT, "http://h:1/v1/chat/completions"},
        {"http://h:1/v1", XI_LG_CHAT, "http://h:1/v1/chat/completions"},
        {"http://h:1/v1/", XI_LG_COMPLETIONS, "http://h:1/v1/completions"},
        {"http://h:1/v1/chat/completions", XI_LG_COMPLETIONS, "http://h:1/v1/chat/completions"},
        {"http://h:1/api/v1/completions", XI_LG_CHAT, "http://h:1/api/v1/completions"},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(cases); i++) {
        char *u = xi_loadgen_endpoint_url(cases[i].in, cases[i].e);
        CHECK_STR(u, cases[i].out);
        free(u);
    }
}

TEST(test_loadgen_request_body_streams_greedy_with_max_tokens) {
    xi_loadgen_config c;
    xi_loadgen_config_default(&c);
    c.model = "m";
    c.output_len = 17;
    c.endpoint = XI_LG_CHAT;
    char *s = xi_loadgen_request_body(&c, " hello world");
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j);
    CHECK_STR(json_string_value(json_object_get(j, "model")), "m");
    CHECK_EQ(json_integer_value(json_object_get(j, "max_tokens")), 17);
    CHECK(json_is_true(json_object_get(j, "stream")));
    CHECK(json_is_true(json_object_get(j, "ignore_eos")));
    CHECK(json_number_value(json_object_get(j, "temperature")) == 0.0);
    CHECK(json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage")));
    json_t *m0 = json_array_get(json_object_get(j, "messages"), 0);
    CHECK_STR(json_string_value(json_object_get(m0, "role")), "user");
    CHECK_STR(json_string_value(json_object_get(m0, "content")), " hello world");
    CHECK(!json_object_get(j, "prompt"));
    json_decref(j);
    free(s);

    c.endpoint = XI_LG_COMPLETIONS;
    c.stream_usage = c.ignore_eos = 0;
    s = xi_loadgen_request_body(&c, "p");
    j = json_loads(s, 0, NULL);
    CHECK(j);
    CHECK_STR(json_string_value(json_object_get(j, "prompt")), "p");
    CHECK(!json_object_get(j, "messages") && !json_object_get(j, "stream_options") &&
          !json_object_get(j, "ignore_eos"));
    json_decref(j);
    free(s);
}

TEST(test_loadgen_config_check_names_the_bad_field) {
    xi_loadgen_config c;
    char err[256];
    xi_loadgen_config_default(&c);
    CHECK(xi_loadgen_config_check(&c, err, sizeof err) == -1);
    CHECKF(strstr(err, "model"), "%s", err);
    c.model = "m";
    CHECK(xi_loadgen_config_check(&c, err, sizeof err) == 0);
    c.url = "ftp://x";
    CHECK(xi_loadgen_config_check(&c, err, sizeof err) == -1 && strstr(err, "url"));
    c.url = "http://x";
    int zero[] = {0};
    c.concurrency = zero;
    c.n_levels = 1;
    CHECK(xi_loadgen_config_check(&c, err, sizeof err) == -1 && strstr(err, "concurrency"));
}

/* ---- aggregation and reports ------------------------------------------------------------ */

static xi_loadgen_result ok_result(double start, double ttft, double e2e, int tokens, double gap) {
    xi_loadgen_result r = {0};
    r.start = start, r.ttft = ttft, r.e2e = e2e;
    r.output_tokens = r.chunks = tokens;
    r.prompt_tokens = 100;
    r.usage_reported = 1;
    r.itl = malloc(sizeof(double) * (size_t)tokens);
    for (int i = 0; i + 1 < tokens; i++) r.itl[i] = gap;
    return r;
}

static xi_loadgen_result bad_result(double start, xi_loadgen_err kind, const char *msg) {
    xi_loadgen_result r = {0};
    r.start = start, r.e2e = 0.001, r.err = kind;
    r.err_msg = xi_strdup(msg);
    r.prompt_tokens = -1;
    return r;
}

/* Two levels: four good requests, and one where every request failed. */
static void make_levels(xi_loadgen_level lv[2]) {
    xi_loadgen_result r[6];
    r[0] = ok_result(10.0, 0.100, 1.000, 10, 0.1);
    r[1] = ok_result(10.5, 0.200, 1.100, 10, 0.1);
    r[2] = bad_result(10.2, XI_LG_ERR_HTTP_5XX, "HTTP 500: second");
    r[3] = ok_result(11.0, 0.300, 1.200, 10, 0.1);
    r[4] = bad_result(10.1, XI_LG_ERR_STREAM, "stream cut: first");
    r[5] = ok_result(11.5, 0.400, 1.500, 4, 0.3);
    xi_loadgen_level_of(r, 6, 4, &lv[0]);
    for (int i = 0; i < 6; i++) xi_loadgen_result_free(&r[i]);
    xi_loadgen_result f[2] = {bad_result(0, XI_LG_ERR_CONNECT, "Connection refused"),
                              bad_result(0.5, XI_LG_ERR_CONNECT, "Connection refused")};
    xi_loadgen_level_of(f, 2, 8, &lv[1]);
    for (int i = 0; i < 2; i++) xi_loadgen_result_free(&f[i]);
}

TEST(test_loadgen_level_aggregates_successes_and_counts_errors_by_kind) {
    xi_loadgen_level lv[2];
    make_levels(lv);
    CHECK_EQ(lv[0].concurrency, 4);
    CHECK_EQ(lv[0].completed, 4);
    CHECK_EQ(lv[0].n_errors, 2);
    CHECK_EQ(lv[0].errors[XI_LG_ERR_HTTP_5XX], 1);
    CHECK_EQ(lv[0].errors[XI_LG_ERR_STREAM], 1);
    CHECK_STR(lv[0].first_error, "stream: stream cut: first");   /* earliest start, not order */
    CHECK_NEAR(lv[0].duration_s, 13.0 - 10.0, 1e-9);
    CHECK_EQ(lv[0].output_tokens, 34);
    CHECK_EQ(lv[0].input_tokens, 400);
    CHECK_NEAR(lv[0].request_throughput, 4 / 3.0, 1e-9);
    CHECK_NEAR(lv[0].output_throughput, 34 / 3.0, 1e-9);
    CHECK_NEAR(lv[0].ttft.p50, 250, 1e-6);
    CHECK_NEAR(lv[0].e2e.max, 1500, 1e-6);
    /* TPOT = (e2e - ttft) / (tokens - 1): 0.1, 0.1, 0.1 and (1.5 - 0.4) / 3. */
    CHECK_EQ(lv[0].tpot.n, 4);
    CHECK_NEAR(lv[0].tpot.min, 100, 1e-6);
    CHECK_NEAR(lv[0].tpot.max, 1100 / 3.0, 1e-6);
    CHECK_EQ(lv[0].itl.n, 9 * 3 + 3);
    CHECK_NEAR(lv[0].itl.max, 300, 1e-6);
    CHECK_EQ(lv[1].completed, 0);
    CHECK_EQ(lv[1].errors[XI_LG_ERR_CONNECT], 2);
    CHECK(isnan(lv[1].ttft.p50) && lv[1].output_throughput == 0);
    CHECK_STR(lv[1].first_error, "connect: Connection refused");
    xi_loadgen_level_free(&lv[0]);
    xi_loadgen_level_free(&lv[1]);
}

TEST(test_loadgen_json_holds_config_and_every_statistic_with_nulls_for_no_data) {
    xi_loadgen_level lv[2];
    make_levels(lv);
    xi_loadgen_config c;
    xi_loadgen_config_default(&c);
    int levels[] = {4, 8};
    c.concurrency = levels, c.n_levels = 2, c.model = "m", c.api_key = "secret";
    char *s = xi_loadgen_json(&c, lv, 2);
    CHECK(s && !strstr(s, "secret"));
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j);
    json_t *cfg = json_object_get(j, "config");
    CHECK_STR(json_string_value(json_object_get(cfg, "model")), "m");
    CHECK(json_is_true(json_object_get(cfg, "api_key_set")));
    CHECK_EQ(json_array_size(json_object_get(cfg, "concurrency")), 2);
    json_t *ls = json_object_get(j, "levels");
    CHECK_EQ(json_array_size(ls), 2);
    json_t *l0 = json_array_get(ls, 0), *l1 = json_array_get(ls, 1);
    CHECK_EQ(json_integer_value(json_object_get(l0, "completed")), 4);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(l0, "errors"), "http_5xx")), 1);
    const char *keys[] = {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"};
    const char *stats[] = {"count", "mean", "min", "p50", "p90", "p99", "max"};
    for (int k = 0; k < 4; k++)
        for (int s2 = 0; s2 < 7; s2++) {
            CHECKF(json_is_number(json_object_get(json_object_get(l0, keys[k]), stats[s2])), "%s.%s",
                   keys[k], stats[s2]);
            if (s2) CHECK(json_is_null(json_object_get(json_object_get(l1, keys[k]), stats[s2])));
        }
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(l0, "ttft_ms"), "p50")), 250, 1e-3);
    CHECK(json_is_string(json_object_get(l1, "first_error")));
    CHECK(json_is_string(json_object_get(l0, "first_error")));
    json_decref(j);
    free(s);
    xi_loadgen_level_free(&lv[0]);
    xi_loadgen_level_free(&lv[1]);
}

/* Split one CSV line into fields, honouring quotes; returns the number of fields. */
static int csv_fields(const char *line, char fields[][96], int max) {
    int n = 0;
    const char *p = line;
    for (;;) {
        char *out = n < max ? fields[n] : NULL;
        size_t k = 0;
        if (*p == '"') {
            for (p++; *p && !(*p == '"' && p[1] != '"'); p++) {
                if (*p == '"') p++;
                if (out && k < 95) out[k++] = *p;
            }
            if (*p == '"') p++;
        } else {
            for (; *p && *p != ',' && *p != '\n'; p++)
                if (out && k < 95) out[k++] = *p;
        }
        if (out) out[k] = 0;
        n++;
        if (*p != ',') return n;
        p++;
    }
}

TEST(test_loadgen_csv_has_a_header_and_one_equal_width_row_per_level) {
    xi_loadgen_level lv[2];
    make_levels(lv);
    free(lv[1].first_error);
    lv[1].first_error = xi_strdup("connect: said \"no\", twice");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(xi_loadgen_write_csv(f, lv, 2) == 0);
    fclose(f);
    char *lines[4] = {0};
    int nl = 0;
    for (char *l = strtok(buf, "\n"); l && nl < 4; l = strtok(NULL, "\n")) lines[nl++] = l;
    CHECK_EQ(nl, 3);
    static char h[64][96], r0[64][96], r1[64][96];
    int nh = csv_fields(lines[0], h, 64);
    CHECK(nh > 30);
    CHECK_EQ(csv_fields(lines[1], r0, 64), nh);
    CHECK_EQ(csv_fields(lines[2], r1, 64), nh);
    CHECK_STR(h[0], "concurrency");
    CHECK_STR(r0[0], "4");
    CHECK_STR(r1[0], "8");
    for (int i = 0; i < nh; i++) {
        if (!strcmp(h[i], "ttft_ms_p50")) {
            CHECK_STR(r0[i], "250");
            CHECK_STR(r1[i], "");   /* no samples: empty, not 0 */
        }
        if (!strcmp(h[i], "errors_connect")) CHECK_STR(r1[i], "2");
    }
    CHECK_STR(r1[nh - 1], "connect: said \"no\", twice");
    free(buf);
    xi_loadgen_level_free(&lv[0]);
    xi_loadgen_level_free(&lv[1]);
}

/* Tag balance of the SVG subset we write: every element closed in order, no stray '&' or '<'. */
static int svg_well_formed(const char *s, char *why, size_t whylen) {
    char stack[32][16];
    int depth = 0, roots = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '&') {
            if (strncmp(p, "&amp;", 5) && strncmp(p, "&lt;", 4) && strncmp(p, "&gt;", 4) &&
                strncmp(p, "&quot;", 6))
                return snprintf(why, whylen, "bare & at %td", p - s), 0;
            continue;
        }
        if (*p != '<') continue;
        if (p[1] == '?') {
            p = strstr(p, "?>");
            if (!p) return snprintf(why, whylen, "unterminated <?"), 0;
            continue;
        }
        const char *end = strchr(p, '>');
        if (!end) return snprintf(why, whylen, "unterminated tag"), 0;
        const char *q = p + 1 + (p[1] == '/');
        size_t nl = strcspn(q, " />\n");
        if (nl == 0 || nl >= 16) return snprintf(why, whylen, "bad tag name at %td", p - s), 0;
        if (memchr(p + 1, '<', (size_t)(end - p - 1))) return snprintf(why, whylen, "< in tag"), 0;
        if (p[1] == '/') {
            if (depth == 0 || strncmp(stack[depth - 1], q, nl) || stack[depth - 1][nl])
                return snprintf(why, whylen, "</%.*s> closes %s", (int)nl, q,
                                depth ? stack[depth - 1] : "nothing"), 0;
            depth--;
        } else if (end[-1] != '/') {
            if (depth == 32) return snprintf(why, whylen, "too deep"), 0;
            if (depth == 0) roots++;
            snprintf(stack[depth++], 16, "%.*s", (int)nl, q);
        } else if (depth == 0) {
            roots++;
        }
        p = end;
    }
    if (depth) return snprintf(why, whylen, "%d elements left open", depth), 0;
    if (roots != 1) return snprintf(why, whylen, "%d root elements", roots), 0;
    return 1;
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

TEST(test_loadgen_svg_is_well_formed_with_a_point_per_statistic_and_gaps_for_no_data) {
    xi_loadgen_level lv[2];
    make_levels(lv);
    char *s = xi_loadgen_svg(lv, 2, "a <title> & \"quotes\"");
    char why[128] = "";
    CHECK(s);
    CHECKF(svg_well_formed(s, why, sizeof why), "%s", why);
    CHECK(!strncmp(s, "<?xml", 5) && strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    /* Level 0 has data (throughput, TTFT p50, p99: three points), level 1 none. */
    CHECK_EQ(count_of(s, "<circle"), 3);
    CHECK_EQ(count_of(s, "no data"), 2);
    CHECK_EQ(count_of(s, ">2 failed</text>"), 2);   /* level 0 lost 2 of 6 requests */
    CHECK(strstr(s, "a &lt;title&gt; &amp; &quot;quotes&quot;"));
    CHECK(strstr(s, "tokens/s") && strstr(s, "TTFT p50") && strstr(s, "TTFT p99") &&
          strstr(s, "concurrency"));
    /* Both concurrency levels label the x axis of both panels. */
    CHECK_EQ(count_of(s, "text-anchor=\"middle\">4</text>"), 2);
    CHECK_EQ(count_of(s, "text-anchor=\"middle\">8</text>"), 2);
    free(s);
    xi_loadgen_level_free(&lv[0]);
    xi_loadgen_level_free(&lv[1]);
}

TEST(test_loadgen_table_lists_levels_and_the_first_error) {
    xi_loadgen_level lv[2];
    make_levels(lv);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    xi_loadgen_write_table(f, lv, 2);
    fclose(f);
    CHECK(strstr(buf, "TTFT"));
    CHECKF(strstr(buf, "4/6") && strstr(buf, "0/2"), "%s", buf);
    CHECKF(strstr(buf, "concurrency 4: 2 errors (http_5xx 1, stream 1); first: stream: stream cut: first"),
           "%s", buf);
    CHECK(strstr(buf, "concurrency 8: 2 errors (connect 2)"));
    free(buf);
    xi_loadgen_level_free(&lv[0]);
    xi_loadgen_level_free(&lv[1]);
}

/* ---- prompt length in tokens ----------------------------------------------------------- */

/* The word list's promise: N words are N tokens (plus a leading marker at most) with the real
 * Qwen2.5 (byte-level BPE) and Llama-2 (SentencePiece) tokenizers. 3000 words cover every word
 * of the list many times, so one word that splits would add dozens of tokens. */
TEST(test_loadgen_prompt_of_n_words_is_about_n_tokens_for_qwen_and_llama) {
    static const char *const dirs[] = {"tokenizers/qwen2.5", "tokenizers/llama2"};
    char *prompt = xi_loadgen_prompt(11, 0, 0, 0, 3000);
    CHECK(prompt);
    for (size_t i = 0; i < XI_ARRAY_LEN(dirs); i++) {
        char *dir = xi_test_data(dirs[i]), err[256] = "";
        xi_tokenizer *t = xi_tokenizer_load(dir, err, sizeof err);
        CHECKF(t, "%s: %s", dir, err);
        int32_t *ids = NULL;
        int n = xi_tokenizer_encode(t, prompt, strlen(prompt), 0, 0, &ids, err, sizeof err);
        CHECKF(n >= 3000 && n <= 3001, "%s: 3000 words are %d tokens", dirs[i], n);
        free(ids);
        xi_tokenizer_free(t);
        free(dir);
    }
    free(prompt);
}
