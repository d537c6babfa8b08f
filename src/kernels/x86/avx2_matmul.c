/* kernels/x86/avx2_matmul: y = x W^T for every weight format with AVX2 + FMA + F16C.
 *
 * Summation order (the determinism contract): y[r, n] keeps one 8-lane f32 accumulator;
 * lane l accumulates x[r, k] * W[n, k] for k = 8i + l, i ascending, one FMA each. Then the
 * lanes are summed as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) (avx2_hsum4's order), then the
 * k % 8 tail is added one scalar FMA at a time, then (Q8) the sum is multiplied by scale[n].
 * For Q4_AWQ, W[n, k] is first dequantized as fma(q, s, -z * s) for k's group. Every path
 * below (GEMV tiles, small-batch tiles, GEMM over an f32 panel, any tile edge) performs
 * exactly these operations per element, so results do not depend on rows, tiles or threads. */
#include "kernels/x86/avx2_common.h"

#define GEMM_MIN_ROWS 8   /* above this, weights are converted once into an f32 panel */
#define GEMM_ROW_BLOCK 32 /* rows whose x stays in L2 while a column panel is reused */
#define PANEL_COLS 3

/* Q4_AWQ dequantization of 8 inputs starting at k (k % 8 == 0) of a packed row: the
 * little-endian u32 at byte k/2 holds inputs k..k+7 in nibbles 0..7. */
XI_INLINE __m256 q4_dequant8(const char *row, int64_t k, __m256 s, __m256 m) {
    int32_t u;
    memcpy(&u, row + k / 2, 4);
    const __m256i q = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(u), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, m);
}

/* Q4_AWQ block 16 (kernels.h): inputs k..k+15 (k % 16 == 0) of a packed row, dequantized
 * as q4_dequant8 does, *lo = k..k+7 and *hi = k+8..k+15: one zero-extending load of 8 bytes,
 * then a mask for the low nibbles and a shift for the high ones. */
XI_INLINE void q4b_dequant16(const char *row, int64_t k, __m256 s, __m256 m, __m256 *lo,
                             __m256 *hi) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + k / 2)));
    *lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(15))), s, m);
    *hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), s, m);
}

/* Tiles keep each accumulator in its own named variable a<r><c> (GCC spills arrays of
 * vectors); the shape guards are compile-time constants after inlining. */
#define FOR_COLS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define FOR_ROWS(OP) OP(0) OP(1) OP(2) OP(3)
#define FOR_ROW0(OP) OP(0, 0) OP(0, 1) OP(0, 2) OP(0, 3) OP(0, 4) OP(0, 5) OP(0, 6) OP(0, 7)
#define FOR_TILE(OP)                                                                        \
    FOR_ROW0(OP) OP(1, 0) OP(1, 1) OP(1, 2) OP(1, 3) OP(2, 0) OP(2, 1) OP(2, 2) OP(2, 3)    \
        OP(3, 0) OP(3, 1) OP(3, 2) OP(3, 3)
#define ACC_DECL(r, c) __m256 a##r##c = _mm256_setzero_ps();
#define X_LOAD(r) const __m256 x##r = r < R ? _mm256_loadu_ps(io->x + r * io->ldx + k) : zero;
#define ACC_FMA(r, c) if (r < R && c < C) a##r##c = _mm256_fmadd_ps(x##r, w##c, a##r##c);
#define X_LOAD2(r)                                                                          \
    const __m256 x##r = r < R ? _mm256_loadu_ps(io->x + r * io->ldx + k) : zero;            \
    const __m256 xh##r = r < R ? _mm256_loadu_ps(io->x + r * io->ldx + k + 8) : zero;
#define ACC_FMA2(r, c)                                                                      \
    if (r < R && c < C) {                                                                   \
        a##r##c = _mm256_fmadd_ps(x##r, w##c, a##r##c);                                     \
        a##r##c = _mm256_fmadd_ps(xh##r, wh##c, a##r##c);                                   \
    }
