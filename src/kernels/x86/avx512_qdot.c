/* kernels/x86/avx512_qdot: the integer matmul (xi_ops.matmul_q) with AVX-512 VNNI
 * (vpdpbusd), for Q8 (W8A8) and Q4_AWQ (W4A8) weights in the dot layout (kernels.h), bit
 * for bit xi_matmul_q_ref; other layouts go to the reference, which gives the same bits.
 *
 * The dot layout is avx2_qdot.c's (8 columns x 4 inputs per 32 bytes, one column per 32-bit
 * lane); a zmm load takes two consecutive 32-byte groups of a column block:
 *   Q8:  lanes 0-7 inputs k..k+3, lanes 8-15 inputs k+4..k+7 of the block's 8 columns;
 *   Q4:  lanes 0-7 bytes of inputs k..k+7 (low nibbles k..k+3, high k+4..k+7), lanes 8-15
 *        those of k+8..k+15.
 * The row's activation dwords go to the lanes that meet them by one vpermd per row and step
 * (shared by every column block of the tile), and one vpdpbusd adds 4 products into each
 * lane: the multiply, the pair sums and the widening of avx2_qdot.c's vpmaddubsw + vpmaddwd
 * + vpaddd in one instruction, on twice the bytes. At the end of a block (Q8, 32 inputs) or
 * group (Q4) the two halves of each accumulator add up to the 8 columns' int32 sums, and the
 * fp32 steps are avx2_qdot.c's, in xi_matmul_q_ref's order, so every row count, tile, thread
 * split and variant gives the reference's bits.
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes and adds in int32 without saturation:
 *   Q8: the weights (s8, [-127, 127]) go in as u = w + 128 (one vpxord with 0x80), the
 *       activations (s8) as they are, and the block's 128 * sum(x) (x->s) comes off after the
 *       fold: sum (w + 128) x = S + 128 s. |lane| <= 32 * 255 * 127 = 1,036,320.
 *   Q4: codes (u8, 0..15) by activations (s8) directly; |S| <= 15 * 127 * group, as AVX2.
 * Tiles of up to 4 accumulators keep two chains (Q8: even and odd steps; Q4: low and high
 * nibbles) so one row is bound by vpdpbusd's throughput, not its latency.
 *
 * Tests (tests/test_kernels_qdot.c): where the CPU lacks AVX-512 VNNI this file is compiled a
 * second time for the test binary with XI_AVX512_EMULATED, through SIMDe's portable AVX-512
 * (xi_matmul_q_avx512_emulated), and runs as one more int8 variant. */
#include <math.h>

#ifdef XI_AVX512_EMULATED
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define QD512_FN xi_matmul_q_avx512_emulated
#else
#include <immintrin.h>
#define QD512_FN xi_matmul_q_avx512
#endif

#include "kernels/x86/avx2_common.h"

#ifdef XI_AVX512_EMULATED
void xi_matmul_q_avx512_emulated(float *y, int64_t ldy, const xi_qx *x, int64_t rows,
                                 const xi_weight *w, int64_t n0, int64_t n1);
#endif

#define ROW_BLOCK 64 /* rows whose quantized x stays in L1/L2 while a column group is reused */
#define NB_MAX(R) ((R) <= 2 ? 4 : 2) /* column blocks per tile: R x NB int32 accumulators */

#define ZERO_ACC(A, Z)                                                                         \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                        \
        _Pragma("GCC unroll 4") for (int c = 0; c < NB; c++) A[r][c] = Z;

/* The 16 bytes at p as dwords d0..d3, d[i] in lanes 0-7 and d[j] in lanes 8-15 (idx). */
XI_INLINE __m512i act16(const int8_t *p, __m512i idx) {
    return _mm512_permutexvar_epi32(idx, _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p)));
}
XI_INLINE __m512i act8(const int8_t *p, __m512i idx) {
    return _mm512_permutexvar_epi32(idx, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)p)));
}

/* Lanes 0-7 plus lanes 8-15: the 8 columns' int32 sums. */
XI_INLINE __m256i fold(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* 32 bytes in lanes 0-7, zeros in lanes 8-15. */
XI_INLINE __m512i lower_half(__m256i v) {
    return _mm512_inserti64x4(_mm512_setzero_si512(), v, 0);
}

/* One step of 8 inputs from k into acc; unless full (the 4-input tail), lanes 8-15 take
 * weights 0, not read, and meet the 4 bytes after the row (xi_qx_alloc pads the last). */
XI_INLINE void q8_step(int R, int NB, __m512i acc[4][4], const int8_t *blk, size_t bs,
                       const xi_qx *x, int64_t r0, int64_t k, int full, __m512i m80, int pf) {
    const int64_t K = x->n_in;
    const __m512i i01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512i wv[4];
#pragma GCC unroll 4
    for (int c = 0; c < NB; c++) {
        const void *p = blk + (size_t)c * bs + k * 8;
        if (pf) qdot_prefetch(blk, c, NB, bs, (size_t)k * 8);
        wv[c] = full ? _mm512_xor_si512(_mm512_loadu_si512(p), m80)
                     : lower_half(_mm256_xor_si256(_mm256_loadu_si256(p), _mm512_castsi512_si256(m80)));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const __m512i xa = act8(x->q + (r0 + r) * K + k, i01);
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], wv[c], xa);
    }
}

