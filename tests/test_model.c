/* Model tests on real data: golden outputs of independent implementations, and the
 * batch / chunk invariance the engine relies on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_util.h"
#include "test.h"

/* Greedy-decode from prompt ids with one sequence, fp32 KV cache. */
static int greedy(xi_model *m, const int32_t *prompt, int n_prompt, int n_gen, int32_t *out) {
    const xi_config *c = xi_model_config(m);
    char err[256];
    xi_kv_store *kv = xi_kv_store_new(c, 64, 16, XI_F32, err, sizeof err);
    if (!kv) return -1;
    tm_seq s;
    tm_seq_init(&s, 1, 63);
    tm_seq *sp = &s;
    float *logits = malloc(sizeof(float) * c->vocab_size);
    const int32_t *ids = prompt;
    int n = n_prompt, rc = 0;
    for (int i = 0; i < n_gen && !rc; i++) {
        rc = tm_forward(m, kv, &sp, &ids, &n, 1, 0, logits);
        out[i] = tm_argmax(logits, c->vocab_size);
        ids = &out[i];
        n = 1;
    }
    free(logits);
    xi_kv_store_free(kv);
    return rc;
}

static void stories_greedy(const char *kernels) {
    xi_model *m = tm_load("models/stories260K", "float32", kernels, 2);
    CHECK(m);
    json_t *ref = tm_load_json("models/stories260K/reference.json");
    CHECK(ref);
    json_t *cases = json_object_get(ref, "cases");
    size_t ci;
    json_t *cs;
    json_array_foreach(cases, ci, cs) {
        json_t *pj = json_object_get(cs, "prompt_ids"), *gj = json_object_get(cs, "generated_ids");
        int np = (int)json_array_size(pj), ng = (int)json_array_size(gj);
        int32_t prompt[64], out[256];
        for (int i = 0; i < np; i++) prompt[i] = (int32_t)json_integer_value(json_array_get(pj, i));
        CHECK(greedy(m, prompt, np, ng, out) == 0);
        for (int i = 0; i < ng; i++)
            CHECKF(out[i] == json_integer_value(json_array_get(gj, i)),
                   "case %zu: token %d: got %d want %lld", ci, i, out[i],
                   json_integer_value(json_array_get(gj, i)));
    }
    json_decref(ref);
    xi_model_free(m);
}

/* Every kernel variant this CPU runs must reproduce the references. */
#define FOR_EACH_VARIANT(fn, ...)                                                  \
    do {                                                                           \
        const xi_ops *all_[8];                                                     \
        int n_ = xi_ops_available(all_, 8);                                        \
        for (int v_ = 0; v_ < n_; v_++) {                                          \
            fn(all_[v_]->name, ##__VA_ARGS__);                                     \
            CHECKF(!xi_test_failed(), "kernel variant %s", all_[v_]->name);        \
        }                                                                          \
    } while (0)

TEST(test_stories260k_greedy_matches_llama2c_reference) { FOR_EACH_VARIANT(stories_greedy); }

/* A Hugging Face reference (models/<rel>/reference.json): the first 8 logits at every
 * position and the whole last row within 1e-4, then greedy 32 equal. The largest errors seen
 * go to err_first8 / err_last (over every sequence) when not NULL. */
static void hf_reference(const char *kernels, const char *rel, double *err_first8, double *err_last) {
    xi_model *m = tm_load(rel, "float32", kernels, 2);
    CHECK(m);
    const xi_config *c = xi_model_config(m);
    char refpath[256];
    snprintf(refpath, sizeof refpath, "%s/reference.json", rel);
    json_t *ref = tm_load_json(refpath);
    CHECK(ref);
    size_t si;
    json_t *sq;
    char err[256];
    json_array_foreach(json_object_get(ref, "sequences"), si, sq) {
        json_t *idj = json_object_get(sq, "ids");
        int n = (int)json_array_size(idj);
        int32_t ids[128];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(idj, i));
        xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
        CHECK(kv);
        tm_seq s;
        tm_seq_init(&s, 1, 15);
        tm_seq *sp = &s;
        const int32_t *ip = ids;
        float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * n);
        CHECK(tm_forward(m, kv, &sp, &ip, &n, 1, 1, logits) == 0);
        /* first 8 logits at every position, and the whole last row */
        json_t *f8 = json_object_get(sq, "logits_first8_per_position");
        double maxerr = 0, e8 = 0, elast = 0;
        for (int p = 0; p < n; p++)
            for (int j = 0; j < 8; j++) {
                double d = fabs(logits[(size_t)p * c->vocab_size + j] -
                                json_number_value(json_array_get(json_array_get(f8, p), j)));
                if (d > e8) e8 = d;
            }
        json_t *last = json_object_get(sq, "logits_last");
        for (int j = 0; j < c->vocab_size; j++) {
            double d = fabs(logits[(size_t)(n - 1) * c->vocab_size + j] -
                            json_number_value(json_array_get(last, j)));
            if (d > elast) elast = d;
        }
        maxerr = e8 > elast ? e8 : elast;
        if (err_first8 && e8 > *err_first8) *err_first8 = e8;
        if (err_last && elast > *err_last) *err_last = elast;
        CHECKF(maxerr < 1e-4, "%s: max abs logit error %g", json_string_value(json_object_get(sq, "name")), maxerr);
        /* greedy continuation */
        json_t *g = json_object_get(sq, "greedy_32");
        int32_t next = tm_argmax(logits + (size_t)(n - 1) * c->vocab_size, c->vocab_size);
        for (size_t i = 0; i < json_array_size(g); i++) {
            CHECKF(next == json_integer_value(json_array_get(g, i)), "greedy step %zu: %d vs %lld", i,
                   next, json_integer_value(json_array_get(g, i)));
            const int32_t *np = &next;
            int one = 1;
            CHECK(tm_forward(m, kv, &sp, &np, &one, 1, 0, logits) == 0);
            next = tm_argmax(logits, c->vocab_size);
        }
        free(logits);
        xi_kv_store_free(kv);
    }
    json_decref(ref);
    xi_model_free(m);
}

