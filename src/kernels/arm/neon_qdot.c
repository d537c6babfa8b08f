/* kernels/arm/neon_qdot: the integer matmul (xi_ops.matmul_q) with NEON dotprod (sdot), for
 * Q8 (W8A8) and Q4_AWQ (W4A8) weights in the dot layout (kernels.h); other layouts go to
 * the reference, which gives the same bits.
 *
 * A 32-byte group of the layout is two 16-byte vectors (columns 0-3 and 4-7, 4 inputs
 * each); sdot by lane adds the products of one 4-input group of x (a lane of an 8-byte x
 * vector) into each column's int32 lane: 16 multiply-adds per instruction. Integer sums
 * are exact in any order, and the fp32 steps per block are xi_matmul_q_ref's, in its order,
 * so the bits are the reference's (and AVX2's) for every row count, tile and thread split.
 * int32 range as in x86/avx2_qdot.c; sdot has no narrower intermediate to saturate. */
#include "kernels/arm/neon_common.h"

#define ROW_BLOCK 64
#define NB_MAX(R) ((R) == 1 ? 4 : 2) /* 2 R NB int32 accumulators, 2 or 4 NB weight vectors */

/* 8 inputs from p (the 4 bytes at p when only one 4-input group is left, so a row's last
 * block never reads past the row). */
XI_INLINE int8x8_t load_x8(const int8_t *p, int whole) {
    if (whole) return vld1_s8(p);
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpret_s8_s32(vdup_n_s32(v));
}

#define ZERO_ACC(A, Z)                                                                         \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                        \
        _Pragma("GCC unroll 4") for (int c = 0; c < NB; c++) A[r][c][0] = A[r][c][1] = Z;

