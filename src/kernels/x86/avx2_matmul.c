/* kernels/x86/avx2_matmul: y = x W^T for every weight format with AVX2 + FMA + F16C.
 *
 * Summation order (the determinism contract): y[r, n] keeps one 8-lane f32 accumulator;
 * lane l accumulates x[r, k] * W[n, k] for k = 8i + l, i ascending, one FMA each. Then
 * avx2_hsum, then the k % 8 tail one scalar FMA at a time, then (Q8) times scale[n]. For
 * Q4_AWQ, W[n, k] is first dequantized as fma(q, s, -z * s) for k's group. Every path below
 * (GEMV tiles, small-batch tiles, GEMM over an f32 panel, any tile edge) produces exactly
 * these operations per element, so the result is independent of rows, tiles and threads. */
#include <stdlib.h>

#include "kernels/x86/avx2_common.h"

#define GEMM_MIN_ROWS 8 /* above this, weights are converted once into an f32 panel */
#define GEMM_ROW_BLOCK 32 /* rows whose x stays in L2 while a column panel is reused */

typedef struct {
    float *y;
    int64_t ldy;
    const float *x;
    int64_t ldx;
    int64_t k; /* n_in */
} tile_io;

/* acc[r][c] += x[r, k..k+7] * wv[c] for an R x C tile. */
XI_INLINE void acc_step(int R, int C, __m256 acc[4][4], const __m256 *wv, const tile_io *io,
                        int64_t k) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const __m256 xv = _mm256_loadu_ps(io->x + r * io->ldx + k);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
}

XI_INLINE void acc_zero(int R, int C, __m256 acc[4][4]) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
}

/* R rows x C columns of outputs; wrow[c] is column c's weight row, scale NULL or [C]. */
XI_INLINE void tile_dense(xi_dtype t, int R, int C, const tile_io *io, const void *const *wrow,
                          const float *scale) {
    const int64_t K = io->k, K8 = K & ~(int64_t)7;
    __m256 acc[4][4];
    acc_zero(R, C, acc);
    for (int64_t k = 0; k < K8; k += 8) {
        __m256 wv[4];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) wv[c] = avx2_load8(t, wrow[c], k);
        acc_step(R, C, acc, wv, io, k);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            float s = avx2_hsum(acc[r][c]);
            for (int64_t k = K8; k < K; k++)
                s = avx2_fma1(io->x[r * io->ldx + k], avx2_load1(t, wrow[c], k), s);
            if (scale) s *= scale[c];
            io->y[r * io->ldy + c] = s;
        }
}

/* Q4_AWQ dequantization of 8 inputs starting at k (k % 8 == 0) of a packed row: the
 * little-endian u32 at byte k/2 holds inputs k..k+7 in nibbles 0..7. */
XI_INLINE __m256 q4_dequant8(const uint8_t *row, int64_t k, __m256 s, __m256 m) {
    uint32_t u;
    memcpy(&u, row + k / 2, 4);
    const __m256i q = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32((int)u), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, m);
}

XI_INLINE float q4_offset(uint8_t z, float s) { return -((float)z * s); }

typedef struct {
    const uint8_t *row; /* [K/2] packed nibbles */
    const float *scale; /* [K/group] */
    const uint8_t *zero; /* [K/group] */
} q4_col;

XI_INLINE void tile_q4(int R, int C, const tile_io *io, const q4_col *col, int64_t gs) {
    const int64_t K = io->k;
    __m256 acc[4][4];
    acc_zero(R, C, acc);
    for (int64_t g = 0, k = 0; k < K; g++) {
        __m256 s[4], m[4];
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            s[c] = _mm256_set1_ps(col[c].scale[g]);
            m[c] = _mm256_set1_ps(q4_offset(col[c].zero[g], col[c].scale[g]));
        }
        for (const int64_t ke = k + gs; k < ke; k += 8) {
            __m256 wv[4];
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) wv[c] = q4_dequant8(col[c].row, k, s[c], m[c]);
            acc_step(R, C, acc, wv, io, k);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) io->y[r * io->ldy + c] = avx2_hsum(acc[r][c]);
}

/* Constant-shape instantiations: R rows (1..4) x C columns (1..4; at most 3 when R > 2, to
 * stay within the 16 ymm registers). */
#define SHAPES(X)                                                                          \
    X(1, 1) X(1, 2) X(1, 3) X(1, 4) X(2, 1) X(2, 2) X(2, 3) X(2, 4) X(3, 1) X(3, 2) X(3, 3) \
    X(4, 1) X(4, 2) X(4, 3)