#define W_Q4B(c)                                                                            \
    __m256 w##c = zero, wh##c = zero;                                                       \
    if (c < C) q4b_dequant16(w->base + c * w->stride, k, s##c, m##c, &w##c, &wh##c);
#define W_DENSE(c) const __m256 w##c = c < C ? avx2_load8(t, w->base + c * w->stride, k) : zero;
#define W_Q4(c) const __m256 w##c = c < C ? q4_dequant8(w->base + c * w->stride, k, s##c, m##c) : zero;
#define Q4_SCALE(c)                                                                         \
    const __m256 s##c = c < C ? _mm256_set1_ps(w->scale[c * w->groups + g]) : zero;        \
    const __m256 m##c = c < C ? _mm256_set1_ps(q4_offset(w->zero[c * w->groups + g],       \
                                                         w->scale[c * w->groups + g]))      \
                              : zero;

/* Short rows (n_in of a few hundred) end a tile before the hardware prefetchers have
 * ramped up on its C new streams, so each tile prefetches the next tile's rows at the
 * offset it is reading itself, one line per row per 64 bytes. */
#define PF_NEXT(c) \
    if (c < C && io->pf) _mm_prefetch(w->base + (C + c) * w->stride + k * es, _MM_HINT_T0);
#define PF_NEXT_Q4(c) \
    if (c < C && io->pf) _mm_prefetch(w->base + (C + c) * w->stride + k / 2, _MM_HINT_T0);
#define FOR_COLS_Q4_PF FOR_COLS(PF_NEXT_Q4)

/* Row r of a tile: sum each accumulator in the canonical order, add the tail, scale, store. */
XI_INLINE void finish_row(xi_dtype t, int C, const tile_io *io, int r, const wsrc *w, __m256 v0,
                          __m256 v1, __m256 v2, __m256 v3, __m256 v4, __m256 v5, __m256 v6,
                          __m256 v7) {
    const int64_t K = io->k, K8 = K & ~(int64_t)7;
    float s[8];
    _mm_storeu_ps(s, avx2_hsum4(v0, v1, v2, v3));
    if (C > 4) _mm_storeu_ps(s + 4, avx2_hsum4(v4, v5, v6, v7));
    for (int c = 0; c < C; c++) {
        for (int64_t k = K8; k < K; k++)
            s[c] = avx2_fma1(io->x[r * io->ldx + k], xi_elem_f32(t, w->base + c * w->stride, k), s[c]);
        if (w->scale && t != XI_Q4_AWQ) s[c] *= w->scale[c];
        io->y[r * io->ldy + c] = s[c];
    }
}

XI_INLINE void tile(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const int64_t K = io->k, K8 = K & ~(int64_t)7;
    const __m256 zero = _mm256_setzero_ps();
    FOR_TILE(ACC_DECL)
    if (t == XI_Q4_AWQ && w->q4b == 16) {
        /* Two 8-lane steps per 16 inputs, in the same order as the row-major loop below. */
        for (int64_t g = 0, k = 0; k < K; g++) {
            FOR_COLS(Q4_SCALE)
            for (const int64_t ke = k + w->gs; k < ke; k += 16) {
                if (!(k & 127)) FOR_COLS_Q4_PF
                FOR_COLS(W_Q4B)
                FOR_ROWS(X_LOAD2)
                FOR_TILE(ACC_FMA2)
            }
        }
    } else if (t == XI_Q4_AWQ) {
        for (int64_t g = 0, k = 0; k < K; g++) {
            FOR_COLS(Q4_SCALE)
            for (const int64_t ke = k + w->gs; k < ke; k += 8) {
                if (!(k & 127)) FOR_COLS_Q4_PF
                FOR_COLS(W_Q4)
                FOR_ROWS(X_LOAD)
                FOR_TILE(ACC_FMA)
            }
        }
    } else {
        const int64_t es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2;
        for (int64_t k = 0; k < K8; k += 8) {
            if (!((k * es) & 63)) FOR_COLS(PF_NEXT)
            FOR_COLS(W_DENSE)
            FOR_ROWS(X_LOAD)
            FOR_TILE(ACC_FMA)
        }
    }
    finish_row(t, C, io, 0, w, a00, a01, a02, a03, a04, a05, a06, a07);
    if (R > 1) finish_row(t, C, io, 1, w, a10, a11, a12, a13, zero, zero, zero, zero);
    if (R > 2) finish_row(t, C, io, 2, w, a20, a21, a22, a23, zero, zero, zero, zero);
    if (R > 3) finish_row(t, C, io, 3, w, a30, a31, a32, a33, zero, zero, zero, zero);
}

