/* Engine with real weights (stories260K, qwen2-tiny-random): every invariance is bitwise.
 * A request's ids must not depend on what it ran with, on prefill chunking, on prefix-cache
 * hits, or on preemption; greedy from BOS must equal llama2.c's reference. */
#include <jansson.h>
#include <stdlib.h>

#include "base/base.h"
#include "test.h"
#include "test_engine_util.h"
#include "xinfer.h"

/* Deterministic prompt i: BOS then ids from a small generator, within the vocabulary. */
static int make_prompt(int i, int32_t *ids, int vocab, int len) {
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    ids[0] = 1;
    for (int k = 1; k < len; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids[k] = 3 + (int32_t)(x % (uint64_t)(vocab - 3));
    }
    return len;
}

typedef struct workload {
    int n;
    int32_t prompts[64][160];
    int n_prompt[64];
    int max_tokens[64];
    float temperature[64];
} workload;

static void make_workload(workload *w, int n, int vocab, int min_len, int spread, int max_tok) {
    w->n = n;
    for (int i = 0; i < n; i++) {
        w->n_prompt[i] = make_prompt(i, w->prompts[i], vocab, min_len + (i * 7) % spread);
        w->max_tokens[i] = XI_MAX(max_tok - (i % 5) * 3, 1);
        w->temperature[i] = i % 2 ? 0.0f : 0.8f;
    }
}

static int64_t submit_one(xi_engine *e, const workload *w, int i, req_out *out) {
    xi_request_params rp;
    xi_request_params_default(&rp);
    rp.prompt_ids = w->prompts[i];
    rp.n_prompt_ids = w->n_prompt[i];
    rp.max_tokens = w->max_tokens[i];
    rp.temperature = w->temperature[i];
    rp.seed = 1000 + i;
    rp.ignore_eos = 1;
    char err[256];
    int64_t id = xi_engine_submit(e, &rp, on_output, out, err, sizeof err);
    if (id < 0) fprintf(stderr, "submit: %s\n", err);
    return id;
}

/* Run the whole workload at once. */
static int run_together(xi_engine *e, const workload *w, req_out *out) {
    for (int i = 0; i < w->n; i++)
        if (submit_one(e, w, i, &out[i]) < 0) return -1;
    return run_until_idle(e);
}

static int same_seq(const seq_out *a, const seq_out *b) {
    return a->n == b->n && !memcmp(a->ids, b->ids, (size_t)a->n * sizeof *a->ids) &&
           a->fr == b->fr && a->n_final == 1 && b->n_final == 1;
}

static int first_diff(const workload *w, const req_out *a, const req_out *b) {
    for (int i = 0; i < w->n; i++)
        if (!same_seq(&a[i].s[0], &b[i].s[0])) return i;
    return -1;
}

TEST(test_engine_greedy_from_bos_matches_llama2c_reference) {
    char *path = xi_test_data("models/stories260K/reference.json");
    json_error_t je;
    json_t *ref = json_load_file(path, 0, &je);
    CHECK(ref);
    json_t *c0 = json_array_get(json_object_get(ref, "cases"), 0);
    json_t *gen = json_object_get(c0, "generated_ids");
    CHECK_EQ(json_array_size(gen), 200);
    xi_engine *e = open_engine("models/stories260K", 64, 2048, 8, 512, 1);
    CHECK(e);
    int32_t bos = 1;
    xi_request_params rp;
    xi_request_params_default(&rp);
    rp.prompt_ids = &bos;
    rp.n_prompt_ids = 1;
    rp.max_tokens = 200;
    rp.temperature = 0;
    rp.ignore_eos = 1;
    req_out *out = calloc(1, sizeof *out);
    CHECK(xi_engine_submit(e, &rp, on_output, out, NULL, 0) == 0);
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(out->s[0].n, 200);
    CHECK_EQ(out->s[0].fr, XI_FINISH_LENGTH);
    for (int i = 0; i < 200; i++)
        CHECKF(out->s[0].ids[i] == json_integer_value(json_array_get(gen, i)),
               "token %d: %d != %lld", i, out->s[0].ids[i],
               (long long)json_integer_value(json_array_get(gen, i)));
    /* the text is the decoded ids */
    char *text = xi_engine_detokenize(e, out->s[0].ids, 200, 1, NULL, 0);
    CHECK(text);
    CHECK_STR(out->s[0].text, text);
    free(text);
    free(out);
    json_decref(ref);
    xi_engine_close(e);
}

