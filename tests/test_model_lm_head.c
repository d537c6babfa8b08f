/* --lm-head-quantization int8: the lm_head quantized per vocabulary row at load (XI_Q8), the
 * token embedding left as stored. What changes is the lm_head alone: the same hidden rows, its
 * weights within half a step of the 16-bit ones, each logit within the error those steps (and
 * the 8-bit activations, at int8 precision) can make, fewer bytes where it is its own matrix,
 * and the batch / chunk invariance kept. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model_internal.h"
#include "model_util.h"
#include "test.h"

static const int32_t IDS[12] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};

/* Logits of the last of ids into out[vocab]. */
static int last_logits(xi_model *m, const int32_t *ids, int n, float *out) {
    char err[256];
    xi_kv_store *kv = xi_kv_store_new(xi_model_config(m), 8, 16, XI_F32, err, sizeof err);
    if (!kv) return -1;
    tm_seq s;
    tm_seq_init(&s, 1, 7);
    tm_seq *sp = &s;
    int rc = tm_forward(m, kv, &sp, &ids, &n, 1, 0, out);
    xi_kv_store_free(kv);
    return rc;
}

/* Model rel (shared-data relative or absolute) with the lm_head as stored (a) and int8 (b). */
static void lm_head_int8(const char *kernels, const char *rel) {
    xi_model *a = tm_load_lm(rel, NULL, NULL, NULL, kernels, 2);
    xi_model *b = tm_load_lm(rel, NULL, NULL, "int8", kernels, 2);
    CHECK(a && b);
    const xi_config *c = xi_model_config(a);
    const int64_t V = c->vocab_size, H = c->hidden_size;
    CHECK(a->lm_head.dtype != XI_Q8 && b->lm_head.dtype == XI_Q8);
    CHECK(b->lm_head.n_out == V && b->lm_head.n_in == H);
    CHECK(!strcmp(xi_model_lm_head_quantization(a), "none"));
    CHECK(!strcmp(xi_model_lm_head_quantization(b), "int8"));
    /* the embedding lookup keeps its 16-bit (or f32) table; the lm_head is a copy of its own */
    CHECK(b->embed.dtype == a->embed.dtype && b->embed.data != b->lm_head.data);
    /* bytes: V*H int8 + a float scale per row, in place of the 16-bit matrix when untied and
     * in addition to the embedding when tied; the parameters are counted once either way */
    const int64_t q8 = V * H + V * 4, f16 = c->tie_word_embeddings ? 0 : V * H * (int64_t)xi_dtype_size(a->lm_head.dtype);
    CHECKF(xi_model_weight_bytes(b) == xi_model_weight_bytes(a) - f16 + q8, "weight bytes %lld vs %lld",
           (long long)xi_model_weight_bytes(b), (long long)xi_model_weight_bytes(a));
    CHECK(xi_model_n_params(b) == xi_model_n_params(a));

    float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
    float *wa = malloc(sizeof(float) * H), *wb = malloc(sizeof(float) * H);
    CHECK(last_logits(a, IDS, 12, la) == 0 && last_logits(b, IDS, 12, lb) == 0);
    /* everything before the lm_head is the same computation: the same normed hidden row */
    CHECK(memcmp(a->hlast, b->hlast, sizeof(float) * H) == 0);
    const float *x = a->hlast;
    double xmax = 0;
    for (int64_t j = 0; j < H; j++) xmax = fmax(xmax, fabs(x[j]));
    /* int8 activations: symmetric absmax rounding over a group holding x[j] moves it by at
     * most half a step of the row's largest magnitude */
    const int act8 = !strcmp(xi_model_ops(b)->precision, "int8");
    double worst = 0, maxd = 0;
    for (int64_t i = 0; i < V; i++) {
        xi_weight_row(&a->lm_head, i, wa);
        xi_weight_row(&b->lm_head, i, wb);
        double amax = 0, bound = 0, mag = 0;
        for (int64_t j = 0; j < H; j++) amax = fmax(amax, fabs(wa[j]));
        const double step = amax / 127;
        for (int64_t j = 0; j < H; j++) {
            const double dw = fabs((double)wb[j] - wa[j]);
            CHECKF(dw <= step / 2 * (1 + 1e-5) + 1e-30, "row %lld col %lld: int8 weight %g is %g from %g (step %g)",
                   (long long)i, (long long)j, wb[j], dw, wa[j], step);
            bound += fabs(x[j]) * dw + (act8 ? fabs(wb[j]) * xmax / 254 : 0);
            mag += fabs(x[j]) * (fabs(wa[j]) + fabs(wb[j]));
        }
        /* plus float rounding of the two dot products */
        const double d = fabs((double)la[i] - lb[i]), slack = bound + 1e-5 * mag + 1e-6;
        maxd = fmax(maxd, d);
        worst = fmax(worst, d / slack);
    }
    CHECKF(worst <= 1, "a logit moved %g times its bound", worst);
    CHECK(maxd > 0); /* it really is another weight format */
    CHECK(tm_argmax(la, (int)V) == tm_argmax(lb, (int)V));
    free(la);
    free(lb);
    free(wa);
    free(wb);
    xi_model_free(a);
    xi_model_free(b);
}

