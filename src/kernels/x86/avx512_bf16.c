/* kernels/x86/avx512_bf16: the BF16 matmul of the avx512bf16 int8 table (xi_ops.matmul_bf16):
 * a BF16 weight in the blocked layout (block 8, input pairs interleaved: kernels.h) against
 * input rows rounded to bf16 (xi_ops.round_bf16, vcvtneps2bf16), with vdpbf16ps, bitwise
 * xi_matmul_bf16_ref (bf16dot.c). Row-major weights return -1 (the caller's fp32 path).
 *
 * In the blocked layout the 32 bytes of one input pair of a block are 8 dwords, column c's
 * (W[n, 2p], W[n, 2p+1]) in dword c: the operand vdpbf16ps wants against a broadcast dword
 * (x[2p], x[2p+1]) of the row, which is how rows rounded to bf16 lie in memory. Every lane
 * runs the same chain (the instruction's odd product, then its even one, per pair, in pair
 * order), so the ymm tiles below and the zmm tiles give the same bits at every row count,
 * chunking and thread split. An odd last input (stored unpaired, 8 values) is widened to
 * dwords with a zero high half, against the row's zero pad.
 *
 * Up to 7 rows (decode, small batches) run ymm tiles straight from the weight: up to 4
 * rows x 8 blocks, one load per 32 bytes that every row of the tile uses, each block stream
 * prefetched 1 KB ahead on a one-row tile (as the f32 GEMV of avx512_matmul.c does). From 8
 * rows, per block of 256 rows (their bf16 x stays in L2) and per group of up to 4 zmm blocks,
 * the group's pairs are copied once into a panel [zmm block][pair][16 dwords] and tiles of
 * up to 6 rows x 4 zmm blocks (24 accumulators, 4 weight vectors and a broadcast) run down
 * the rows: 24 vdpbf16ps (768 multiply-adds) per 4 panel loads and 6 broadcasts, twice the
 * multiply-adds per instruction of the f32 tiles' FMAs. */
#include <immintrin.h>

#include "kernels/x86/avx2_common.h"
#include "kernels/x86/avx512_f16.h"

#define GEMM_MIN_ROWS 8   /* from here the zmm panel tiles */
/* Rows per panel fill: each fill reads the group's weights from memory again, so more rows
 * per fill save weight reads while the block's bf16 x (256 x 896 x 2 bytes: 458 KB) still
 * sits in L2. Zen 5, 2 threads, Qwen2.5-0.5B-shaped prefill of 512 tokens, 2 alternating
 * runs, tok/s: 64 rows 504, 504; 128: 525, 524; 256: 556, 552; 512: 544, 538 (sizing the
 * block to 256-1024 KB of x per n_in instead gained nothing). */
#define GEMM_ROW_BLOCK 256
#define RT 6              /* rows per zmm tile */
#define ZMAX 4            /* zmm blocks (16 columns) per column group */
#define DR 4              /* rows per ymm tile */
#define DNB 8             /* blocks per ymm tile, at most */
#define GEMV_PF 1024      /* prefetch distance per block stream, bytes (one-row tiles) */

void xi_bf16_round_avx512(uint16_t *out, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(out + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* The blocks a ymm tile of R rows spans: R x NB accumulators, NB weight vectors and a
 * broadcast within the 32 registers. */
static const int DNB_OF[DR] = {8, 8, 6, 4};

/* R rows x NB blocks (8 columns each, bs bytes apart) from blk; x: row r's input pairs at
 * x[r * ldx + p]; y and columns [lo, hi) relative to the tile's first column. */
XI_INLINE void dtile(int R, int NB, float *y, int64_t ldy, const uint32_t *x, int64_t ldx,
                     const char *blk, size_t bs, int64_t K, int64_t lo, int64_t hi) {
    __m256 acc[DR][DNB];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++) acc[r][b] = _mm256_setzero_ps();
    const int64_t P2 = K / 2;
    for (int64_t p = 0; p < P2; p++) {
        if (R == 1 && !(p & 1) && (size_t)(p * 32) + GEMV_PF < bs) {
#pragma GCC unroll 8
            for (int b = 0; b < NB; b++) _mm_prefetch(blk + (size_t)b * bs + p * 32 + GEMV_PF, _MM_HINT_T0);
        }
        __m256i wv[DNB];
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++) wv[b] = _mm256_loadu_si256((const __m256i *)(blk + (size_t)b * bs + p * 32));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256i xb = _mm256_set1_epi32((int)x[r * ldx + p]);
#pragma GCC unroll 8
            for (int b = 0; b < NB; b++)
                acc[r][b] = _mm256_dpbf16_ps(acc[r][b], (__m256bh)wv[b], (__m256bh)xb);
        }
    }
    if (K & 1) { /* the unpaired last input: (W[n, K-1], 0) against (x[K-1], 0) */
        __m256i wv[DNB];
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++)
            wv[b] = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(blk + (size_t)b * bs + (K - 1) * 16)));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256i xb = _mm256_set1_epi32((int)x[r * ldx + P2]);
