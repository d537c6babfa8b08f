/* kernels/x86/avx512_matmul: the fp32 matmul (xi_ops.matmul) of the avx512 tables: AVX-512 F
 * GEMM tiles for the dense blocked layout (block 8: F32, F16, BF16, Q8 unscaled, kernels.h)
 * from GEMM_MIN_ROWS rows (8, F32 64), a prefetching one-row GEMV for F16 and BF16 rows of
 * up to GEMV_MAX_K inputs, avx2's matmul for everything else.
 *
 * avx2_matmul.c sums the blocked layout with lanes as columns: column n of row r is one f32
 * chain acc = fma(x[r, k], W[n, k], acc) from 0, k ascending, then (Q8) acc * scale[n]. These
 * tiles run the same chain per lane, 16 columns (two blocks) per zmm, so a row gives avx2's
 * bits whether it is computed here, by avx2's GEMV or small-batch tiles, or on any thread:
 * the switch between them at GEMM_MIN_ROWS changes no result. tests/test_kernels.c checks it
 * bitwise against the avx2 table for every row count around the switch, natively where the
 * CPU has AVX-512 F and through SIMDe (this file built with XI_AVX512_EMULATED) elsewhere.
 *
 * Per block of rows (x stays in L2) and per column group of up to 4 zmm blocks, the group's
 * weights are converted once into an f32 panel [zmm block][k][16] (the conversions are
 * exact), and tiles of up to 6 rows x 4 zmm blocks (24 accumulators, 4 weight vectors and a
 * broadcast: 29 of the 32 zmm registers) run down the row block: 24 FMAs per 4 panel loads
 * and 6 broadcasts. Rows of n_in > 2048 use 2 zmm blocks, so the panel (32 columns x n_in
 * f32) stays within L2. */
#ifdef XI_AVX512_EMULATED
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define MM512_FN xi_avx512_matmul_emulated
#else
#include <immintrin.h>
#define MM512_FN xi_avx512_matmul
#endif

#include "kernels/x86/avx2_common.h"
#include "kernels/x86/avx512_f16.h"

#ifdef XI_AVX512_EMULATED
void xi_avx512_matmul_emulated(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                               const xi_weight *w, int64_t n0, int64_t n1);
#endif

/* From here the tiles gain more than the panel costs (bench_kernels, 4864x896, Zen 5, 1
 * thread, avx2 -> these at 16 rows: F16 65-70 -> 82-98 GFLOP/s, BF16 72-80 -> 108-119, but F32,
 * which avx2 reads without a conversion, 84-87 -> 60-68; at 512 rows all gain). */
#define GEMM_MIN_ROWS(t) ((t) == XI_F32 ? 64 : 8)
#define GEMM_ROW_BLOCK 64 /* rows whose x stays in L2 while the panels go by */
#define RT 6              /* rows per tile */
#define ZMAX 4            /* zmm blocks (16 columns) per column group */

/* Blocks [b, b + nb) (nb <= 2 Z) of w as the panel p [zmm block][k][16], f32, unscaled; the
 * half of a last zmm block past nb is 0. */
static void panel_fill(float *p, const xi_weight *w, int64_t b, int nb) {
    const int64_t K = w->n_in, K2 = K & ~(int64_t)1;
    const size_t es = w->dtype == XI_F32 ? 4 : w->dtype == XI_Q8 ? 1 : 2;
    for (int j = 0; j < nb + (nb & 1); j++) {
        float *d = p + (size_t)(j / 2) * (size_t)K * 16 + (j & 1) * 8;
        if (j == nb) { /* the empty half of an odd last pair */
            for (int64_t k = 0; k < K; k++) _mm256_storeu_ps(d + k * 16, _mm256_setzero_ps());
            continue;
        }
        const char *src = (const char *)w->data + (size_t)((b + j) * 8 * K) * es;
        int64_t k = 0;
        if (w->dtype == XI_BF16) /* input pairs (kernels.h), then an odd last input */
            for (; k < K2; k += 2) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(src + (size_t)k * 16));
                _mm256_storeu_ps(d + k * 16, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
                _mm256_storeu_ps(d + (k + 1) * 16,
                                 _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u))));
            }
        for (; k < K; k++) _mm256_storeu_ps(d + k * 16, avx2_load8(w->dtype, src, k * 8));
    }
}

/* R rows x Z zmm blocks of the panel p; y and the columns [lo, hi) (at most ncols) relative to
 * the group's first column; sc: Q8's scales of the group's columns (NULL: none). */
XI_INLINE void ztile(int R, int Z, float *y, int64_t ldy, const float *x, int64_t ldx,
                     const float *p, int64_t K, const float *sc, int64_t lo, int64_t hi) {
    __m512 acc[RT][ZMAX];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++) acc[r][z] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m512 wv[ZMAX];
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++) wv[z] = _mm512_loadu_ps(p + ((size_t)z * (size_t)K + (size_t)k) * 16);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m512 xb = _mm512_set1_ps(x[r * ldx + k]);
#pragma GCC unroll 4
            for (int z = 0; z < Z; z++) acc[r][z] = _mm512_fmadd_ps(xb, wv[z], acc[r][z]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++) zstore_cols(y + r * ldy, acc[r][z], (int64_t)z * 16, lo, hi, sc);
}

