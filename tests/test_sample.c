#include <stdlib.h>

#include "base/base.h"
#include "sample/sample.h"
#include "test.h"

/* A sampler + scratch pair for a row of `vocab` logits. */
typedef struct {
    xi_sampler *s;
    xi_sample_scratch sc;
} rig;

static int rig_init(rig *r, const xi_sampling *p, const int32_t *prompt, int n_prompt, int vocab) {
    char err[256] = "";
    r->s = xi_sampler_new(p, prompt, n_prompt, vocab, err, sizeof err);
    if (!r->s) {
        fprintf(stderr, "sampler: %s\n", err);
        return -1;
    }
    return xi_sample_scratch_init(&r->sc, vocab, err, sizeof err);
}

static void rig_free(rig *r) {
    xi_sampler_free(r->s);
    xi_sample_scratch_free(&r->sc);
}

/* Logits whose softmax is exactly probs (up to rounding). */
static void logits_from_probs(float *x, const double *probs, int n) {
    for (int i = 0; i < n; i++) x[i] = probs[i] > 0 ? (float)log(probs[i]) : -INFINITY;
}

static void random_row(float *x, int n, uint64_t seed, float scale) {
    xi_rng r;
    xi_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (float)(xi_rng_uniform(&r) * 2 - 1) * scale;
}

TEST(test_greedy_is_argmax_with_lowest_id_on_tie) {
    float x[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, NAN};
    xi_sampling p;
    xi_sampling_default(&p);
    p.temperature = 0;
    rig r;
    CHECK(rig_init(&r, &p, NULL, 0, 6) == 0);
    CHECK_EQ(xi_sampler_sample(r.s, x, &r.sc), 1);
    x[1] = 1.0f;
    CHECK_EQ(xi_sampler_sample(r.s, x, &r.sc), 3);
    for (int i = 0; i < 6; i++) x[i] = -INFINITY;
    CHECK_EQ(xi_sampler_sample(r.s, x, &r.sc), -1);
    rig_free(&r);
}

TEST(test_top_k_1_equals_greedy) {
    enum { V = 1000 };
    static float x[V];
    xi_sampling p;
    xi_sampling_default(&p);
    p.top_k = 1;
    p.temperature = 1.5f;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        p.seed = seed;
        rig r;
        CHECK(rig_init(&r, &p, NULL, 0, V) == 0);
        random_row(x, V, seed * 77, 5);
        int32_t best = 0;
        for (int i = 1; i < V; i++)
            if (x[i] > x[best]) best = i;
        CHECK_EQ(xi_sampler_sample(r.s, x, &r.sc), best);
        rig_free(&r);
    }
}

static void draw_sequence(uint64_t seed, int32_t *out, int n, int vocab, const float *row) {
    xi_sampling p;
    xi_sampling_default(&p);
    p.seed = seed;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    rig r;
    if (rig_init(&r, &p, NULL, 0, vocab)) return;
    for (int i = 0; i < n; i++) {
        out[i] = xi_sampler_sample(r.s, row, &r.sc);
        xi_sampler_accept(r.s, out[i]);
    }
    rig_free(&r);
}

TEST(test_same_seed_same_tokens_different_seed_differs) {
    enum { V = 300, N = 64 };
    float row[V];
    random_row(row, V, 5, 3);
    int32_t a[N], b[N], c[N];
    draw_sequence(42, a, N, V, row);
    /* Another request running in between (a different batch) must not disturb the stream. */
    int32_t noise[N];
    draw_sequence(7, noise, N, V, row);
    draw_sequence(42, b, N, V, row);
    draw_sequence(43, c, N, V, row);
    CHECK(memcmp(a, b, sizeof a) == 0);
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == c[i];
    CHECKF(same < N / 2, "seeds 42 and 43 agree on %d of %d draws", same, N);
}