#pragma GCC unroll 8
            for (int b = 0; b < NB; b++)
                acc[r][b] = _mm256_dpbf16_ps(acc[r][b], (__m256bh)wv[b], (__m256bh)xb);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int b = 0; b < NB; b++) {
            float t[8];
            _mm256_storeu_ps(t, acc[r][b]);
            const int64_t c0 = XI_MAX(lo, (int64_t)b * 8), c1 = XI_MIN(hi, (int64_t)b * 8 + 8);
            for (int64_t c = c0; c < c1; c++) y[r * ldy + c] = t[c - b * 8];
        }
}

typedef void (*dtile_fn)(float *, int64_t, const uint32_t *, int64_t, const char *, size_t, int64_t,
                         int64_t, int64_t);
#define DT_FN(R, NB)                                                                           \
    static void dt_##R##_##NB(float *y, int64_t ldy, const uint32_t *x, int64_t ldx,            \
                              const char *blk, size_t bs, int64_t K, int64_t lo, int64_t hi) {  \
        dtile(R, NB, y, ldy, x, ldx, blk, bs, K, lo, hi);                                       \
    }
#define DT_ROW6(R) DT_FN(R, 1) DT_FN(R, 2) DT_FN(R, 3) DT_FN(R, 4) DT_FN(R, 5) DT_FN(R, 6)
DT_ROW6(1) DT_FN(1, 7) DT_FN(1, 8)
DT_ROW6(2) DT_FN(2, 7) DT_FN(2, 8)
DT_ROW6(3)
DT_FN(4, 1) DT_FN(4, 2) DT_FN(4, 3) DT_FN(4, 4)
static const dtile_fn DTILES[DR][DNB] = {
    {dt_1_1, dt_1_2, dt_1_3, dt_1_4, dt_1_5, dt_1_6, dt_1_7, dt_1_8},
    {dt_2_1, dt_2_2, dt_2_3, dt_2_4, dt_2_5, dt_2_6, dt_2_7, dt_2_8},
    {dt_3_1, dt_3_2, dt_3_3, dt_3_4, dt_3_5, dt_3_6, NULL, NULL},
    {dt_4_1, dt_4_2, dt_4_3, dt_4_4, NULL, NULL, NULL, NULL},
};

/* Rows [0, rows) x columns [n0, n1) through the ymm tiles: per group of blocks (the widest
 * tile of min(rows, 4) rows), every 4-row tile, then the rest, over the same blocks. */
static void direct_rows(float *y, int64_t ldy, const uint32_t *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, b0 = n0 / 8, b1 = (n1 + 7) / 8;
    const size_t bs = (size_t)(16 * K);
    const int G = DNB_OF[XI_MIN(rows, (int64_t)DR) - 1];
    for (int64_t b = b0; b < b1; b += G) {
        const int NB = (int)XI_MIN((int64_t)G, b1 - b);
        const char *blk = (const char *)w->data + (size_t)b * bs;
        for (int64_t r = 0; r < rows; r += DR) {
            const int R = (int)XI_MIN((int64_t)DR, rows - r);
            DTILES[R - 1][NB - 1](y + r * ldy + b * 8, ldy, x + r * ldx, ldx, blk, bs, K,
                                  XI_MAX(n0 - b * 8, 0), n1 - b * 8);
        }
    }
}

/* Blocks [b, b + nb) (nb <= 2 Z) of w as the panel p [zmm block][pair][16 dwords]; the half
 * of a last zmm block past nb is 0, as is an odd last input's high half. */
static void panel_fill(uint32_t *p, const xi_weight *w, int64_t b, int nb) {
    const int64_t K = w->n_in, P2 = K / 2, P = (K + 1) / 2;
    const size_t bs = (size_t)(16 * K);
    for (int j = 0; j < nb; j += 2) {
        const char *s0 = (const char *)w->data + (size_t)(b + j) * bs, *s1 = j + 1 < nb ? s0 + bs : NULL;
        uint32_t *d = p + (size_t)(j / 2) * (size_t)P * 16;
        for (int64_t q = 0; q < P2; q++) {
            const __m256i lo = _mm256_loadu_si256((const __m256i *)(s0 + q * 32)),
                          hi = s1 ? _mm256_loadu_si256((const __m256i *)(s1 + q * 32)) : _mm256_setzero_si256();
            _mm512_storeu_si512(d + q * 16, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        }
        if (K & 1) {
            const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s0 + (K - 1) * 16))),
                          hi = s1 ? _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s1 + (K - 1) * 16)))
                                  : _mm256_setzero_si256();
            _mm512_storeu_si512(d + P2 * 16, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        }
    }
}