TEST(test_qwen2_tiny_logits_match_reference) {
    FOR_EACH_VARIANT(hf_reference, "models/qwen2-tiny-random", NULL, NULL);
}
TEST(test_qwen3_tiny_logits_match_reference) {
    FOR_EACH_VARIANT(hf_reference, "models/qwen3-tiny-random", NULL, NULL);
}
TEST(test_qwen3moe_tiny_logits_match_reference) {
    FOR_EACH_VARIANT(hf_reference, "models/qwen3moe-tiny-random", NULL, NULL);
}

/* The same sequence computed alone and as one of 17 sequences in a batch gives the same bits;
 * so does feeding its prompt in chunks of 1, 5 and 16 tokens. */
static void invariance(const char *kernels, const char *rel, xi_dtype kvt) {
    xi_model *m = tm_load(rel, NULL, kernels, 2);
    CHECK(m);
    const xi_config *c = xi_model_config(m);
    const int V = c->vocab_size, NP = 40;
    char err[256];
    int32_t prompts[17][NP];
    uint64_t st = 12345;
    for (int s = 0; s < 17; s++)
        for (int i = 0; i < NP; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            prompts[s][i] = (int32_t)((st >> 33) % (uint64_t)(V < 500 ? V : 500));
        }
    float *alone = malloc(sizeof(float) * V), *batch = malloc(sizeof(float) * V * 17);
    /* alone, one chunk */
    xi_kv_store *kv = xi_kv_store_new(c, 17 * 4 + 1, 16, kvt, err, sizeof err);
    CHECK(kv);
    tm_seq s0;
    tm_seq_init(&s0, 1, 4);
    tm_seq *p0 = &s0;
    const int32_t *ip = prompts[0];
    int n = NP;
    CHECK(tm_forward(m, kv, &p0, &ip, &n, 1, 0, alone) == 0);
    /* 17 sequences in one batch (sequence 0 in the middle) */
    tm_seq ss[17];
    tm_seq *sp[17];
    const int32_t *ips[17];
    int ns[17];
    for (int s = 0; s < 17; s++) {
        int which = (s + 8) % 17;
        tm_seq_init(&ss[s], 1 + 4 * s, 4);
        sp[s] = &ss[s];
        ips[s] = prompts[which];
        ns[s] = NP - (which ? which % 7 : 0);
    }
    CHECK(tm_forward(m, kv, sp, ips, ns, 17, 0, batch) == 0);
    int at = 9; /* (9 + 8) % 17 == 0 */
    CHECK(memcmp(alone, batch + (size_t)at * V, sizeof(float) * V) == 0);
    /* chunks of 1, 5, 16 */
    int chunks[] = {1, 5, 16};
    for (int k = 0; k < 3; k++) {
        tm_seq sc;
        tm_seq_init(&sc, 1 + 4 * 16, 4);
        tm_seq *pc = &sc;
        for (int off = 0; off < NP; off += chunks[k]) {
            int len = NP - off < chunks[k] ? NP - off : chunks[k];
            const int32_t *cp = prompts[0] + off;
            CHECK(tm_forward(m, kv, &pc, &cp, &len, 1, 0, batch) == 0);
        }
        CHECKF(memcmp(alone, batch, sizeof(float) * V) == 0, "chunk size %d differs", chunks[k]);
    }
    free(alone);
    free(batch);
    xi_kv_store_free(kv);
    xi_model_free(m);
}

TEST(test_batch_and_chunk_invariance_stories260k) {
    FOR_EACH_VARIANT(invariance, "models/stories260K", XI_F32);
}
TEST(test_batch_and_chunk_invariance_qwen2_bf16_kv) {
    FOR_EACH_VARIANT(invariance, "models/qwen2-tiny-random", XI_BF16);
}