typedef void (*ztile_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t,
                         const float *, int64_t, int64_t);
#define ZT_FN(R, Z)                                                                            \
    static void zt_##R##_##Z(float *y, int64_t ldy, const float *x, int64_t ldx, const float *p, \
                             int64_t K, const float *sc, int64_t lo, int64_t hi) {             \
        ztile(R, Z, y, ldy, x, ldx, p, K, sc, lo, hi);                                         \
    }
#define ZT_ROW(R) ZT_FN(R, 1) ZT_FN(R, 2) ZT_FN(R, 3) ZT_FN(R, 4)
ZT_ROW(1) ZT_ROW(2) ZT_ROW(3) ZT_ROW(4) ZT_ROW(5) ZT_ROW(6)
#define ZT_FNS(R) {zt_##R##_1, zt_##R##_2, zt_##R##_3, zt_##R##_4}
static const ztile_fn ZTILES[RT][ZMAX] = {ZT_FNS(1), ZT_FNS(2), ZT_FNS(3), ZT_FNS(4), ZT_FNS(5), ZT_FNS(6)};

/* Rows [0, rows) x columns [n0, n1) of a blocked weight; -1 when the panel cannot be had. */
static int blocked_gemm(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, b0 = n0 / 8, b1 = (n1 + 7) / 8;
    const int Z = K <= 2048 ? ZMAX : 2;
    float *panel = xi_kernel_scratch(0, (size_t)(Z * 16 * K) * 4);
    if (!panel) return -1;
    for (int64_t rb = 0; rb < rows; rb += GEMM_ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + GEMM_ROW_BLOCK);
        for (int64_t b = b0; b < b1; b += 2 * Z) {
            const int nb = (int)XI_MIN((int64_t)(2 * Z), b1 - b), zc = (nb + 1) / 2;
            panel_fill(panel, w, b, nb);
            const float *sc = w->dtype == XI_Q8 ? w->scale + b * 8 : NULL;
            for (int64_t r = rb; r < re; r += RT) {
                const int R = (int)XI_MIN((int64_t)RT, re - r);
                ZTILES[R - 1][zc - 1](y + r * ldy + b * 8, ldy, x + r * ldx, ldx, panel, K, sc,
                                      XI_MAX(n0 - b * 8, 0), XI_MIN(n1 - b * 8, (int64_t)nb * 8));
            }
        }
    }
    return 0;
}

/* One row of a blocked 16-bit weight (decode, and a 16-bit lm_head), 16 columns (two blocks)
 * per zmm: each input k widens the two blocks' 8 values at k (F16: one vcvtph2ps; BF16: the
 * input pair's 32 bytes of both blocks, shifted and masked) and runs avx2's chain per lane
 * (acc = fma(x[k], W[n, k], acc) from 0, k ascending), so the bits are avx2's. A one-row GEMV
 * is bound by how fast memory comes in, not by the conversions: every 64 bytes of each of the
 * tile's 8 block streams, the line GEMV_PF bytes ahead is prefetched (avx2's tile leaves F16
 * to the hardware prefetchers, which measured faster on AVX2-only CPUs). Zen 5, 1 thread,
 * bench_kernels --gemv, 4 alternating runs, GB/s, avx2's tile -> this: F16 4864x896 22-23 ->
 * 25-27, 151936x896 23-25 -> 27-29; BF16 24-25 -> 26-27 and 26-27 -> 27-30. Rows of 4864
 * inputs (896x4864) ran slower here than in avx2's tile (F16 27-29 -> 25-26, with or without
 * the prefetches), so rows longer than GEMV_MAX_K stay there. */
#define GEMV_NB 8    /* blocks (8 columns) per one-row tile */
#define GEMV_PF 1024 /* prefetch distance per block stream, bytes */
#define GEMV_MAX_K 2048 /* longer rows: avx2's tile */

/* the 8 bf16 at a, then the 8 at b (an unpaired last input), as f32 */
XI_INLINE __m512 bf16x8x2(const char *a, const char *b) {
    const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)a)),
                  hi = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)b));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), 16));
}
/* the 32 bytes of an input pair (kernels.h) at a, then at b */
XI_INLINE __m512i bf16_pairs2(const char *a, const char *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
#define FMA_BF16_PAIR(acc, xp, v)                                                               \
    do {                                                                                        \
        acc = _mm512_fmadd_ps(_mm512_set1_ps((xp)[0]), _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), acc); \
        acc = _mm512_fmadd_ps(_mm512_set1_ps((xp)[1]),                                          \
                              _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u))), acc); \
    } while (0)

/* NP pairs of blocks of format t from blk (the last pair's second block is its first again
 * when nb is odd: the same lines, its lanes not stored); columns [lo, hi) of the tile are
 * stored. */
