/* Kernel test helpers: random weights of every format and random inputs. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernel_util.h"
#ifdef XI_TEST_AVX512_EMULATED
#include "avx512_emulated.h"
#endif
#include "model/gguf.h"
#include "test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
float frand(void) { return (float)(rnd() % 20001) / 10000.0f - 1.0f; } /* [-1, 1] */

void weight_make(test_weight *t, xi_dtype dt, int64_t n_out, int64_t n_in, int gs) {
    memset(t, 0, sizeof *t);
    const int64_t n = n_out * n_in;
    t->w.dtype = dt;
    t->w.n_out = n_out;
    t->w.n_in = n_in;
    switch (dt) {
    case XI_F32:
    case XI_F16:
    case XI_BF16: {
        float *f = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) f[i] = frand();
        t->data = malloc((size_t)n * xi_dtype_size(dt));
        xi_from_f32(t->data, dt, f, (size_t)n);
        free(f);
        break;
    }
    case XI_Q8: {
        int8_t *q = malloc((size_t)n);
        for (int64_t i = 0; i < n; i++) q[i] = (int8_t)((int)(rnd() % 255) - 127);
        t->data = q;
        t->scale = malloc((size_t)n_out * 4);
        for (int64_t i = 0; i < n_out; i++) t->scale[i] = 0.01f + 0.001f * (float)(rnd() % 50);
        break;
    }
    case XI_Q4_AWQ: {
        const int64_t groups = n_out * (n_in / gs);
        uint8_t *q = malloc((size_t)n / 2);
        for (int64_t i = 0; i < n / 2; i++) q[i] = (uint8_t)rnd();
        t->data = q;
        t->scale = malloc((size_t)groups * 4);
        t->zero = malloc((size_t)groups);
        for (int64_t i = 0; i < groups; i++) {
            t->scale[i] = 0.005f + 0.001f * (float)(rnd() % 30);
            t->zero[i] = (uint8_t)(rnd() % 16);
        }
        t->w.group_size = gs;
        break;
    }
    default: break;
    }
    t->w.data = t->data;
    t->w.scale = t->scale;
    t->w.zero = t->zero;
}

void weight_free(test_weight *t) {
    free(t->data);
    free(t->scale);
    free(t->zero);
}

float *rand_vec(int64_t n) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) v[i] = frand();
    return v;
}

/* A random weight in format f; blocked formats round n_out up to a multiple of the block.
 * Returns whether the weight has the layout f asks for. */
int weight_make_f(test_weight *t, const wfmt *f, int64_t n_out, int64_t n_in) {
    if (f->block) n_out = (n_out + f->block - 1) / f->block * f->block;
    weight_make(t, f->dt, n_out, n_in, f->gs);
    return xi_weight_block(&t->w, f->block, NULL, 0) == 0 && t->w.block == f->block;
}

const char *const GQ_LLAMA256[11] = {"q8_0", "q4_0",   "q4_1",   "q5_0", "q5_1", "iq4_nl",
                                     "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"};

struct xi_gguf *gq_llama256_open(size_t f, char *err, size_t errlen) {
    char rel[128];
    snprintf(rel, sizeof rel, "gguf/llama256-random-%s.gguf", GQ_LLAMA256[f]);
    return xi_gguf_open(xi_test_data(rel), err, errlen);
}

static void set_f16(uint8_t *p, float v) {
    const uint16_t h = xi_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

void gq_fix_scales(const xi_qtype *t, uint8_t *blk) {
    switch (t->id) {
    case XI_GGML_Q2_K: set_f16(blk + 80, 0.01f), set_f16(blk + 82, 0.02f); break;
    case XI_GGML_Q3_K: set_f16(blk + 108, 0.01f); break;
    case XI_GGML_Q6_K: set_f16(blk + 208, 0.003f); break;
    case XI_GGML_Q4_K:
    case XI_GGML_Q5_K: set_f16(blk, 0.004f), set_f16(blk + 2, -0.002f); break;
    case XI_GGML_Q4_1:
    case XI_GGML_Q5_1: set_f16(blk, 0.05f), set_f16(blk + 2, -0.3f); break;
    default: set_f16(blk, 0.05f); break;
    }
}

int int8_variants(const xi_ops **out) {
    int n = xi_ops_available(out, 7);
    for (int i = 0; i < n; i++) out[i] = xi_ops_precision(out[i], "int8", NULL, 0);
#ifdef XI_TEST_AVX512_EMULATED
    /* the avx512 int8 table's integer matmuls through SIMDe, as one more variant: avx2's int8
     * table (which asks for the packed GGML layout too) with them */
    static xi_ops emu;
    if (!emu.name) {
        emu = *xi_ops_precision(xi_ops_avx2(), "int8", NULL, 0);
        emu.name = "avx512-emulated";
        emu.matmul_q = xi_matmul_q_avx512_emulated;
        emu.matmul_gq = xi_matmul_gq_avx512_emulated;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(out[i]->name, "avx2")) {
            out[n++] = &emu;
            break;
        }
#endif
    return n;
}

void gq_run(const xi_ops *ops, float *y, const float *x, int64_t rows, const xi_weight *w,
            int64_t n0, int64_t n1) {
    size_t stride;
    const void *a = xi_gq_quantize(NULL, w, x, w->n_in, rows, &stride);
    ops->matmul_gq(y, w->n_out, a, stride, rows, w, n0, n1);
}

int same_bits(const float *a, const float *b, int64_t n, int64_t *at) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4)) {
            *at = i;
            return 0;
        }
    return 1;
}