/* An engine configuration for one run of a workload. */
typedef struct run_cfg {
    const char *model;
    int kv_blocks, budget, max_seqs, max_len, caching;
    int alone;              /* submit one request at a time, each run to completion */
} run_cfg;

/* Run w under cfg into out (calloc'ed [w->n]); stats after the run into *st. NULL on failure. */
static req_out *run_workload(const run_cfg *cfg, const workload *w, xi_engine_stats *st) {
    req_out *out = calloc((size_t)w->n, sizeof *out);
    xi_engine *e = open_engine(cfg->model, cfg->kv_blocks, cfg->budget, cfg->max_seqs,
                               cfg->max_len, cfg->caching);
    int ok = e && out;
    for (int i = 0; ok && i < w->n; i++) {
        ok = submit_one(e, w, i, &out[i]) >= 0;
        if (ok && cfg->alone) ok = run_until_idle(e) > 0;
    }
    if (ok && !cfg->alone) ok = run_until_idle(e) > 0;
    if (ok && st) xi_engine_get_stats(e, st);
    if (e) xi_engine_close(e);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* Run w under both configurations; fail on the first request whose ids differ. */
#define CHECK_SAME_OUTPUTS(cfg_a, cfg_b, w, st_a)                                         \
    do {                                                                                \
        req_out *a_ = run_workload(cfg_a, w, st_a), *b_ = run_workload(cfg_b, w, NULL);  \
        CHECK(a_ && b_);                                                                \
        int d_ = first_diff(w, a_, b_);                                                 \
        CHECKF(d_ < 0, "request %d differs: %d vs %d ids", d_, d_ < 0 ? 0 : a_[d_].s[0].n, \
               d_ < 0 ? 0 : b_[d_].s[0].n);                                             \
        for (int i_ = 0; i_ < (w)->n; i_++)                                             \
            CHECKF(a_[i_].s[0].n == (w)->max_tokens[i_], "request %d: %d of %d ids, finish %d", \
                   i_, a_[i_].s[0].n, (w)->max_tokens[i_], a_[i_].s[0].fr);                 \
        free(a_);                                                                       \
        free(b_);                                                                       \
    } while (0)

TEST(test_engine_64_requests_together_equal_each_alone) {
    workload *w = calloc(1, sizeof *w);
    make_workload(w, 64, 512, 5, 40, 24);
    run_cfg together = {"models/stories260K", 512, 2048, 64, 512, 1, 0};
    run_cfg alone = {"models/stories260K", 512, 2048, 64, 512, 0, 1};
    xi_engine_stats st;
    CHECK_SAME_OUTPUTS(&together, &alone, w, &st);
    CHECK_EQ(st.num_running + st.num_waiting, 0);
    CHECK_NEAR(st.kv_cache_usage, 0, 0);
    free(w);
}

TEST(test_engine_chunked_prefill_equals_one_shot_prefill) {
    workload *w = calloc(1, sizeof *w);
    make_workload(w, 12, 512, 40, 100, 12);
    run_cfg chunked = {"models/stories260K", 256, 16, 16, 512, 0, 0};
    run_cfg oneshot = {"models/stories260K", 256, 2048, 16, 512, 0, 0};
    xi_engine_stats st;
    CHECK_SAME_OUTPUTS(&chunked, &oneshot, w, &st);
    free(w);
}

TEST(test_engine_prefix_cache_hit_equals_miss) {
    workload *w = calloc(1, sizeof *w);
    make_workload(w, 4, 512, 70, 30, 16);
    req_out *miss = calloc(4, sizeof *miss), *hit = calloc(4, sizeof *hit);
    xi_engine *e = open_engine("models/stories260K", 256, 2048, 16, 512, 1);
    CHECK(e);
    CHECK(run_together(e, w, miss) > 0);
    CHECK(run_together(e, w, hit) > 0);
    xi_engine_stats st;
    xi_engine_get_stats(e, &st);
    xi_engine_close(e);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(miss[i].s[0].cached, 0);
        /* all full blocks but the one holding the last prompt token */
        CHECK_EQ(hit[i].s[0].cached, (w->n_prompt[i] - 1) / 16 * 16);
    }
    CHECK(st.prefix_cache_hits > 0);
    CHECK(st.prefix_cache_queries >= st.prefix_cache_hits);
    CHECKF(first_diff(w, miss, hit) < 0, "request %d differs", first_diff(w, miss, hit));
    free(w);
    free(miss);
    free(hit);
}

