/* Weight types as data: every llama.cpp-quantized llama256 file dequantizes to its F32
 * original within the type's error, the integer dot reference agrees with dequantize + fp32
 * dot, and types without a reference are refused by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/qtypes.h"
#include "model/gguf.h"
#include "test.h"

typedef struct type_case {
    const char *file;  /* gguf/llama256-random-FILE.gguf */
    int id;            /* the type of its 2-D weights (--pure) */
    double max_rel_rms; /* bound on RMS(error) / RMS(weights) over a tensor */
} type_case;

/* The bounds sit about 1.5x above what each format's step size gives on these Gaussian weights
 * (measured: see the printed table); a wrong layout gives errors near 1.4. */
static const type_case cases[] = {
    {"f16", XI_GGML_F16, 1e-3},    {"bf16", XI_GGML_BF16, 5e-3},   {"q8_0", XI_GGML_Q8_0, 0.008},
    {"q6_k", XI_GGML_Q6_K, 0.03},  {"q5_k_m", XI_GGML_Q5_K, 0.06}, {"q5_1", XI_GGML_Q5_1, 0.06},
    {"q5_0", XI_GGML_Q5_0, 0.065},  {"iq4_nl", XI_GGML_IQ4_NL, 0.12}, {"q4_k_m", XI_GGML_Q4_K, 0.12},
    {"q4_1", XI_GGML_Q4_1, 0.12},  {"q4_0", XI_GGML_Q4_0, 0.14},   {"q3_k_m", XI_GGML_Q3_K, 0.25},
    {"q2_k", XI_GGML_Q2_K, 0.5},
};

static xi_gguf *open_case(const char *name, char *err, size_t errlen) {
    char rel[128];
    snprintf(rel, sizeof rel, "gguf/llama256-random-%s.gguf", name);
    return xi_gguf_open(xi_test_data(rel), err, errlen);
}

TEST(test_qtypes_dequantize_every_llama256_type_close_to_f32) {
    char err[512] = "";
    xi_gguf *ref = open_case("f32", err, sizeof err);
    CHECKF(ref, "%s", err);
    printf("  %-8s %8s %12s %12s %9s\n", "type", "tensors", "max |err|", "RMS err", "rel RMS");
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        xi_gguf *g = open_case(cases[c].file, err, sizeof err);
        CHECKF(g, "%s", err);
        int n2d = 0;
        double worst_rel = 0, max_abs = 0, sum_e2 = 0, n_all = 0;
        for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
            const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
            if (t->n_dims != 2) {
                CHECKF(t->type->id == XI_GGML_F32, "%s %s: 1-D tensor of type %s", cases[c].file,
                       t->name, t->type->name);
                continue;
            }
            CHECKF(t->type->id == cases[c].id, "%s %s: type %s", cases[c].file, t->name,
                   t->type->name);
            const xi_gguf_tensor *r = xi_gguf_find_tensor(ref, t->name);
            CHECK(r && r->ne[0] == t->ne[0] && r->ne[1] == t->ne[1]);
            int64_t cols = t->ne[0], rows = t->ne[1];
            size_t rb = xi_qtype_row_bytes(t->type, cols);
            CHECK(rb * (size_t)rows == t->nbytes);
            float *y = malloc((size_t)cols * 4), *x = malloc((size_t)cols * 4);
            double e2 = 0, w2 = 0;
            for (int64_t row = 0; row < rows; row++) {
                xi_qtype_dequant_row(t->type, (const uint8_t *)t->data + (size_t)row * rb, y, cols);
                memcpy(x, (const float *)r->data + row * cols, (size_t)cols * 4);
                for (int64_t k = 0; k < cols; k++) {
                    double e = (double)y[k] - x[k];
                    e2 += e * e;
                    w2 += (double)x[k] * x[k];
                    if (fabs(e) > max_abs) max_abs = fabs(e);
                }
            }
            free(y);
            free(x);
            double rel = sqrt(e2 / w2);
            if (rel > worst_rel) worst_rel = rel;
            sum_e2 += e2;
            n_all += (double)(cols * rows);
            n2d++;
        }
        printf("  %-8s %8d %12.3g %12.3g %9.4f\n", cases[c].file, n2d, max_abs,
               sqrt(sum_e2 / n_all), worst_rel);
        CHECKF(n2d == 2 * 7 + 2, "%s: %d 2-D tensors", cases[c].file, n2d);
        CHECKF(worst_rel <= cases[c].max_rel_rms, "%s: relative RMS error %.4f > %.4f",
               cases[c].file, worst_rel, cases[c].max_rel_rms);
        /* Exact types must be exact: F16 and BF16 of BF16 weights lose nothing. */
        if (cases[c].id == XI_GGML_BF16) CHECKF(max_abs == 0, "bf16: max error %g", max_abs);
        xi_gguf_close(g);
    }
    xi_gguf_close(ref);
}