XI_INLINE void row16_tile(xi_dtype t, int NP, int nb, float *y, const float *x, const char *blk,
                          size_t bs, int64_t K, int64_t lo, int64_t hi) {
    const char *pa[GEMV_NB / 2], *pb[GEMV_NB / 2];
    __m512 acc[GEMV_NB / 2];
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++) {
        pa[p] = blk + (size_t)(2 * p) * bs;
        pb[p] = 2 * p + 1 < nb ? pa[p] + bs : pa[p];
        acc[p] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        if ((size_t)(k * 16) + GEMV_PF < bs) {
#pragma GCC unroll 4
            for (int p = 0; p < NP; p++) {
                _mm_prefetch(pa[p] + k * 16 + GEMV_PF, _MM_HINT_T0);
                _mm_prefetch(pb[p] + k * 16 + GEMV_PF, _MM_HINT_T0);
            }
        }
        if (t == XI_BF16) {
#pragma GCC unroll 2
            for (int u = 0; u < 4; u += 2)
#pragma GCC unroll 4
                for (int p = 0; p < NP; p++) {
                    const __m512i v = bf16_pairs2(pa[p] + (k + u) * 16, pb[p] + (k + u) * 16);
                    FMA_BF16_PAIR(acc[p], x + k + u, v);
                }
        } else {
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                const __m512 xb = _mm512_set1_ps(x[k + u]);
#pragma GCC unroll 4
                for (int p = 0; p < NP; p++)
                    acc[p] = _mm512_fmadd_ps(xb, f16x8x2(pa[p] + (k + u) * 16, pb[p] + (k + u) * 16), acc[p]);
            }
        }
    }
    if (t == XI_BF16)
        for (; k + 2 <= K; k += 2)
#pragma GCC unroll 4
            for (int p = 0; p < NP; p++) {
                const __m512i v = bf16_pairs2(pa[p] + k * 16, pb[p] + k * 16);
                FMA_BF16_PAIR(acc[p], x + k, v);
            }
    for (; k < K; k++) {
        const __m512 xb = _mm512_set1_ps(x[k]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++)
            acc[p] = _mm512_fmadd_ps(xb, t == XI_BF16 ? bf16x8x2(pa[p] + k * 16, pb[p] + k * 16)
                                                      : f16x8x2(pa[p] + k * 16, pb[p] + k * 16),
                                     acc[p]);
    }
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++) {
        float o[16];
        _mm512_storeu_ps(o, acc[p]);
        const int64_t c0 = XI_MAX(lo, (int64_t)p * 16), c1 = XI_MIN(hi, XI_MIN((int64_t)p * 16 + 16, (int64_t)nb * 8));
        for (int64_t c = c0; c < c1; c++) y[c] = o[c - p * 16];
    }
}

typedef void (*row16_fn)(int, float *, const float *, const char *, size_t, int64_t, int64_t, int64_t);
#define ROW16_FN(T, NP)                                                                         \
    static void row16_##T##_##NP(int nb, float *y, const float *x, const char *blk, size_t bs,  \
                                 int64_t K, int64_t lo, int64_t hi) {                           \
        row16_tile(XI_##T, NP, nb, y, x, blk, bs, K, lo, hi);                                   \
    }
ROW16_FN(F16, 1) ROW16_FN(F16, 2) ROW16_FN(F16, 3) ROW16_FN(F16, 4)
ROW16_FN(BF16, 1) ROW16_FN(BF16, 2) ROW16_FN(BF16, 3) ROW16_FN(BF16, 4)
static const row16_fn ROW16[2][GEMV_NB / 2] = {{row16_F16_1, row16_F16_2, row16_F16_3, row16_F16_4},
                                               {row16_BF16_1, row16_BF16_2, row16_BF16_3, row16_BF16_4}};

/* Columns [n0, n1) of one row x of a blocked F16 or BF16 weight. */
static void row16_gemv(float *y, const float *x, const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, b0 = n0 / 8, b1 = (n1 + 7) / 8;
    const size_t bs = (size_t)(16 * K);
    const row16_fn *fns = ROW16[w->dtype == XI_BF16];
    for (int64_t b = b0; b < b1; b += GEMV_NB) {
        const int nb = (int)XI_MIN((int64_t)GEMV_NB, b1 - b);
        fns[(nb + 1) / 2 - 1](nb, y + b * 8, x, (const char *)w->data + (size_t)b * bs, bs, K,
                              XI_MAX(n0 - b * 8, 0), n1 - b * 8);
    }
}

void MM512_FN(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
              const xi_weight *w, int64_t n0, int64_t n1) {
    const int dense = w->dtype == XI_F32 || w->dtype == XI_F16 || w->dtype == XI_BF16 || w->dtype == XI_Q8;
    if (w->block == 8 && (w->dtype == XI_F16 || w->dtype == XI_BF16) && rows == 1 && w->n_in <= GEMV_MAX_K &&
        n1 > n0) {
        row16_gemv(y, x, w, n0, n1);
        return;
    }
    if (w->block != 8 || !dense || rows < GEMM_MIN_ROWS(w->dtype) || n1 <= n0 ||
        blocked_gemm(y, ldy, x, ldx, rows, w, n0, n1))
        xi_avx2_matmul(y, ldy, x, ldx, rows, w, n0, n1);
}