TEST(test_thread_count_does_not_change_logits) {
    float *a = NULL;
    for (int threads = 1; threads <= 3; threads++) {
        xi_model *m = tm_load("models/qwen2-tiny-random", NULL, NULL, threads);
        CHECK(m);
        const xi_config *c = xi_model_config(m);
        char err[256];
        xi_kv_store *kv = xi_kv_store_new(c, 8, 16, XI_F32, err, sizeof err);
        tm_seq s;
        tm_seq_init(&s, 1, 7);
        tm_seq *sp = &s;
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = 100 + 37 * i;
        const int32_t *ip = ids;
        int n = 20;
        float *l = malloc(sizeof(float) * c->vocab_size);
        CHECK(tm_forward(m, kv, &sp, &ip, &n, 1, 0, l) == 0);
        if (!a) a = l;
        else {
            CHECKF(memcmp(a, l, sizeof(float) * c->vocab_size) == 0, "%d threads differ", threads);
            free(l);
        }
        xi_kv_store_free(kv);
        xi_model_free(m);
    }
    free(a);
}

static void awq_reference(const char *kernels) {
    xi_model *m = tm_load("models/stories260K-awq", "float32", kernels, 2);
    CHECK(m);
    CHECK(!strcmp(xi_model_quantization(m), "awq"));
    const xi_config *c = xi_model_config(m);
    json_t *ref = tm_load_json("models/stories260K-awq/reference.json");
    CHECK(ref);
    json_t *g = json_object_get(ref, "greedy_ids_from_bos"), *fl = json_object_get(ref, "first_logits_0to7");
    char err[256];
    xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
    CHECK(kv);
    tm_seq s;
    tm_seq_init(&s, 1, 15);
    tm_seq *sp = &s;
    float *logits = malloc(sizeof(float) * c->vocab_size);
    int32_t tok = 1; /* BOS */
    double maxerr = 0;
    for (size_t i = 0; i < json_array_size(g); i++) {
        const int32_t *tp = &tok;
        int one = 1;
        CHECK(tm_forward(m, kv, &sp, &tp, &one, 1, 0, logits) == 0);
        if (i < json_array_size(fl))
            for (int j = 0; j < 8; j++) {
                double d = fabs(logits[j] - json_number_value(json_array_get(json_array_get(fl, i), j)));
                if (d > maxerr) maxerr = d;
            }
        tok = tm_argmax(logits, c->vocab_size);
        CHECKF(tok == json_integer_value(json_array_get(g, i)), "step %zu: %d vs %lld", i, tok,
               json_integer_value(json_array_get(g, i)));
    }
    CHECKF(maxerr < 1e-3, "max abs logit error %g", maxerr);
    free(logits);
    xi_kv_store_free(kv);
    json_decref(ref);
    xi_model_free(m);
}

TEST(test_stories260k_awq_matches_dequantized_reference) { FOR_EACH_VARIANT(awq_reference); }

/* int8 per-channel weights: a quarter of the f32 bytes, logits close to the float model. */
TEST(test_int8_quantization_tracks_float_model) {
    char err[256] = "";
    char *dir = xi_test_data("models/stories260K");
    xi_model_params pf = {.dir = dir, .n_threads = 2}, pq = pf;
    pq.quantization = "int8";
    xi_model *mf = xi_model_load(&pf, err, sizeof err), *mq = xi_model_load(&pq, err, sizeof err);
    CHECKF(mf && mq, "%s", err);
    CHECK(!strcmp(xi_model_quantization(mq), "int8"));
    CHECK(xi_model_weight_bytes(mq) < xi_model_weight_bytes(mf) / 2);
    const xi_config *c = xi_model_config(mf);
    xi_kv_store *kf = xi_kv_store_new(c, 8, 16, XI_F32, err, sizeof err),
                *kq = xi_kv_store_new(c, 8, 16, XI_F32, err, sizeof err);
    int32_t ids[12] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
    tm_seq a, b;
    tm_seq_init(&a, 1, 7);
    tm_seq_init(&b, 1, 7);
    tm_seq *pa = &a, *pb = &b;
    const int32_t *ip = ids;
    int n = 12;
    float *lf = malloc(sizeof(float) * c->vocab_size), *lq = malloc(sizeof(float) * c->vocab_size);
    CHECK(tm_forward(mf, kf, &pa, &ip, &n, 1, 0, lf) == 0);
    CHECK(tm_forward(mq, kq, &pb, &ip, &n, 1, 0, lq) == 0);
    double maxd = 0, range = 0;
    for (int j = 0; j < c->vocab_size; j++) {
        if (fabs(lf[j] - lq[j]) > maxd) maxd = fabs(lf[j] - lq[j]);
        if (fabs(lf[j]) > range) range = fabs(lf[j]);
    }
    CHECKF(maxd < 0.05 * range, "int8 logits differ by %g (logit range %g)", maxd, range);
    CHECK(maxd > 0); /* it really is a different weight format */
    CHECK(tm_argmax(lf, c->vocab_size) == tm_argmax(lq, c->vocab_size));
    free(lf);
    free(lq);
    xi_kv_store_free(kf);
    xi_kv_store_free(kq);
    xi_model_free(mf);
    xi_model_free(mq);
    free(dir);
}