XI_INLINE void q8_tile(int R, int NB, float *y, int64_t ldy, const xi_qx *x, int64_t r0,
                       const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {
    const int64_t K = x->n_in, nb = x->nb;
    const size_t bs = (size_t)(8 * K);
    const int8_t *blk = (const int8_t *)w->data + (size_t)b * bs;
    float32x4_t af[4][4][2];
    ZERO_ACC(af, vdupq_n_f32(0.0f))
    for (int64_t kb = 0; kb < nb; kb++) {
        const int64_t k1 = XI_MIN(K, kb * 32 + 32);
        int32x4_t ai[4][4][2];
        ZERO_ACC(ai, vdupq_n_s32(0))
        for (int64_t k = kb * 32; k < k1; k += 8) {
            const int two = k + 8 <= k1; /* the second group of 4 inputs exists */
            int8x16_t w0[4][2], w1[4][2];
#pragma GCC unroll 4
            for (int c = 0; c < NB; c++) {
                const int8_t *p = blk + (size_t)c * bs + k * 8;
                w0[c][0] = vld1q_s8(p);
                w0[c][1] = vld1q_s8(p + 16);
                if (two) {
                    w1[c][0] = vld1q_s8(p + 32);
                    w1[c][1] = vld1q_s8(p + 48);
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const int8x8_t xv = load_x8(x->q + (r0 + r) * K + k, two);
#pragma GCC unroll 4
                for (int c = 0; c < NB; c++) {
                    ai[r][c][0] = vdotq_lane_s32(ai[r][c][0], w0[c][0], xv, 0);
                    ai[r][c][1] = vdotq_lane_s32(ai[r][c][1], w0[c][1], xv, 0);
                    if (two) {
                        ai[r][c][0] = vdotq_lane_s32(ai[r][c][0], w1[c][0], xv, 1);
                        ai[r][c][1] = vdotq_lane_s32(ai[r][c][1], w1[c][1], xv, 1);
                    }
                }
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const float d = x->d[(r0 + r) * nb + kb];
#pragma GCC unroll 4
            for (int c = 0; c < NB; c++)
                for (int h = 0; h < 2; h++)
                    af[r][c][h] = vfmaq_n_f32(af[r][c][h], vcvtq_f32_s32(ai[r][c][h]), d);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++)
            bstore(y + r * ldy + c * 8, af[r][c][0], af[r][c][1], w->scale + b * 8, c, lo, hi);
}

XI_INLINE void q4_tile(int R, int NB, float *y, int64_t ldy, const xi_qx *x, int64_t r0,
                       const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {
    const int64_t K = x->n_in, G = x->nb, gs = x->bs;
    const size_t bs = (size_t)(4 * K);
    const uint8_t *blk = (const uint8_t *)w->data + (size_t)b * bs;
    const uint8x16_t m4 = vdupq_n_u8(15);
    float32x4_t af[4][4][2];
    ZERO_ACC(af, vdupq_n_f32(0.0f))
    for (int64_t g = 0; g < G; g++) {
        int32x4_t ai[4][4][2];
        ZERO_ACC(ai, vdupq_n_s32(0))
        for (int64_t k = g * gs; k < (g + 1) * gs; k += 8) {
            int8x16_t wl[4][2], wh[4][2];
#pragma GCC unroll 4
            for (int c = 0; c < NB; c++)
                for (int h = 0; h < 2; h++) {
                    const uint8x16_t v = vld1q_u8(blk + (size_t)c * bs + k * 4 + 16 * h);
                    wl[c][h] = vreinterpretq_s8_u8(vandq_u8(v, m4));
                    wh[c][h] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const int8x8_t xv = vld1_s8(x->q + (r0 + r) * K + k);
#pragma GCC unroll 4
                for (int c = 0; c < NB; c++)
                    for (int h = 0; h < 2; h++)
                        ai[r][c][h] = vdotq_lane_s32(vdotq_lane_s32(ai[r][c][h], wl[c][h], xv, 0),
                                                     wh[c][h], xv, 1);
            }
        }
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) {
            const int64_t n = (b + c) * 8;
            const float *s = w->scale + n * G + g;
            const uint8_t *z = w->zero + n * G + g;
            const float sv[8] = {s[0], s[G], s[2 * G], s[3 * G], s[4 * G], s[5 * G], s[6 * G], s[7 * G]};
            const int32_t zv[8] = {z[0], z[G], z[2 * G], z[3 * G], z[4 * G], z[5 * G], z[6 * G], z[7 * G]};
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const int32_t xs = x->s[(r0 + r) * G + g];
                const float d = x->d[(r0 + r) * G + g];
                for (int h = 0; h < 2; h++) {
                    const int32x4_t t = vsubq_s32(ai[r][c][h], vmulq_n_s32(vld1q_s32(zv + 4 * h), xs));
                    af[r][c][h] = vfmaq_f32(af[r][c][h], vmulq_n_f32(vcvtq_f32_s32(t), d),
                                            vld1q_f32(sv + 4 * h));
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++)
            bstore(y + r * ldy + c * 8, af[r][c][0], af[r][c][1], NULL, c, lo, hi);
}

#include "kernels/qdot_driver.h"

/* xi_qx_quantize_block_ref with 4 lanes: max is exact in any order; vmaxnm / vminnm are
 * fmaxf / fminf (a NaN operand loses), x * id rounds as the scalar product, vrndn is round
 * to nearest even (nearbyintf's default mode), and the int32 sum is exact. */
void xi_qx_quantize_block_neon(int8_t *q, float *d, int32_t *s, const float *x, int64_t n) {
    float32x4_t m = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
    float amax = vmaxnmvq_f32(m);
    for (int64_t k = i; k < n; k++) amax = fmaxf(amax, fabsf(x[k]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float32x4_t hi = vdupq_n_f32(127.0f), lo = vdupq_n_f32(-127.0f);
    int32x4_t acc = vdupq_n_s32(0);
    for (i = 0; i + 4 <= n; i += 4) {
        const float32x4_t r = vrndnq_f32(vmulq_n_f32(vld1q_f32(x + i), id));
        const int32x4_t v = vcvtq_s32_f32(vmaxnmq_f32(vminnmq_f32(r, hi), lo));
        acc = vaddq_s32(acc, v);
        const int8x8_t b = vqmovn_s16(vcombine_s16(vqmovn_s32(v), vdup_n_s16(0)));
        int32_t u;
        memcpy(&u, &b, 4);
        memcpy(q + i, &u, 4);
    }
    int32_t sum = vaddvq_s32(acc);
    for (; i < n; i++) {
        q[i] = (int8_t)fmaxf(-127.0f, fminf(127.0f, nearbyintf(x[i] * id)));
        sum += q[i];
    }
    *d = amax / 127.0f;
    *s = sum;
}

void xi_matmul_q_neon(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                      int64_t n0, int64_t n1) {
    qdot_driver(y, ldy, x, rows, w, n0, n1);
}
