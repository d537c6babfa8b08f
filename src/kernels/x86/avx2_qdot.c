/* kernels/x86/avx2_qdot: the integer matmul (xi_ops.matmul_q) with AVX2, for Q8 (W8A8) and
 * Q4_AWQ (W4A8) weights in the dot layout (kernels.h); other layouts go to the reference,
 * which gives the same bits.
 *
 * Lanes are output columns: a 32-byte group of the layout holds 4 inputs of 8 columns, and
 * the row's 4 quantized inputs are broadcast to every lane, so vpmaddubsw (u8 x s8 -> pairs
 * summed to s16) and vpmaddwd by 1 (pairs of s16 -> s32) add 4 products into each column's
 * int32 lane. The block's integer sum per column is exact, whatever the order; the fp32
 * steps per block are xi_matmul_q_ref's, in its order (kernels.h), so every row count,
 * tile and thread split gives the reference's bits.
 *
 * No int16 saturation: vpmaddubsw adds two products.
 *   Q8: |x| (u8, <= 127) times w * sign(x) (s8: weights are in [-127, 127], so the negation
 *       fits): |pair| <= 2 * 127 * 127 = 32258 < 32767.
 *   Q4: codes (u8, 0..15) times x (s8, [-127, 127]): |pair| <= 2 * 15 * 127 = 3810, the
 *       low- and high-nibble pairs added in s16: 7620, and at most 4 such steps summed in
 *       s16 before widening: 30480 < 32767.
 * int32 sums: |S| <= 127 * 127 * 32 (Q8) or 15 * 127 * group (Q4, < 2^31 for any group up
 * to 10^6 inputs). */
#include <math.h>

#include "kernels/x86/avx2_common.h"

#define ROW_BLOCK 64 /* rows whose quantized x stays in L1/L2 while a column group is reused */
#define NB_MAX(R) ((R) <= 2 ? 4 : 2) /* column blocks per tile: R x NB int32 accumulators */

#define ZERO_ACC(A, Z)                                                                         \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                        \
        _Pragma("GCC unroll 4") for (int c = 0; c < NB; c++) A[r][c] = Z;

XI_INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* R rows (from r0) x NB blocks of 8 columns (from block b) of a Q8 weight. */
XI_INLINE void q8_tile(int R, int NB, float *y, int64_t ldy, const xi_qx *x, int64_t r0,
                       const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {
    const int64_t K = x->n_in, nb = x->nb;
    const size_t bs = (size_t)(8 * K);
    const int8_t *blk = (const int8_t *)w->data + (size_t)b * bs;
    const __m256i ones = _mm256_set1_epi16(1);
    const int pf = r0 % ROW_BLOCK == 0; /* the first row tile of a row block */
    __m256 af[4][4];
    ZERO_ACC(af, _mm256_setzero_ps())
    for (int64_t kb = 0; kb < nb; kb++) {
        const int64_t k1 = XI_MIN(K, kb * 32 + 32);
        __m256i ai[4][4];
        ZERO_ACC(ai, _mm256_setzero_si256())
        for (int64_t k = kb * 32; k < k1; k += 4) {
            __m256i wv[4];
#pragma GCC unroll 4
            for (int c = 0; c < NB; c++) {
                if (pf && k % 8 == 0) qdot_prefetch(blk, c, NB, bs, (size_t)k * 8);
                wv[c] = _mm256_loadu_si256((const __m256i *)(blk + (size_t)c * bs + k * 8));
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256i xb = bcast4(x->q + (r0 + r) * K + k), ax = _mm256_abs_epi8(xb);
#pragma GCC unroll 4
                for (int c = 0; c < NB; c++)
                    ai[r][c] = _mm256_add_epi32(
                        ai[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[c], xb)), ones));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 d = _mm256_set1_ps(x->d[(r0 + r) * nb + kb]);
#pragma GCC unroll 4
            for (int c = 0; c < NB; c++) af[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[r][c]), d, af[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++)
            bstore(y + r * ldy + c * 8, af[r][c], w->scale + b * 8, c, lo, hi);
}

/* One step of 8 inputs from k of a Q4_AWQ weight into the int16 sums a16 (low nibbles times
 * inputs k..k+3, high times k+4..k+7); pf is a constant at every call, so the step has no
 * branch and the sums stay in registers. */
XI_INLINE void q4_step(int R, int NB, __m256i a16[4][4], const uint8_t *blk, size_t bs,
                       const xi_qx *x, int64_t r0, int64_t k, int pf) {
    const int64_t K = x->n_in;
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i wl[4], wh[4];
#pragma GCC unroll 4
    for (int c = 0; c < NB; c++) {
        if (pf) qdot_prefetch(blk, c, NB, bs, (size_t)k * 4);
        const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + (size_t)c * bs + k * 4));
        wl[c] = _mm256_and_si256(v, m4);
        wh[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const int8_t *q = x->q + (r0 + r) * K + k;
        const __m256i x0 = bcast4(q), x1 = bcast4(q + 4);
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++)
            a16[r][c] = _mm256_add_epi16(a16[r][c], _mm256_add_epi16(_mm256_maddubs_epi16(wl[c], x0),
                                                                     _mm256_maddubs_epi16(wh[c], x1)));
    }
}