#define DENSE_TILES(fname, T)                                                              \
    static void fname(int R, int C, const tile_io *io, const void *const *wrow,            \
                      const float *scale) {                                                \
        switch (R * 8 + C) {                                                               \
            SHAPES(DENSE_CASE_##T)                                                         \
        default: break;                                                                    \
        }                                                                                  \
    }
#define DENSE_CASE_F32(r, c) case r * 8 + c: tile_dense(XI_F32, r, c, io, wrow, scale); break;
#define DENSE_CASE_F16(r, c) case r * 8 + c: tile_dense(XI_F16, r, c, io, wrow, scale); break;
#define DENSE_CASE_BF16(r, c) case r * 8 + c: tile_dense(XI_BF16, r, c, io, wrow, scale); break;
#define DENSE_CASE_Q8(r, c) case r * 8 + c: tile_dense(XI_Q8, r, c, io, wrow, scale); break;
DENSE_TILES(tiles_f32, F32)
DENSE_TILES(tiles_f16, F16)
DENSE_TILES(tiles_bf16, BF16)
DENSE_TILES(tiles_q8, Q8)

#define Q4_CASE(r, c) case r * 8 + c: tile_q4(r, c, io, col, gs); break;
static void tiles_q4(int R, int C, const tile_io *io, const q4_col *col, int64_t gs) {
    switch (R * 8 + C) {
        SHAPES(Q4_CASE)
    default: break;
    }
}

static int max_cols(int R) { return R > 2 ? 3 : 4; }

/* Rows [r0, r0 + R) x columns [n0, n1) straight from the weight format. */
static void direct_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int R,
                        const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in;
    const size_t es = w->dtype == XI_Q8 ? 1 : xi_dtype_size(w->dtype);
    const int cmax = max_cols(R);
    for (int64_t n = n0; n < n1; n += cmax) {
        const int C = (int)XI_MIN((int64_t)cmax, n1 - n);
        tile_io io = {y + n, ldy, x, ldx, K};
        if (w->dtype == XI_Q4_AWQ) {
            const int64_t G = K / w->group_size;
            q4_col col[4];
            for (int c = 0; c < C; c++) {
                col[c].row = (const uint8_t *)w->data + (n + c) * (K / 2);
                col[c].scale = w->scale + (n + c) * G;
                col[c].zero = w->zero + (n + c) * G;
            }
            tiles_q4(R, C, &io, col, w->group_size);
            continue;
        }
        const void *wrow[4];
        for (int c = 0; c < C; c++) wrow[c] = (const char *)w->data + (size_t)(n + c) * K * es;
        switch (w->dtype) {
        case XI_F16: tiles_f16(R, C, &io, wrow, NULL); break;
        case XI_BF16: tiles_bf16(R, C, &io, wrow, NULL); break;
        case XI_Q8: tiles_q8(R, C, &io, wrow, w->scale + n); break;
        default: tiles_f32(R, C, &io, wrow, NULL); break;
        }
    }
}

/* Column n of W as exact f32 values in dst[K] (Q8 without its scale), with the same
 * per-element operations the direct tiles use, so panel and direct paths agree bitwise. */
static void panel_column(float *dst, const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in, K8 = K & ~(int64_t)7;
    if (w->dtype == XI_Q4_AWQ) {
        const int64_t gs = w->group_size, G = K / gs;
        const uint8_t *row = (const uint8_t *)w->data + n * (K / 2);
        for (int64_t g = 0; g < G; g++) {
            const float sc = w->scale[n * G + g];
            const __m256 s = _mm256_set1_ps(sc), m = _mm256_set1_ps(q4_offset(w->zero[n * G + g], sc));
            for (int64_t k = g * gs; k < (g + 1) * gs; k += 8)
                _mm256_storeu_ps(dst + k, q4_dequant8(row, k, s, m));
        }
        return;
    }
    const size_t es = w->dtype == XI_Q8 ? 1 : xi_dtype_size(w->dtype);
    const void *row = (const char *)w->data + (size_t)n * K * es;
    int64_t k = 0;
    for (; k < K8; k += 8) _mm256_storeu_ps(dst + k, avx2_load8(w->dtype, row, k));
    for (; k < K; k++) dst[k] = avx2_load1(w->dtype, row, k);
}

/* Many rows: per block of rows (x in L2), per 3 columns, convert the columns to f32 once and
 * run every 4-row tile of the block over them. Returns -1 when the panel cannot be allocated
 * (the caller then uses the direct tiles, which give the same bits). */
static int gemm_panel(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in;
    float *panel = NULL;
    if (w->dtype != XI_F32) {
        panel = aligned_alloc(64, (size_t)((3 * K * 4 + 63) & ~(int64_t)63));
        if (!panel) return -1;
    }
    const float *scale = w->dtype == XI_Q8 ? w->scale : NULL;
    for (int64_t rb = 0; rb < rows; rb += GEMM_ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + GEMM_ROW_BLOCK);
        for (int64_t n = n0; n < n1; n += 3) {
            const int C = (int)XI_MIN((int64_t)3, n1 - n);
            const void *wrow[3];
            for (int c = 0; c < C; c++) {
                if (panel) {
                    panel_column(panel + c * K, w, n + c);
                    wrow[c] = panel + c * K;
                } else {
                    wrow[c] = (const float *)w->data + (n + c) * K;
                }
            }
            for (int64_t r = rb; r < re; r += 4) {
                const int R = (int)XI_MIN((int64_t)4, re - r);
                tile_io io = {y + r * ldy + n, ldy, x + r * ldx, ldx, K};
                tiles_f32(R, C, &io, wrow, scale ? scale + n : NULL);
            }
        }
    }
    free(panel);
    return 0;
}

void xi_avx2_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1) {
    if (w->dtype == XI_Q4_AWQ && (w->group_size <= 0 || w->group_size % 8 || w->n_in % w->group_size)) {
        /* Only AWQ group sizes that are multiples of 8 have a vector path. */
        xi_ops_ref()->matmul(y, ldy, x, ldx, rows, w, n0, n1);
        return;
    }
    if (rows > GEMM_MIN_ROWS && gemm_panel(y, ldy, x, ldx, rows, w, n0, n1) == 0) return;
    for (int64_t r = 0; r < rows; r += 4) {
        const int R = (int)XI_MIN((int64_t)4, rows - r);
        direct_rows(y + r * ldy, ldy, x + r * ldx, ldx, R, w, n0, n1);
    }
}