/* Chi-square statistic of counts against probs over n draws. */
static double chi_square(const int *counts, const double *probs, int k, int n) {
    double chi = 0;
    for (int i = 0; i < k; i++) {
        double e = probs[i] * n;
        if (e > 0) chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

TEST(test_sampling_frequencies_match_softmax) {
    /* Fixed seed: the outcome is deterministic, the bound is the 99.9% point of chi-square
     * with 7 degrees of freedom (24.32), so a correct sampler passes with margin. */
    enum { K = 8, N = 40000 };
    const double probs[K] = {0.30, 0.20, 0.15, 0.12, 0.10, 0.08, 0.04, 0.01};
    float x[K];
    logits_from_probs(x, probs, K);
    xi_sampling p;
    xi_sampling_default(&p);
    p.seed = 1234;
    rig r;
    CHECK(rig_init(&r, &p, NULL, 0, K) == 0);
    int counts[K] = {0};
    for (int i = 0; i < N; i++) {
        int32_t t = xi_sampler_sample(r.s, x, &r.sc);
        CHECK(t >= 0 && t < K);
        counts[t]++;
    }
    double chi = chi_square(counts, probs, K, N);
    CHECKF(chi < 24.32, "chi-square %.2f", chi);
    /* Temperature 2 flattens to softmax(x / 2) ∝ sqrt(p). */
    rig_free(&r);
    p.temperature = 2.0f;
    CHECK(rig_init(&r, &p, NULL, 0, K) == 0);
    double q[K], zq = 0;
    for (int i = 0; i < K; i++) zq += q[i] = sqrt(probs[i]);
    for (int i = 0; i < K; i++) q[i] /= zq;
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < N; i++) counts[xi_sampler_sample(r.s, x, &r.sc)]++;
    chi = chi_square(counts, q, K, N);
    CHECKF(chi < 24.32, "chi-square at T=2: %.2f", chi);
    rig_free(&r);
}

/* Sample n times; seen[i] counts draws of token i. */
static int draw_counts(const xi_sampling *p, const float *x, int vocab, int n, int *seen) {
    rig r;
    if (rig_init(&r, p, NULL, 0, vocab)) return -1;
    for (int i = 0; i < n; i++) {
        int32_t t = xi_sampler_sample(r.s, x, &r.sc);
        if (t < 0 || t >= vocab) return -1;
        seen[t]++;
    }
    rig_free(&r);
    return 0;
}

TEST(test_top_p_keeps_smallest_prefix_reaching_p) {
    enum { K = 5 };
    const double probs[K] = {0.1, 0.4, 0.05, 0.3, 0.15};
    float x[K];
    logits_from_probs(x, probs, K);
    /* Descending: 1 (.4), 3 (.7), 4 (.85), 0 (.95), 2 (1). */
    const struct { float p; int keep[K]; } cases[] = {
        {0.35f, {0, 1, 0, 0, 0}}, {0.41f, {0, 1, 0, 1, 0}}, {0.69f, {0, 1, 0, 1, 0}},
        {0.71f, {0, 1, 0, 1, 1}}, {0.90f, {1, 1, 0, 1, 1}}, {0.96f, {1, 1, 1, 1, 1}},
    };
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        xi_sampling p;
        xi_sampling_default(&p);
        p.top_p = cases[c].p;
        p.seed = 99 + c;
        int seen[K] = {0};
        CHECK(draw_counts(&p, x, K, 4000, seen) == 0);
        for (int i = 0; i < K; i++)
            CHECKF((seen[i] > 0) == cases[c].keep[i], "top_p %.2f token %d drawn %d times",
                   cases[c].p, i, seen[i]);
    }
}

TEST(test_top_p_on_large_vocab_keeps_the_head_only) {
    /* 152K tokens: a head of four and a long light tail (~0.3% mass). top_p 0.8 must keep
     * exactly the three best (cumulative .454, .729, .896). */
    enum { V = 152064 };
    float *x = malloc(V * sizeof *x);
    CHECK(x);
    random_row(x, V, 3, 2.5f);
    for (int i = 0; i < V; i++) x[i] -= 7.5f;
    const int head[4] = {90000, 17, 151000, 4242};
    const float hv[4] = {10.0f, 9.5f, 9.0f, 8.5f};
    for (int i = 0; i < 4; i++) x[head[i]] = hv[i];
    xi_sampling p;
    xi_sampling_default(&p);
    p.top_p = 0.8f;
    p.seed = 5;
    int *seen = calloc(V, sizeof *seen);
    CHECK(seen);
    CHECK(draw_counts(&p, x, V, 300, seen) == 0);
    int other = 300 - seen[head[0]] - seen[head[1]] - seen[head[2]];
    CHECK(seen[head[0]] > 0 && seen[head[1]] > 0 && seen[head[2]] > 0);
    CHECKF(other == 0, "%d draws outside the top-p set", other);
    /* Without top-p the tail and the fourth token do get drawn. */
    memset(seen, 0, V * sizeof *seen);
    p.top_p = 1.0f;
    CHECK(draw_counts(&p, x, V, 300, seen) == 0);
    CHECK(seen[head[3]] > 0);
    free(seen);
    free(x);
}

TEST(test_top_k_keeps_k_best_and_their_ties) {
    enum { K = 6 };
    float x[K] = {1.0f, 3.0f, 2.0f, 2.0f, 0.5f, 2.5f};
    xi_sampling p;
    xi_sampling_default(&p);
    p.top_k = 3; /* 3.0, 2.5, then 2.0 twice: both tied tokens stay */
    p.temperature = 3.0f;
    int seen[K] = {0};
    CHECK(draw_counts(&p, x, K, 4000, seen) == 0);
    const int keep[K] = {0, 1, 1, 1, 0, 1};
    for (int i = 0; i < K; i++) CHECKF((seen[i] > 0) == keep[i], "token %d: %d", i, seen[i]);
}

