/* kernels/ref: the scalar oracle. Obvious loops, fp32 accumulation, one summation order.
 * Every ISA variant is tested against these functions. */
#include <math.h>

#include "kernels/wformat.h"

static inline float load_elem(const void *base, xi_dtype t, int64_t i) {
    switch (t) {
    case XI_F16: return xi_f16_to_f32(((const uint16_t *)base)[i]);
    case XI_BF16: return xi_bf16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

/* Every format: row n of W dequantized by its wformat row (the format's scalar reference),
 * then sum_k x[k] * W[n, k] in index order; a format the row gives an exact matmul of its own
 * (the ggml types) runs that. Out of memory for the row (one slot of this thread's scratch),
 * XI_QK_MAX values at a time (whole blocks of every format), the same sums. */
static void ref_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                       const xi_weight *w, int64_t n0, int64_t n1) {
    const xi_wformat *f = xi_wformat_of(w);
    if (f->matmul_exact) {
        f->matmul_exact(y, ldy, x, ldx, rows, w, n0, n1);
        return;
    }
    const int64_t K = w->n_in;
    float *row = xi_kernel_scratch(6, (size_t)K * sizeof(float));
    for (int64_t n = n0; n < n1; n++) {
        if (row) f->dequant(w, n, 0, K, row);
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0.0f;
            if (row) {
                for (int64_t k = 0; k < K; k++) acc += x[r * ldx + k] * row[k];
            } else {
                float blk[XI_QK_MAX];
                for (int64_t k0 = 0; k0 < K; k0 += XI_QK_MAX) {
                    const int64_t k1 = k0 + XI_QK_MAX < K ? k0 + XI_QK_MAX : K;
                    f->dequant(w, n, k0, k1, blk);
                    for (int64_t k = k0; k < k1; k++) acc += x[r * ldx + k] * blk[k - k0];
                }
            }
            y[r * ldy + n] = acc;
        }
    }
}

static void ref_attn(float *out, const float *q, const xi_kv_view *kv, const int32_t *block_table,
                     int n_ctx, int n_heads, int h0, int h1, float scale, float *scratch) {
    const int hd = kv->head_dim, bs = kv->block_size;
    const int group = n_heads / kv->n_kv_heads;
    for (int h = h0; h < h1; h++) {
        const float *qh = q + (int64_t)h * hd;
        float *o = out + (int64_t)h * hd;
        const int64_t kvh = h / group;
        float m = -INFINITY, l = 0.0f;
        for (int d = 0; d < hd; d++) o[d] = 0.0f;
        for (int start = 0; start < n_ctx; start += bs) {
            const int64_t base = (int64_t)block_table[start / bs] * kv->block_stride +
                                 kvh * kv->head_stride;
            const int nt = n_ctx - start < bs ? n_ctx - start : bs;
            float mb = -INFINITY;
            for (int t = 0; t < nt; t++) {
                float s = 0.0f;
                for (int d = 0; d < hd; d++)
                    s += qh[d] * load_elem(kv->k, kv->dtype, base + (int64_t)t * hd + d);
                s *= scale;
                scratch[t] = s;
                if (s > mb) mb = s;
            }
            const float mn = mb > m ? mb : m;
            const float corr = expf(m - mn); /* 0 on the first block: m = -inf */
            l *= corr;
            for (int d = 0; d < hd; d++) o[d] *= corr;
            for (int t = 0; t < nt; t++) {
                const float p = expf(scratch[t] - mn);
                l += p;
                for (int d = 0; d < hd; d++)
                    o[d] += p * load_elem(kv->v, kv->dtype, base + (int64_t)t * hd + d);
            }
            m = mn;
        }
        const float inv = 1.0f / l;
        for (int d = 0; d < hd; d++) o[d] *= inv;
    }
}

static void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

static void ref_silu_mul(float *y, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        y[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

static const xi_ops ref_int8;
static const xi_ops ref_ops = {
    .name = "ref",
    .precision = "exact",
    .twin = &ref_int8,
    .matmul = ref_matmul,
    .attn = ref_attn,
    .rmsnorm = ref_rmsnorm,
    .silu_mul = ref_silu_mul,
};
static const xi_ops ref_int8 = {
    .name = "ref",
    .precision = "int8",
    .twin = &ref_ops,
    .matmul = ref_matmul,
    .attn = ref_attn,
    .rmsnorm = ref_rmsnorm,
    .silu_mul = ref_silu_mul,
    .matmul_q = xi_matmul_q_ref,
    .matmul_gq = xi_matmul_gq_ref,
};

const xi_ops *xi_ops_ref(void) { return &ref_ops; }