/* R rows (from r0) x NB blocks of 8 columns (from block b) of a Q8 weight. */
XI_INLINE void q8_tile(int R, int NB, float *y, int64_t ldy, const xi_qx *x, int64_t r0,
                       const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {
    const int64_t K = x->n_in, nb = x->nb;
    const size_t bs = (size_t)(8 * K);
    const int8_t *blk = (const int8_t *)w->data + (size_t)b * bs;
    const __m512i m80 = _mm512_set1_epi8((char)0x80);
    const int two = R * NB <= 4; /* a second chain of accumulators for the odd steps */
    const int pf = r0 % ROW_BLOCK == 0; /* the first row tile of a row block */
    __m256 af[4][4];
    ZERO_ACC(af, _mm256_setzero_ps())
    for (int64_t kb = 0; kb < nb; kb++) {
        const int64_t k1 = XI_MIN(K, kb * 32 + 32);
        __m512i ai[4][4], aj[4][4];
        ZERO_ACC(ai, _mm512_setzero_si512())
        ZERO_ACC(aj, _mm512_setzero_si512())
        int64_t k = kb * 32;
        for (; k + 16 <= k1; k += 16) {
            q8_step(R, NB, ai, blk, bs, x, r0, k, 1, m80, pf);
            q8_step(R, NB, two ? aj : ai, blk, bs, x, r0, k + 8, 1, m80, pf);
        }
        if (k + 8 <= k1) q8_step(R, NB, ai, blk, bs, x, r0, k, 1, m80, pf), k += 8;
        if (k < k1) q8_step(R, NB, ai, blk, bs, x, r0, k, 0, m80, pf); /* 4 inputs left */
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 d = _mm256_set1_ps(x->d[(r0 + r) * nb + kb]);
            const __m256i off = _mm256_set1_epi32(128 * x->s[(r0 + r) * nb + kb]);
#pragma GCC unroll 4
            for (int c = 0; c < NB; c++) {
                const __m512i a = two ? _mm512_add_epi32(ai[r][c], aj[r][c]) : ai[r][c];
                const __m256i s = _mm256_sub_epi32(fold(a), off);
                af[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, af[r][c]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) bstore(y + r * ldy + c * 8, af[r][c], w->scale + b * 8, c, lo, hi);
}

/* One step of 16 inputs from k (8 unless full: the upper lanes' codes 0, not read) of a
 * Q4_AWQ weight into ai (low nibbles) and aj (high; ai too unless two). full and pf are
 * constants at every call, so the step has no branch and the accumulators stay in registers. */
XI_INLINE void q4_step(int R, int NB, int two, __m512i ai[4][4], __m512i aj[4][4], const uint8_t *blk,
                       size_t bs, const xi_qx *x, int64_t r0, int64_t k, int full, int pf) {
    const int64_t K = x->n_in;
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i ilo = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                  ihi = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    __m512i wl[4], wh[4];
#pragma GCC unroll 4
    for (int c = 0; c < NB; c++) {
        const void *p = blk + (size_t)c * bs + k * 4;
        if (pf) qdot_prefetch(blk, c, NB, bs, (size_t)k * 4);
        const __m512i v = full ? _mm512_loadu_si512(p) : lower_half(_mm256_loadu_si256(p));
        wl[c] = _mm512_and_si512(v, m4);
        wh[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const int8_t *q = x->q + (r0 + r) * K + k;
        const __m512i xl = full ? act16(q, ilo) : act8(q, ilo), xh = full ? act16(q, ihi) : act8(q, ihi);
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) {
            ai[r][c] = _mm512_dpbusd_epi32(ai[r][c], wl[c], xl);
            if (two) aj[r][c] = _mm512_dpbusd_epi32(aj[r][c], wh[c], xh);
            else ai[r][c] = _mm512_dpbusd_epi32(ai[r][c], wh[c], xh);
        }
    }
}

/* The same for a Q4_AWQ weight; the activation block is the group (a multiple of 8). */
XI_INLINE void q4_tile(int R, int NB, float *y, int64_t ldy, const xi_qx *x, int64_t r0,
                       const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {
    const int64_t G = x->nb, gs = x->bs;
    const size_t bs = (size_t)(4 * x->n_in);
    const uint8_t *blk = (const uint8_t *)w->data + (size_t)b * bs;
    const int two = R * NB <= 4; /* the high nibbles' products in a chain of their own */
    const int pf = r0 % ROW_BLOCK == 0; /* the first row tile of a row block */
    __m256 af[4][4], st[4][8];
    __m256i zt[4][8];
    ZERO_ACC(af, _mm256_setzero_ps())
    for (int64_t g = 0; g < G; g++) {
        __m512i ai[4][4], aj[4][4];
        ZERO_ACC(ai, _mm512_setzero_si512())
        ZERO_ACC(aj, _mm512_setzero_si512())
        const int64_t ke = (g + 1) * gs;
        int64_t k = g * gs;
        if (pf) {
            qdot_prefetch_params(w, (b + NB) * 8, NB, g, G);
            for (; k + 16 <= ke; k += 16) q4_step(R, NB, two, ai, aj, blk, bs, x, r0, k, 1, 1);
        } else {
            for (; k + 16 <= ke; k += 16) q4_step(R, NB, two, ai, aj, blk, bs, x, r0, k, 1, 0);
        }
        if (k < ke) q4_step(R, NB, two, ai, aj, blk, bs, x, r0, k, 0, pf);
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) {
            __m256 sv;
            __m256i zv;
            group_params(st[c], zt[c], w, (b + c) * 8, g, G, &sv, &zv);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m512i a = two ? _mm512_add_epi32(ai[r][c], aj[r][c]) : ai[r][c];
                af[r][c] = group_add(af[r][c], fold(a), zv, sv, x->s[(r0 + r) * G + g], x->d[(r0 + r) * G + g]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NB; c++) bstore(y + r * ldy + c * 8, af[r][c], NULL, c, lo, hi);
}

#include "kernels/qdot_driver.h"

void QD512_FN(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
              int64_t n0, int64_t n1) {
    qdot_driver(y, ldy, x, rows, w, n0, n1);
}