/* ai += the int16 sums of n steps from k (n a constant; pf on every other step) */
XI_INLINE void q4_steps(int R, int NB, __m256i ai[4][4], const uint8_t *blk, size_t bs,
                        const xi_qx *x, int64_t r0, int64_t k, int n, int pf) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a16[4][4];
    ZERO_ACC(a16, _mm256_setzero_si256())
#pragma GCC unroll 4
    for (int i = 0; i < n; i++) q4_step(R, NB, a16, blk, bs, x, r0, k + 8 * i, pf && i % 2 == 0);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) ai[r][c] = _mm256_add_epi32(ai[r][c], _mm256_madd_epi16(a16[r][c], ones));
}

/* One group's integer sums, inputs [k, ke), into ai (zeroed here). Tiles of up to 4
 * accumulators sum 4 steps in int16 first (4 x 7620 = 30480 < 32767) and widen once per 32
 * inputs: a quarter of the vpmaddwd, which shares the one multiply pipe with vpmaddubsw on
 * Zen 1 / Hygon. Larger tiles have no registers left for it and widen every step. The
 * prefetches (pf, a constant) go once per 16 inputs, 64 bytes of each block's stream. */
XI_INLINE void q4_group(int R, int NB, __m256i ai[4][4], const uint8_t *blk, size_t bs,
                        const xi_qx *x, int64_t r0, int64_t k, int64_t ke, int pf) {
    ZERO_ACC(ai, _mm256_setzero_si256())
    if (R * NB <= 4)
        for (; k + 32 <= ke; k += 32) q4_steps(R, NB, ai, blk, bs, x, r0, k, 4, pf);
    else
        for (; k + 16 <= ke; k += 16) {
            q4_steps(R, NB, ai, blk, bs, x, r0, k, 1, pf);
            q4_steps(R, NB, ai, blk, bs, x, r0, k + 8, 1, 0);
        }
    for (; k < ke; k += 8) q4_steps(R, NB, ai, blk, bs, x, r0, k, 1, pf); /* a group's tail */
}

/* The same as q8_tile for a Q4_AWQ weight; the activation block is the group (a multiple of
 * 8). The first row tile of a row block also prefetches the next column group's scales and
 * zero points, a group's worth each group. */
XI_INLINE void q4_tile(int R, int NB, float *y, int64_t ldy, const xi_qx *x, int64_t r0,
                       const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {
    const int64_t G = x->nb, gs = x->bs;
    const size_t bs = (size_t)(4 * x->n_in);
    const uint8_t *blk = (const uint8_t *)w->data + (size_t)b * bs;
    const int pf = r0 % ROW_BLOCK == 0;
    __m256 af[4][4], st[4][8];
    __m256i zt[4][8];
    ZERO_ACC(af, _mm256_setzero_ps())
    for (int64_t g = 0; g < G; g++) {
        __m256i ai[4][4];
        if (pf) {
            qdot_prefetch_params(w, (b + NB) * 8, NB, g, G);
            q4_group(R, NB, ai, blk, bs, x, r0, g * gs, (g + 1) * gs, 1);
        } else {
            q4_group(R, NB, ai, blk, bs, x, r0, g * gs, (g + 1) * gs, 0);
        }
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) {
            __m256 sv;
            __m256i zv;
            group_params(st[c], zt[c], w, (b + c) * 8, g, G, &sv, &zv);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                af[r][c] = group_add(af[r][c], ai[r][c], zv, sv, x->s[(r0 + r) * G + g], x->d[(r0 + r) * G + g]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) bstore(y + r * ldy + c * 8, af[r][c], NULL, c, lo, hi);
}

#include "kernels/qdot_driver.h"

/* xi_qx_quantize_block_ref with 8 lanes: max is exact in any order (a NaN input is skipped,
 * as fmaxf does: max_ps returns its second operand when the first is NaN), x * id rounds
 * as the scalar product, round_ps to nearest even is nearbyintf's default mode, min_ps /
 * max_ps clamp as fminf / fmaxf (a NaN product becomes 127), and the int32 sum is exact. */
void xi_qx_quantize_block_avx2(int8_t *q, float *d, int32_t *s, const float *x, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
    float t[8], amax = 0.0f;
    _mm256_storeu_ps(t, m);
    for (int j = 0; j < 8; j++) amax = fmaxf(amax, t[j]);
    for (int64_t k = i; k < n; k++) amax = fmaxf(amax, fabsf(x[k]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    __m256i acc = _mm256_setzero_si256();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vid),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256i v = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(r, hi), lo));
        acc = _mm256_add_epi32(acc, v);
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(w, w));
    }
    int32_t a[8], sum = 0;
    _mm256_storeu_si256((__m256i *)a, acc);
    for (int j = 0; j < 8; j++) sum += a[j];
    for (; i < n; i++) {
        q[i] = (int8_t)fmaxf(-127.0f, fminf(127.0f, nearbyintf(x[i] * id)));
        sum += q[i];
    }
    *d = amax / 127.0f;
    *s = sum;
}

void xi_matmul_q_avx2(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                      int64_t n0, int64_t n1) {
    qdot_driver(y, ldy, x, rows, w, n0, n1);
}
