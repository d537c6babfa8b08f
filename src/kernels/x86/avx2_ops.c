/* kernels/x86/avx2_ops: the per-key attention loop, RMSNorm and SiLU*mul with AVX2 + FMA +
 * F16C, and the `avx2` op table (its attention is avx2_attn.c). Attention for one token
 * depends only on that token's query and keys, so decode and prefill give the same bits. */
#include <math.h>

#include "kernels/x86/avx2_common.h"

/* The attention loop's exponential: avx2_exp's, as avx2_attn.c computes 8 at a time. */
static float exp1(float x) { return avx2_exp1(x); }

/* sum_d a[d] * b[d] for an f32 a and a b of type t, in the 8-lane order plus scalar tail. */
XI_INLINE float dot_t(const float *a, xi_dtype t, const void *b, int64_t off, int n) {
    __m256 acc = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= n; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), avx2_load8(t, b, off + d), acc);
    float s = avx2_hsum(acc);
    for (; d < n; d++) s = avx2_fma1(a[d], xi_elem_f32(t, b, off + d), s);
    return s;
}

/* o[d] = o[d] * c + p * v[d] (c = 1 skips the scaling). */
XI_INLINE void axpy_t(float *o, float p, xi_dtype t, const void *v, int64_t off, int n) {
    const __m256 pv = _mm256_set1_ps(p);
    int d = 0;
    for (; d + 8 <= n; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, avx2_load8(t, v, off + d),
                                                _mm256_loadu_ps(o + d)));
    for (; d < n; d++) o[d] = avx2_fma1(p, xi_elem_f32(t, v, off + d), o[d]);
}

static void scale_vec(float *o, float c, int n) {
    const __m256 cv = _mm256_set1_ps(c);
    int d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), cv));
    for (; d < n; d++) o[d] *= c;
}

#include "kernels/attn_driver.h"

/* The per-key attention loop, for any head dim: what xi_avx2_attn (avx2_attn.c) runs when the
 * head dim is not a multiple of 8, and the order it must reproduce bit for bit otherwise. */
void xi_avx2_attn_keys(float *out, const float *q, const xi_kv_view *kv, const int32_t *block_table,
                       int n_ctx, int n_heads, int h0, int h1, float scale, float *scratch) {
    attn_driver(out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch);
}

static void avx2_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    float ss = avx2_hsum(acc);
    for (; i < n; i++) ss = avx2_fma1(x[i], x[i], ss);
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    const __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), iv),
                                              _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * inv * w[i];
}

XI_INLINE __m256 silu_mul8(__m256 g, __m256 u) {
    const __m256 e = avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* The tail goes through the same 8-lane code (zero-padded) so an element's value does not
 * depend on where it sits in the array. */
static void avx2_silu_mul(float *y, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[8] = {0}, u[8] = {0}, r[8];
        memcpy(g, gate + i, (size_t)(n - i) * 4);
        memcpy(u, up + i, (size_t)(n - i) * 4);
        _mm256_storeu_ps(r, silu_mul8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        memcpy(y + i, r, (size_t)(n - i) * 4);
    }
}

#define AVX2_TABLE(nm, prec, other, mm, mq, qb, gq, qa, gqb)                                 \
    {                                                                                          \
        .name = nm, .precision = prec, .twin = &other, .weight_block = 8, .q4_block = 16,       \
        .gq_block = gqb,                                                                       \
        .matmul = mm, .attn = xi_avx2_attn, .rmsnorm = avx2_rmsnorm,                \
        .silu_mul = avx2_silu_mul, .matmul_q = mq, .quantize_block = qb,                        \
        .matmul_gq = gq, .quantize_act = qa,                                                    \
    }
static const xi_ops avx2_int8;
static const xi_ops avx2_ops = AVX2_TABLE("avx2", "exact", avx2_int8, xi_avx2_matmul, NULL, NULL, NULL, NULL, 0);
static const xi_ops avx2_int8 = AVX2_TABLE("avx2", "int8", avx2_ops, xi_avx2_matmul, xi_matmul_q_avx2, xi_qx_quantize_block_avx2,
                                           xi_matmul_gq_avx2, xi_gq_quantize_act_avx2, 8);

const xi_ops *xi_ops_avx2(void) { return &avx2_ops; }

/* The `avx512` tables: avx2's with the fp32 GEMM tiles of avx512_matmul.c (both tables) and
 * the integer matmuls of avx512_qdot.c and avx512_gq.c (AVX-512 VNNI). Defined here (built
 * for AVX2) so that only those ops, once dispatch.c has seen the CPU's AVX-512 F/BW/VL/VNNI,
 * run AVX-512 code. */
static const xi_ops avx512_int8;
static const xi_ops avx512_ops = AVX2_TABLE("avx512", "exact", avx512_int8, xi_avx512_matmul, NULL, NULL, NULL, NULL, 0);
static const xi_ops avx512_int8 = AVX2_TABLE("avx512", "int8", avx512_ops, xi_avx512_matmul, xi_matmul_q_avx512, xi_qx_quantize_block_avx2,
                                             xi_matmul_gq_avx512, xi_gq_quantize_act_avx2, 8);

const xi_ops *xi_ops_avx512(void) { return &avx512_ops; }

/* The `avx512bf16` tables (AVX-512 BF16 as well): avx512's, and in the int8 one BF16 weights
 * take rows rounded to bf16 into vdpbf16ps (avx512_bf16.c); the exact one keeps fp32 rows. */
static const xi_ops avx512bf16_int8;
static const xi_ops avx512bf16_ops = AVX2_TABLE("avx512bf16", "exact", avx512bf16_int8, xi_avx512_matmul, NULL, NULL, NULL, NULL, 0);
static const xi_ops avx512bf16_int8 = {
    .name = "avx512bf16", .precision = "int8", .twin = &avx512bf16_ops, .weight_block = 8,
    .q4_block = 16, .gq_block = 8, .matmul = xi_avx512_matmul, .attn = xi_avx2_attn,
    .rmsnorm = avx2_rmsnorm, .silu_mul = avx2_silu_mul, .matmul_q = xi_matmul_q_avx512,
    .quantize_block = xi_qx_quantize_block_avx2, .matmul_gq = xi_matmul_gq_avx512,
    .quantize_act = xi_gq_quantize_act_avx2, .matmul_bf16 = xi_matmul_bf16_avx512,
    .round_bf16 = xi_bf16_round_avx512,
};

const xi_ops *xi_ops_avx512bf16(void) { return &avx512bf16_ops; }