TEST(test_lm_head_int8_awq_tied) { TM_FOR_EACH_VARIANT_IN(3, lm_head_int8, "models/stories260K-awq"); }
TEST(test_lm_head_int8_f32_tied) { TM_FOR_EACH_VARIANT_IN(3, lm_head_int8, "models/stories260K"); }
TEST(test_lm_head_int8_bf16_qwen2) { TM_FOR_EACH_VARIANT_IN(3, lm_head_int8, "models/qwen2-tiny-random"); }

/* An untied lm_head (Llama 3 layout) in an AWQ checkpoint: the int8 matrix replaces it. */
TEST(test_lm_head_int8_awq_untied) {
    char *dir = tm_genmodel("lm-head-untied-awq", "tiny-llama", "--awq --group-size 32 --seed 21");
    CHECK(dir);
    TM_FOR_EACH_VARIANT_IN(3, lm_head_int8, dir);
    free(dir);
}

/* stories260K (trained): greedy decoding unchanged for 32 tokens. */
TEST(test_lm_head_int8_greedy_stories260k) {
    xi_model *a = tm_load_lm("models/stories260K-awq", NULL, NULL, NULL, NULL, 2);
    xi_model *b = tm_load_lm("models/stories260K-awq", NULL, NULL, "int8", NULL, 2);
    CHECK(a && b);
    const int V = xi_model_config(a)->vocab_size;
    char err[256];
    xi_kv_store *ka = xi_kv_store_new(xi_model_config(a), 8, 16, XI_F32, err, sizeof err),
                *kb = xi_kv_store_new(xi_model_config(b), 8, 16, XI_F32, err, sizeof err);
    CHECK(ka && kb);
    tm_seq sa, sb;
    tm_seq_init(&sa, 1, 7);
    tm_seq_init(&sb, 1, 7);
    tm_seq *pa = &sa, *pb = &sb;
    float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
    int32_t ta = 1, tb = 1; /* BOS: a story */
    for (int t = 0; t < 32; t++) {
        const int32_t *ia = &ta, *ib = &tb;
        int one = 1;
        CHECK(tm_forward(a, ka, &pa, &ia, &one, 1, 0, la) == 0 && tm_forward(b, kb, &pb, &ib, &one, 1, 0, lb) == 0);
        ta = tm_argmax(la, V);
        tb = tm_argmax(lb, V);
        CHECKF(ta == tb, "step %d: %d vs %d", t, ta, tb);
    }
    free(la);
    free(lb);
    xi_kv_store_free(ka);
    xi_kv_store_free(kb);
    xi_model_free(a);
    xi_model_free(b);
}

TEST(test_lm_head_int8_batch_and_chunk_invariance) {
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance_lm, "models/stories260K-awq", XI_F32, NULL, "int8");
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance_lm, "models/qwen2-tiny-random", XI_BF16, NULL, "int8");
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance_lm, "models/stories260K", XI_F32, "int8", "int8");
}

/* A GGUF file's output matrix is already in the file's type: it stays so, and the model says
 * its lm_head is not int8; a float GGUF's is quantized as a safetensors one. */
TEST(test_lm_head_int8_gguf) {
    xi_model *q = tm_load_lm("gguf/llama256-random-q4_0.gguf", NULL, NULL, "int8", NULL, 1);
    xi_model *f = tm_load_lm("gguf/llama256-random-f16.gguf", NULL, NULL, "int8", NULL, 1);
    CHECK(q && f);
    CHECK(q->lm_head.dtype == XI_GGML && !strcmp(xi_model_lm_head_quantization(q), "none"));
    CHECK(f->lm_head.dtype == XI_Q8 && !strcmp(xi_model_lm_head_quantization(f), "int8"));
    xi_model_free(q);
    xi_model_free(f);
}

TEST(test_lm_head_quantization_bad_value_refused) {
    char *dir = xi_test_data("models/stories260K");
    char err[256] = "";
    xi_model_params p = {.dir = dir, .lm_head_quantization = "int4", .n_threads = 1};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    CHECK(!m);
    CHECKF(strstr(err, "--lm-head-quantization int4: expected none or int8"), "%s", err);
    xi_model_free(m);
    free(dir);
}
