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

TEST(test_stories260k_greedy_matches_llama2c_reference) { TM_FOR_EACH_VARIANT(stories_greedy); }

TEST(test_qwen2_tiny_logits_match_reference) {
    TM_FOR_EACH_VARIANT(tm_reference, "models/qwen2-tiny-random", NULL, NULL);
}


TEST(test_batch_and_chunk_invariance_stories260k) {
    TM_FOR_EACH_VARIANT(tm_invariance, "models/stories260K", XI_F32, NULL);
}
TEST(test_batch_and_chunk_invariance_qwen2_bf16_kv) {
    TM_FOR_EACH_VARIANT(tm_invariance, "models/qwen2-tiny-random", XI_BF16, NULL);
}
TEST(test_batch_and_chunk_invariance_qwen3) {
    TM_FOR_EACH_VARIANT(tm_invariance, "models/qwen3-tiny-random", XI_F32, NULL);
}
/* MoE: 17 sequences route their rows to the experts together, yet each gets its own bits. */
TEST(test_batch_and_chunk_invariance_qwen3moe_bf16_kv) {
    TM_FOR_EACH_VARIANT(tm_invariance, "models/qwen3moe-tiny-random", XI_BF16, NULL);
}
TEST(test_batch_and_chunk_invariance_qwen3moe_int8_experts) {
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance, "models/qwen3moe-tiny-random", XI_F32, "int8");
}
/* Quantized weights in both activation precisions: int8 activations are quantized per row,
 * so a row's bits still do not depend on its neighbours. */
TEST(test_batch_and_chunk_invariance_stories260k_awq) {
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance, "models/stories260K-awq", XI_F32, NULL);
}
TEST(test_batch_and_chunk_invariance_stories260k_int8) {
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance, "models/stories260K", XI_F32, "int8");
}

/* 1, 2 and 3 threads give the same bits, on the kernel variant named. */
static void thread_invariance_q(const char *kernels, const char *rel, const char *quant) {
    float *a = NULL;
    for (int threads = 1; threads <= 3; threads++) {
        xi_model *m = tm_load_ex(rel, NULL, quant, kernels, threads);
        CHECK(m);
        const xi_config *c = xi_model_config(m);
        char err[256];
        xi_kv_store *kv = xi_kv_store_new(c, 8, 16, XI_F32, err, sizeof err);
        tm_seq s;
        tm_seq_init(&s, 1, 7);
        tm_seq *sp = &s;
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = (100 + 37 * i) % c->vocab_size;
        const int32_t *ip = ids;
        int n = 20;
        float *l = malloc(sizeof(float) * c->vocab_size);
        CHECK(tm_forward(m, kv, &sp, &ip, &n, 1, 0, l) == 0);
        if (!a) a = l;
        else {
            CHECKF(memcmp(a, l, sizeof(float) * c->vocab_size) == 0, "%s: %d threads differ", rel, threads);
            free(l);
        }
        xi_kv_store_free(kv);
        xi_model_free(m);
    }
    free(a);
}

static void thread_invariance(const char *kernels, const char *rel) { thread_invariance_q(kernels, rel, NULL); }

TEST(test_thread_count_does_not_change_logits) { TM_FOR_EACH_VARIANT(thread_invariance, "models/qwen2-tiny-random"); }
TEST(test_thread_count_does_not_change_qwen3_logits) { TM_FOR_EACH_VARIANT(thread_invariance, "models/qwen3-tiny-random"); }
/* Quantized models in both precisions (int8 is the default). */
TEST(test_thread_count_does_not_change_int8_path_logits) {
    TM_FOR_EACH_VARIANT_IN(3, thread_invariance_q, "models/stories260K-awq", NULL);
    TM_FOR_EACH_VARIANT_IN(3, thread_invariance_q, "models/stories260K", "int8");
}
TEST(test_thread_count_does_not_change_qwen3moe_logits) {
    TM_FOR_EACH_VARIANT(thread_invariance, "models/qwen3moe-tiny-random");
    TM_FOR_EACH_VARIANT_IN(3, thread_invariance_q, "models/qwen3moe-tiny-random", "int8");
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

/* The reference is of fp32 activations; the int8 path's distance to it is measured in
 * test_model_qdot.c. */
TEST(test_stories260k_awq_matches_dequantized_reference) { TM_FOR_EACH_VARIANT_IN(1, awq_reference); }

/* int8 per-channel weights: a quarter of the f32 bytes, logits close to the float model. */
TEST(test_int8_quantization_tracks_float_model) {
    const int32_t ids[12] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
    tm_int8_tracks_float("models/stories260K", ids, 12, 0.5);
}