TEST(test_min_p_drops_tokens_below_fraction_of_best) {
    enum { K = 5 };
    const double probs[K] = {0.3, 0.5, 0.11, 0.09, 0.0};
    float x[K];
    logits_from_probs(x, probs, K);
    xi_sampling p;
    xi_sampling_default(&p);
    p.min_p = 0.2f; /* threshold 0.1: keeps 0.5, 0.3, 0.11 */
    p.seed = 11;
    int seen[K] = {0};
    CHECK(draw_counts(&p, x, K, 5000, seen) == 0);
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    CHECK_EQ(seen[3], 0);
    CHECK_EQ(seen[4], 0);
}

TEST(test_penalties_change_exactly_the_expected_logits) {
    enum { V = 8 };
    const int32_t prompt[] = {1, 2, 2};
    xi_logit_bias bias[] = {{6, 1.5f}, {1, 2.0f}};
    xi_sampling p;
    xi_sampling_default(&p);
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.bias = bias;
    p.n_bias = 2;
    rig r;
    CHECK(rig_init(&r, &p, prompt, 3, V) == 0);
    /* Output so far: 3 twice, 2 once, 5 once. */
    CHECK(xi_sampler_accept(r.s, 3) == 0);
    CHECK(xi_sampler_accept(r.s, 2) == 0);
    CHECK(xi_sampler_accept(r.s, 3) == 0);
    CHECK(xi_sampler_accept(r.s, 5) == 0);
    CHECK_EQ(xi_sampler_count(r.s, 3), 2);
    CHECK_EQ(xi_sampler_count(r.s, 1), 0);
    float row[V] = {1.0f, 2.0f, -2.0f, 4.0f, 3.0f, -1.0f, 0.0f, 7.0f};
    xi_sampler_apply_penalties(r.s, row, V);
    const float want[V] = {
        1.0f,                   /* untouched */
        2.0f,                   /* prompt only, biased first: (2 + 2) / 2 */
        -4.0f - 0.25f - 0.5f,   /* prompt + output once: -2 * 2, then -f - p */
        2.0f - 0.5f - 0.5f,     /* output twice: 4 / 2 - 2f - p */
        3.0f,                   /* untouched */
        -2.0f - 0.25f - 0.5f,   /* output once, negative: -1 * 2 - f - p */
        1.5f,                   /* bias */
        7.0f,
    };
    for (int i = 0; i < V; i++) CHECKF(row[i] == want[i], "token %d: %g != %g", i, row[i], want[i]);
    rig_free(&r);
}

TEST(test_logit_bias_minus_100_bans_a_token) {
    enum { K = 4 };
    float x[K] = {5.0f, 4.0f, 1.0f, 0.0f};
    xi_logit_bias ban = {0, -100.0f};
    xi_sampling p;
    xi_sampling_default(&p);
    p.bias = &ban;
    p.n_bias = 1;
    p.temperature = 0;
    rig r;
    CHECK(rig_init(&r, &p, NULL, 0, K) == 0);
    CHECK_EQ(xi_sampler_sample(r.s, x, &r.sc), 1);
    rig_free(&r);
    p.temperature = 1.0f;
    int seen[K] = {0};
    CHECK(draw_counts(&p, x, K, 5000, seen) == 0);
    CHECK_EQ(seen[0], 0);
    CHECK(seen[1] > 0 && seen[2] > 0);
}

TEST(test_min_tokens_masks_stop_ids_until_reached) {
    enum { K = 5 };
    float x[K] = {1.0f, 0.0f, 9.0f, 8.0f, 2.0f};
    const int32_t stops[] = {2, 3};
    xi_sampling p;
    xi_sampling_default(&p);
    p.temperature = 0;
    p.min_tokens = 3;
    p.stop_ids = stops;
    p.n_stop_ids = 2;
    rig r;
    CHECK(rig_init(&r, &p, NULL, 0, K) == 0);
    for (int i = 0; i < 3; i++) {
        int32_t t = xi_sampler_sample(r.s, x, &r.sc);
        CHECK_EQ(t, 4);
        CHECK(xi_sampler_accept(r.s, t) == 0);
    }
    CHECK_EQ(xi_sampler_sample(r.s, x, &r.sc), 2);
    CHECK_EQ(xi_sampler_n_generated(r.s), 3);
    rig_free(&r);
}