static uint64_t rng_state = 88172645463325252ull;
static double rnd(void) { /* xorshift64, uniform in [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Activations on the 8-bit grid: integers in [-127, 127] times 2^-6, with the block's first
 * value -127 * 2^-6, so every activation format quantizes them exactly and the integer dot
 * must equal the exact dot of the dequantized weights (up to fp32 rounding of the sum). */
static void exact_activations(float *x, int64_t n) {
    for (int64_t k = 0; k < n; k++)
        x[k] = (k % 32 == 0 ? -127.0f : (float)((int)(rnd() * 255) - 127)) / 64.0f;
}

TEST(test_qtypes_integer_dot_matches_dequantized_dot) {
    char err[512] = "";
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        xi_gguf *g = open_case(cases[c].file, err, sizeof err);
        CHECKF(g, "%s", err);
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "blk.0.ffn_down.weight");
        CHECK(t && t->ne[0] == 768);
        const xi_qtype *q = t->type;
        int64_t n = t->ne[0];
        size_t rb = xi_qtype_row_bytes(q, n);
        int ab = xi_act_block(q->act);
        CHECKF(q->act == XI_ACT_F32 || q->block % ab == 0, "%s", q->name);
        size_t act_bytes = (size_t)(n / ab) * (size_t)xi_act_block_bytes(q->act);
        float *x = malloc((size_t)n * 4), *w = malloc((size_t)n * 4);
        uint8_t *act = malloc(act_bytes);
        double worst_exact = 0, worst_rand = 0;
        for (int row = 0; row < 64; row++) {
            const uint8_t *wr = (const uint8_t *)t->data + (size_t)row * rb;
            xi_qtype_dequant_row(q, wr, w, n);
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 0) exact_activations(x, n);
                else for (int64_t k = 0; k < n; k++) x[k] = (float)(rnd() * 2 - 1) * 3.0f;
                xi_qtype_quantize_act(q->act, x, act, n);
                float got = xi_qtype_dot_ref(q, wr, act, n);
                double exact = 0, mag = 0;
                for (int64_t k = 0; k < n; k++) {
                    exact += (double)w[k] * x[k];
                    mag += fabs((double)w[k] * x[k]);
                }
                double rel = fabs(got - exact) / mag;
                if (pass == 0 && rel > worst_exact) worst_exact = rel;
                if (pass == 1 && rel > worst_rand) worst_rand = rel;
            }
        }
        printf("  %-8s act %-5s exact-grid rel err %.2e, random rel err %.2e\n", q->name,
               q->act == XI_ACT_Q8_0 ? "q8_0" : q->act == XI_ACT_Q8_1 ? "q8_1"
               : q->act == XI_ACT_Q8_K ? "q8_K" : "f32", worst_exact, worst_rand);
        /* On the grid only fp32 rounding of the sums remains (measured <= 3e-8); random
         * activations add the 8-bit rounding of x (measured <= 8e-4). */
        CHECKF(worst_exact < 1e-6, "%s: exact-grid dot off by %.2e", q->name, worst_exact);
        CHECKF(worst_rand < 3e-3, "%s: random dot off by %.2e", q->name, worst_rand);
        free(x);
        free(w);
        free(act);
        xi_gguf_close(g);
    }
}

TEST(test_qtypes_activation_formats_match_llama_cpp_layouts) {
    /* Q8_K: the largest magnitude maps to -127 with its sign; bsums are sums of 16. */
    float x[256];
    for (int k = 0; k < 256; k++) x[k] = (float)(k % 17) - 8.0f;
    x[5] = 12.7f;
    uint8_t out[292];
    xi_qtype_quantize_act(XI_ACT_Q8_K, x, out, 256);
    float d;
    memcpy(&d, out, 4);
    CHECK_NEAR(d, -0.1, 1e-7);
    CHECK_EQ((int8_t)out[4 + 5], -127);
    int16_t bs[16];
    memcpy(bs, out + 260, 32);
    int s0 = 0;
    for (int k = 0; k < 16; k++) s0 += (int8_t)out[4 + k];
    CHECK_EQ(bs[0], s0);
    /* Q8_0: f16 d = amax / 127, values rounded half away from zero. */
    uint8_t q8[34];
    float y[32] = {0};
    y[0] = 127.0f;
    y[1] = -63.5f;
    xi_qtype_quantize_act(XI_ACT_Q8_0, y, q8, 32);
    CHECK_EQ(q8[0] | q8[1] << 8, 0x3c00); /* 1.0 in f16 */
    CHECK_EQ((int8_t)q8[2], 127);
    CHECK_EQ((int8_t)q8[3], -64);
    CHECK_EQ(xi_act_block_bytes(XI_ACT_Q8_1), 36);
}

TEST(test_qtypes_unsupported_types_are_known_by_name_and_refused) {
    const char *known_only[] = {"iq2_xxs", "iq3_s", "iq4_xs", "tq1_0", "mxfp4", "i32", "q8_K"};
    for (size_t i = 0; i < XI_ARRAY_LEN(known_only); i++) {
        const xi_qtype *t = xi_qtype_by_name(known_only[i]);
        CHECKF(t, "%s unknown", known_only[i]);
        CHECKF(!xi_qtype_supported(t), "%s claims a dequantizer", known_only[i]);
    }
    const char *computed[] = {"F32", "f16", "bf16", "q8_0", "Q4_0", "q4_1", "q5_0", "q5_1",
                              "Q2_K", "q3_k", "q4_K", "q5_K", "Q6_K", "IQ4_NL"};
    for (size_t i = 0; i < XI_ARRAY_LEN(computed); i++)
        CHECKF(xi_qtype_supported(xi_qtype_by_name(computed[i])), "%s", computed[i]);
    CHECK(!xi_qtype_get(31)); /* removed from ggml: not a type */
    CHECK(!xi_qtype_get(-1));
    CHECK(!xi_qtype_by_name("q4_k_m")); /* a file mixture, not a tensor type */
    CHECK_EQ(xi_qtype_row_bytes(xi_qtype_get(XI_GGML_Q4_K), 512), 288);
    CHECK_EQ(xi_qtype_row_bytes(xi_qtype_get(XI_GGML_Q4_K), 100), 0);
}