TEST(test_engine_tiny_kv_pool_preempts_often_and_matches_big_pool) {
    workload *w = calloc(1, sizeof *w);
    make_workload(w, 16, 512, 20, 40, 60);
    /* 12 blocks of 16 = 192 token slots for 16 requests of up to ~120 tokens */
    run_cfg small = {"models/stories260K", 12, 64, 16, 160, 1, 0};
    run_cfg big = {"models/stories260K", 512, 2048, 16, 160, 0, 0};
    xi_engine_stats st;
    CHECK_SAME_OUTPUTS(&small, &big, w, &st);
    CHECKF(st.num_preemptions >= 10, "only %lld preemptions", (long long)st.num_preemptions);
    free(w);
}

TEST(test_engine_abort_half_midflight_leaves_every_block_free) {
    workload *w = calloc(1, sizeof *w);
    make_workload(w, 16, 512, 20, 40, 40);
    req_out *out = calloc(16, sizeof *out);
    xi_engine *e = open_engine("models/stories260K", 128, 64, 8, 512, 1);
    CHECK(e);
    int64_t ids[16];
    for (int i = 0; i < 16; i++) CHECK((ids[i] = submit_one(e, w, i, &out[i])) >= 0);
    for (int s = 0; s < 6; s++) CHECK(xi_engine_step(e) > 0);
    xi_engine_stats st;
    xi_engine_get_stats(e, &st);
    CHECK(st.num_running > 0 && st.num_waiting > 0);
    for (int i = 0; i < 16; i += 2) CHECK(xi_engine_abort(e, ids[i]) == 0);
    CHECK(run_until_idle(e) >= 0);
    xi_engine_get_stats(e, &st);
    CHECK_EQ(st.num_running, 0);
    CHECK_EQ(st.num_waiting, 0);
    CHECK_NEAR(st.kv_cache_usage, 0, 0);
    for (int i = 0; i < 16; i++) {
        CHECK_EQ(out[i].s[0].n_final, 1);
        CHECK_EQ(out[i].s[0].fr, i % 2 ? XI_FINISH_LENGTH : XI_FINISH_ABORT);
    }
    /* every block is evictable: a request that needs the whole pool runs */
    xi_request_params rp;
    xi_request_params_default(&rp);
    int32_t p[1] = {1};
    rp.prompt_ids = p;
    rp.n_prompt_ids = 1;
    rp.max_tokens = 500;
    rp.ignore_eos = 1;
    rp.temperature = 0;
    req_out *last = calloc(1, sizeof *last);
    CHECK(xi_engine_submit(e, &rp, on_output, last, NULL, 0) >= 0);
    CHECK(run_until_idle(e) > 0);
    CHECK_EQ(last->s[0].n, 500);
    xi_engine_close(e);
    free(last);
    free(w);
    free(out);
}

TEST(test_engine_qwen2_together_chunked_equal_alone_oneshot) {
    workload *w = calloc(1, sizeof *w);
    make_workload(w, 8, 151936, 10, 60, 10);
    run_cfg together = {"models/qwen2-tiny-random", 64, 16, 8, 256, 1, 0};
    run_cfg alone = {"models/qwen2-tiny-random", 64, 2048, 8, 256, 0, 1};
    xi_engine_stats st;
    CHECK_SAME_OUTPUTS(&together, &alone, w, &st);
    free(w);
}

