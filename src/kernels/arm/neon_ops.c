/* kernels/arm/neon_ops: attention, RMSNorm and SiLU*mul with NEON, and the `neon` op table.
 * Attention for one token depends only on that token's query and keys, so decode and
 * prefill give the same bits. */
#include "kernels/arm/neon_common.h"

void xi_neon_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1);

/* exp(x) for 4 lanes: x = n ln2 + r, degree-6 polynomial (Cephes expf), inputs clamped to
 * [-87.3, 88.3] so 2^n stays a normal float. */
XI_INLINE float32x4_t neon_exp(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.3f));
    const float32x4_t fx = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, fx, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, fx, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500E-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507E-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073E-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894E-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459E-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201E-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

XI_INLINE float dot_t(const float *a, xi_dtype t, const void *b, int64_t off, int n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int d = 0;
    for (; d + 4 <= n; d += 4) acc = vfmaq_f32(acc, vld1q_f32(a + d), neon_load4(t, b, off + d));
    float s = neon_hsum(acc);
    for (; d < n; d++) s = fmaf(a[d], xi_elem_f32(t, b, off + d), s);
    return s;
}

XI_INLINE void axpy_t(float *o, float p, xi_dtype t, const void *v, int64_t off, int n) {
    const float32x4_t pv = vdupq_n_f32(p);
    int d = 0;
    for (; d + 4 <= n; d += 4)
        vst1q_f32(o + d, vfmaq_f32(vld1q_f32(o + d), pv, neon_load4(t, v, off + d)));
    for (; d < n; d++) o[d] = fmaf(p, xi_elem_f32(t, v, off + d), o[d]);
}

static void scale_vec(float *o, float c, int n) {
    int d = 0;
    for (; d + 4 <= n; d += 4) vst1q_f32(o + d, vmulq_n_f32(vld1q_f32(o + d), c));
    for (; d < n; d++) o[d] *= c;
}

static float exp1(float x) { return expf(x); }

#include "kernels/attn_driver.h"

static void neon_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        acc = vfmaq_f32(acc, v, v);
    }
    float ss = neon_hsum(acc);
    for (; i < n; i++) ss = fmaf(x[i], x[i], ss);
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), inv), vld1q_f32(w + i)));
    for (; i < n; i++) y[i] = x[i] * inv * w[i];
}

XI_INLINE float32x4_t silu_mul4(float32x4_t g, float32x4_t u) {
    const float32x4_t e = neon_exp(vnegq_f32(g));
    return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
}

/* The tail goes through the same 4-lane code (zero-padded) so an element's value does not
 * depend on where it sits in the array. */
static void neon_silu_mul(float *y, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, silu_mul4(vld1q_f32(gate + i), vld1q_f32(up + i)));
    if (i < n) {
        float g[4] = {0}, u[4] = {0}, r[4];
        memcpy(g, gate + i, (size_t)(n - i) * 4);
        memcpy(u, up + i, (size_t)(n - i) * 4);
        vst1q_f32(r, silu_mul4(vld1q_f32(g), vld1q_f32(u)));
        memcpy(y + i, r, (size_t)(n - i) * 4);
    }
}

#define NEON_TABLE(prec, other, mq, qb, gq, qa)                                              \
    {                                                                                          \
        .name = "neon", .precision = prec, .twin = &other, .weight_block = 8, .q4_block = 16,   \
        .matmul = xi_neon_matmul, .attn = attn_driver, .rmsnorm = neon_rmsnorm,                  \
        .silu_mul = neon_silu_mul, .matmul_q = mq, .quantize_block = qb,                        \
        .matmul_gq = gq, .quantize_act = qa,                                                    \
    }
static const xi_ops neon_int8;
static const xi_ops neon_ops = NEON_TABLE("exact", neon_int8, NULL, NULL, NULL, NULL);
static const xi_ops neon_int8 = NEON_TABLE("int8", neon_ops, xi_matmul_q_neon, xi_qx_quantize_block_neon,
                                           xi_matmul_gq_neon, xi_gq_quantize_act_neon);

const xi_ops *xi_ops_neon(void) { return &neon_ops; }