/* Widest tile per row count within 16 ymm registers: 1x8, 2x4, 3x3, 4x3; Q4 also keeps a
 * scale and an offset per column: 1x4, then 2 columns. */
#define TILE_COLS(t, R) \
    ((t) == XI_Q4_AWQ ? ((R) == 1 ? 4 : 2) : (R) == 1 ? 8 : (R) == 2 ? 4 : 3)

/* Column n of W as exact f32 values in dst[K] (Q8 without its scale), with the same
 * per-element operations the direct tiles use, so panel and direct paths agree bitwise. */
static void panel_column(float *dst, const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in, K8 = K & ~(int64_t)7;
    const wsrc s = wsrc_at(w, n);
    if (w->dtype == XI_Q4_AWQ) {
        for (int64_t g = 0; g < s.groups; g++) {
            const __m256 sv = _mm256_set1_ps(s.scale[g]);
            const __m256 mv = _mm256_set1_ps(q4_offset(s.zero[g], s.scale[g]));
            if (s.q4b == 16) {
                for (int64_t k = g * s.gs; k < (g + 1) * s.gs; k += 16) {
                    __m256 lo, hi;
                    q4b_dequant16(s.base, k, sv, mv, &lo, &hi);
                    _mm256_storeu_ps(dst + k, lo);
                    _mm256_storeu_ps(dst + k + 8, hi);
                }
                continue;
            }
            for (int64_t k = g * s.gs; k < (g + 1) * s.gs; k += 8)
                _mm256_storeu_ps(dst + k, q4_dequant8(s.base, k, sv, mv));
        }
        return;
    }
    int64_t k = 0;
    for (; k < K8; k += 8) _mm256_storeu_ps(dst + k, avx2_load8(w->dtype, s.base, k));
    for (; k < K; k++) dst[k] = xi_elem_f32(w->dtype, s.base, k);
}

/* Blocked weights (block 8): the 8 columns of one block for one row of x. Accumulator a<j>
 * holds, for each of the 8 columns, lane j of the canonical order (k = 8i + j, i ascending);
 * combining them as ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)) is avx2_hsum4's order per column,
 * and the tail and Q8 scale follow finish_row, so the bits equal the row-major tiles'. The
 * weights are one sequential stream of 8 * es bytes per k. */
XI_INLINE __m256 block8(xi_dtype t, const float *x, const char *blk, int64_t K,
                        const float *scale) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0;
    int64_t k = 0;
#define BLOCK_FMA(j) \
    a##j = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k + j), avx2_load8(t, blk, (k + j) * 8), a##j);
    /* One stream, but a software prefetch this many bytes ahead still gains 5-10% for the
     * narrow types (measured; none helps f32, whose 8 k move 256 bytes). */
    const int64_t es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2, pf = t == XI_Q8 ? 2048 : 1024;
    for (; k + 8 <= K; k += 8) {
        if (t != XI_F32)
            for (int64_t l = 0; l < es; l++) _mm_prefetch(blk + k * 8 * es + l * 64 + pf, _MM_HINT_T0);
        BLOCK_FMA(0) BLOCK_FMA(1) BLOCK_FMA(2) BLOCK_FMA(3)
        BLOCK_FMA(4) BLOCK_FMA(5) BLOCK_FMA(6) BLOCK_FMA(7)
    }