/* ---- randomized mix -------------------------------------------------------------------- */

typedef struct mix_req {
    int32_t prompt[100];
    int n_prompt, n, max_tokens, min_tokens;
    float temperature;
    int64_t seed;
    int32_t stop_id;
} mix_req;

static void mix_params(const mix_req *m, xi_request_params *rp) {
    xi_request_params_default(rp);
    rp->prompt_ids = m->prompt;
    rp->n_prompt_ids = m->n_prompt;
    rp->n = m->n;
    rp->max_tokens = m->max_tokens;
    rp->min_tokens = m->min_tokens;
    rp->temperature = m->temperature;
    rp->seed = m->seed;
    rp->stop_token_ids = &m->stop_id;
    rp->n_stop_token_ids = 1;
}

TEST(test_engine_random_mix_of_arrivals_samples_and_stops_matches_alone_runs) {
    enum { N = 24 };
    mix_req *m = calloc(N, sizeof *m);
    uint64_t x = 0x2545f4914f6cdd1dull;
#define RND(k) (x ^= x << 13, x ^= x >> 7, x ^= x << 17, (int)(x % (uint64_t)(k)))
    for (int i = 0; i < N; i++) {
        /* shared openings so prefix hits happen */
        m[i].n_prompt = 1 + RND(99);
        for (int k = 0; k < m[i].n_prompt; k++) m[i].prompt[k] = k < 40 ? 300 + (i % 3) * 7 + k % 5 : 3 + RND(509);
        m[i].prompt[0] = 1;
        m[i].n = 1 + RND(3);
        m[i].max_tokens = 1 + RND(40);
        m[i].min_tokens = RND(m[i].max_tokens + 1);
        m[i].temperature = RND(2) ? 0.0f : 0.7f + 0.1f * (float)RND(5);
        m[i].seed = 100 + i * 10;
        m[i].stop_id = 3 + RND(509);
    }
    req_out *mixed = calloc(N, sizeof *mixed);
    /* tiny pool, small budget, few sequences: preemption, chunking and queueing all happen */
    xi_engine *e = open_engine("models/stories260K", 24, 32, 6, 160, 1);
    CHECK(e);
    int next = 0, steps = 0, rc = 1;
    while ((next < N || rc > 0) && steps < 20000) {
        while (next < N && RND(3) == 0) {
            xi_request_params rp;
            mix_params(&m[next], &rp);
            CHECK(xi_engine_submit(e, &rp, on_output, &mixed[next], NULL, 0) >= 0);
            next++;
        }
        rc = xi_engine_step(e);
        CHECK(rc >= 0);
        steps++;
    }
    xi_engine_stats st;
    xi_engine_get_stats(e, &st);
    xi_engine_close(e);
    CHECK(st.num_preemptions > 0);
    CHECK(st.prefix_cache_hits > 0);
    /* each sample k alone: n = 1, seed + k, roomy pool, no caching, one-shot prefill */
    e = open_engine("models/stories260K", 256, 2048, 8, 160, 0);
    CHECK(e);
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < m[i].n; k++) {
            xi_request_params rp;
            mix_params(&m[i], &rp);
            rp.n = 1;
            rp.seed = m[i].seed + k;
            req_out *one = calloc(1, sizeof *one);
            CHECK(xi_engine_submit(e, &rp, on_output, one, NULL, 0) >= 0);
            CHECK(run_until_idle(e) > 0);
            CHECKF(same_seq(&one->s[0], &mixed[i].s[k]), "request %d sample %d: %d vs %d ids", i,
                   k, one->s[0].n, mixed[i].s[k].n);
            CHECK(one->s[0].n >= m[i].min_tokens);
            free(one);
        }
    }
    xi_engine_close(e);
    free(m);
    free(mixed);
#undef RND
}