/* R rows x Z zmm blocks of the panel p (P pairs); y and the columns [lo, hi) relative to the
 * group's first column. */
XI_INLINE void ztile(int R, int Z, float *y, int64_t ldy, const uint32_t *x, int64_t ldx,
                     const uint32_t *p, int64_t P, int64_t lo, int64_t hi) {
    __m512 acc[RT][ZMAX];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++) acc[r][z] = _mm512_setzero_ps();
    for (int64_t q = 0; q < P; q++) {
        __m512i wv[ZMAX];
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++) wv[z] = _mm512_loadu_si512(p + ((size_t)z * (size_t)P + (size_t)q) * 16);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m512i xb = _mm512_set1_epi32((int)x[r * ldx + q]);
#pragma GCC unroll 4
            for (int z = 0; z < Z; z++) acc[r][z] = _mm512_dpbf16_ps(acc[r][z], (__m512bh)wv[z], (__m512bh)xb);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++) zstore_cols(y + r * ldy, acc[r][z], (int64_t)z * 16, lo, hi, NULL);
}

typedef void (*ztile_fn)(float *, int64_t, const uint32_t *, int64_t, const uint32_t *, int64_t,
                         int64_t, int64_t);
#define ZT_FN(R, Z)                                                                            \
    static void zt_##R##_##Z(float *y, int64_t ldy, const uint32_t *x, int64_t ldx,             \
                             const uint32_t *p, int64_t P, int64_t lo, int64_t hi) {            \
        ztile(R, Z, y, ldy, x, ldx, p, P, lo, hi);                                              \
    }
#define ZT_ROW(R) ZT_FN(R, 1) ZT_FN(R, 2) ZT_FN(R, 3) ZT_FN(R, 4)
ZT_ROW(1) ZT_ROW(2) ZT_ROW(3) ZT_ROW(4) ZT_ROW(5) ZT_ROW(6)
#define ZT_FNS(R) {zt_##R##_1, zt_##R##_2, zt_##R##_3, zt_##R##_4}
static const ztile_fn ZTILES[RT][ZMAX] = {ZT_FNS(1), ZT_FNS(2), ZT_FNS(3), ZT_FNS(4), ZT_FNS(5), ZT_FNS(6)};

/* Rows [0, rows) x columns [n0, n1) through panels; -1 when the panel cannot be had. Rows of
 * more than 4096 inputs use 2 zmm blocks per group, so the panel stays within L2 beside the
 * row block's x. */
static int panel_gemm(float *y, int64_t ldy, const uint32_t *x, int64_t ldx, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, P = (K + 1) / 2, b0 = n0 / 8, b1 = (n1 + 7) / 8;
    const int Z = K <= 4096 ? ZMAX : 2;
    uint32_t *panel = xi_kernel_scratch(0, (size_t)(Z * 16 * P) * 4);
    if (!panel) return -1;
    for (int64_t rb = 0; rb < rows; rb += GEMM_ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + GEMM_ROW_BLOCK);
        for (int64_t b = b0; b < b1; b += 2 * Z) {
            const int nb = (int)XI_MIN((int64_t)(2 * Z), b1 - b), zc = (nb + 1) / 2;
            panel_fill(panel, w, b, nb);
            for (int64_t r = rb; r < re; r += RT) {
                const int R = (int)XI_MIN((int64_t)RT, re - r);
                ZTILES[R - 1][zc - 1](y + r * ldy + b * 8, ldy, x + r * ldx, ldx, panel, P,
                                      XI_MAX(n0 - b * 8, 0), XI_MIN(n1 - b * 8, (int64_t)nb * 8));
            }
        }
    }
    return 0;
}

int xi_matmul_bf16_avx512(float *y, int64_t ldy, const uint16_t *x, int64_t ldx, int64_t rows,
                          const xi_weight *w, int64_t n0, int64_t n1) {
    if (w->dtype != XI_BF16 || w->block != 8) return -1;
    if (rows <= 0 || n1 <= n0) return 0;
    const uint32_t *x32 = (const uint32_t *)(const void *)x;
    if (rows >= GEMM_MIN_ROWS && !panel_gemm(y, ldy, x32, ldx / 2, rows, w, n0, n1)) return 0;
    direct_rows(y, ldy, x32, ldx / 2, rows, w, n0, n1);
    return 0;
}