#undef BLOCK_FMA
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    for (; k < K; k++)
        s = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k), avx2_load8(t, blk, k * 8), s);
    if (scale) s = _mm256_mul_ps(s, _mm256_loadu_ps(scale));
    return s;
}

/* Rows [0, rows) x columns [n0, n1) of a blocked weight, block by block: a block (8 n_in
 * elements) stays in L1/L2 while every row reads it. Partial blocks at the range edges are
 * computed whole and only their columns in range stored. */
XI_INLINE void blocked_rows_t(xi_dtype t, float *y, int64_t ldy, const float *x, int64_t ldx,
                              int64_t rows, const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2;
    for (int64_t b = n0 / 8; b * 8 < n1; b++) {
        const char *blk = (const char *)w->data + b * 8 * K * es;
        const float *sc = t == XI_Q8 ? w->scale + b * 8 : NULL;
        const int64_t lo = XI_MAX(n0, b * 8), hi = XI_MIN(n1, b * 8 + 8);
        for (int64_t r = 0; r < rows; r++) {
            const __m256 v = block8(t, x + r * ldx, blk, K, sc);
            if (lo == b * 8 && hi == b * 8 + 8) {
                _mm256_storeu_ps(y + r * ldy + b * 8, v);
            } else {
                float tmp[8];
                _mm256_storeu_ps(tmp, v);
                for (int64_t n = lo; n < hi; n++) y[r * ldy + n] = tmp[n - b * 8];
            }
        }
    }
}

static void blocked_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                         const xi_weight *w, int64_t n0, int64_t n1) {
    switch (w->dtype) {
    case XI_F16: blocked_rows_t(XI_F16, y, ldy, x, ldx, rows, w, n0, n1); break;
    case XI_BF16: blocked_rows_t(XI_BF16, y, ldy, x, ldx, rows, w, n0, n1); break;
    case XI_Q8: blocked_rows_t(XI_Q8, y, ldy, x, ldx, rows, w, n0, n1); break;
    default: blocked_rows_t(XI_F32, y, ldy, x, ldx, rows, w, n0, n1); break;
    }
}
#define HAVE_BLOCKED_ROWS 8

/* The driver's panel_block for block 8: per 8 inputs, the 8 columns' vectors are transposed
 * 8x8 so each column's 8 values go out as one store. Conversions are exact, so the values
 * are those of panel_column. */
static void panel_block(float *panel, const xi_weight *w, int64_t n, int64_t C) {
    const int64_t K = w->n_in, K8 = K & ~(int64_t)7, c0 = n % 8;
    const xi_dtype t = w->dtype;
    const size_t es = t == XI_Q8 ? 1 : xi_dtype_size(t);
    const char *blk = (const char *)w->data + (size_t)((n / 8) * K * 8) * es;
    for (int64_t k = 0; k < K8; k += 8) {
        __m256 r[8], u[8], v[8];
        for (int i = 0; i < 8; i++) r[i] = avx2_load8(t, blk, (k + i) * 8);
        for (int i = 0; i < 8; i += 2) {
            u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 8; i += 4) {
            v[i] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
            v[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
            v[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
            v[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int i = 0; i < 4; i++) {
            r[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);     /* column i */
            r[i + 4] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31); /* column i + 4 */
        }
        for (int64_t c = 0; c < C; c++) _mm256_storeu_ps(panel + c * K + k, r[c0 + c]);
    }
    for (int64_t k = K8; k < K; k++)
        for (int64_t c = 0; c < C; c++)
            panel[c * K + k] = xi_elem_f32(t, blk, k * 8 + c0 + c);
}
#define HAVE_PANEL_BLOCK

#include "kernels/matmul_driver.h"

void xi_avx2_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1) {
    matmul_driver(y, ldy, x, ldx, rows, w, n0, n1);
}