TEST(test_logprobs_normalise_and_rank_tokens) {
    enum { V = 50 };
    float x[V];
    random_row(x, V, 17, 4);
    x[10] = x[20]; /* a tie: both count toward each other's rank */
    double total = 0;
    xi_top_logprob top[XI_SAMPLE_MAX_TOP_LOGPROBS];
    for (int t = 0; t < V; t++) {
        xi_token_logprob lp;
        CHECK(xi_sample_logprobs(x, V, t, 5, &lp, top) == 0);
        total += exp(lp.logprob);
        int ge = 0;
        for (int j = 0; j < V; j++) ge += x[j] >= x[t];
        CHECK_EQ(lp.rank, ge);
        CHECK_EQ(lp.token, t);
    }
    CHECK_NEAR(total, 1.0, 1e-5);
    xi_token_logprob lp;
    CHECK(xi_sample_logprobs(x, V, 3, 20, &lp, top) == 0);
    CHECK(lp.top == top && lp.n_top == 20);
    for (int i = 0; i < 20; i++) {
        /* top[i] is the i-th best: exactly i tokens are strictly better or tied with lower id */
        int better = 0;
        for (int j = 0; j < V; j++)
            better += x[j] > x[top[i].token] || (x[j] == x[top[i].token] && j < top[i].token);
        CHECK_EQ(better, i);
        xi_token_logprob one;
        CHECK(xi_sample_logprobs(x, V, top[i].token, 0, &one, NULL) == 0);
        CHECK_NEAR(top[i].logprob, one.logprob, 1e-6);
        if (i == 0) CHECK_EQ(one.rank, 1);
    }
    CHECK(xi_sample_logprobs(x, V, V, 1, &lp, top) == -1);
    CHECK(xi_sample_logprobs(x, V, 0, 21, &lp, top) == -1);
}

TEST(test_sampler_rejects_bad_parameters_by_name) {
    char err[256];
    xi_sampling p;
    xi_sampling_default(&p);
    p.top_p = 0;
    CHECK(xi_sampler_new(&p, NULL, 0, 10, err, sizeof err) == NULL);
    CHECK(strncmp(err, "top_p", 5) == 0);
    xi_sampling_default(&p);
    xi_logit_bias b = {10, 1.0f};
    p.bias = &b;
    p.n_bias = 1;
    CHECK(xi_sampler_new(&p, NULL, 0, 10, err, sizeof err) == NULL);
    CHECK(strncmp(err, "logit_bias", 10) == 0);
    xi_sampling_default(&p);
    p.temperature = -1;
    CHECK(xi_sampler_new(&p, NULL, 0, 10, err, sizeof err) == NULL);
    CHECK(strncmp(err, "temperature", 11) == 0);
}

TEST(test_penalty_table_counts_many_distinct_tokens) {
    /* Thousands of distinct tokens force several regrowths of the sparse table. */
    enum { V = 152064, N = 5000 };
    int32_t prompt[300];
    for (int i = 0; i < 300; i++) prompt[i] = i * 7;
    xi_sampling p;
    xi_sampling_default(&p);
    p.repetition_penalty = 1.1f;
    char err[128];
    xi_sampler *s = xi_sampler_new(&p, prompt, 300, V, err, sizeof err);
    CHECK(s);
    for (int i = 0; i < N; i++) CHECK(xi_sampler_accept(s, (i * 31) % 4001) == 0);
    for (int t = 0; t < 4001; t += 97) {
        int want = 0;
        for (int i = 0; i < N; i++) want += (i * 31) % 4001 == t;
        CHECK_EQ(xi_sampler_count(s, t), want);
    }
    CHECK_EQ(xi_sampler_count(s, 150000), 0);
    xi_sampler_free(s);
}

TEST(test_top_k_on_large_vocab_keeps_exactly_k_best) {
    /* The histogram selection must land on the right boundary on a real-size row. */
    enum { V = 152064, K = 8, N = 400 };
    float *x = malloc(V * sizeof *x);
    int *seen = calloc(V, sizeof *seen);
    CHECK(x && seen);
    random_row(x, V, 21, 4);
    xi_sampling p;
    xi_sampling_default(&p);
    p.top_k = K;
    p.temperature = 50.0f; /* nearly uniform over the kept set, so all of it shows up */
    p.seed = 8;
    CHECK(draw_counts(&p, x, V, N, seen) == 0);
    float *sorted = malloc(V * sizeof *sorted);
    CHECK(sorted);
    memcpy(sorted, x, V * sizeof *x);
    for (int k = 0; k < K; k++) /* partial selection sort: the K best to the front */
        for (int j = k + 1; j < V; j++)
            if (sorted[j] > sorted[k]) {
                float t = sorted[k]; sorted[k] = sorted[j]; sorted[j] = t;
            }
    int kept = 0, drawn = 0;
    for (int i = 0; i < V; i++) {
        int in = x[i] >= sorted[K - 1];
        kept += in;
        if (seen[i]) CHECKF(in, "token %d (%g) drawn but below the %d-th value %g", i, x[i], K,
                            sorted[K - 1]);
        drawn += in && seen[i];
    }
    CHECK_EQ(kept, K);
    CHECK_EQ(drawn, K);
    free(sorted);
    free(seen);
    free(x);
}
