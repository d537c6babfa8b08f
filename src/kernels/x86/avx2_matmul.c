/* kernels/x86/avx2_matmul: y = x W^T for every weight format with AVX2 + FMA + F16C.
 *
 * Summation order (the determinism contract): y[r, n] keeps one 8-lane f32 accumulator;
 * lane l accumulates x[r, k] * W[n, k] for k = 8i + l, i ascending, one FMA each. Then the
 * lanes are summed as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) (avx2_hsum4's order), then the
 * k % 8 tail is added one scalar FMA at a time, then (Q8) the sum is multiplied by scale[n].
 * For Q4_AWQ, W[n, k] is first dequantized as fma(q, s, -z * s) for k's group. Every path
 * below (GEMV tiles, small-batch tiles, GEMM over an f32 panel, any tile edge) performs
 * exactly these operations per element, so results do not depend on rows, tiles or threads. */
#include <stdlib.h>

#include "kernels/x86/avx2_common.h"

#define GEMM_MIN_ROWS 8   /* above this, weights are converted once into an f32 panel */
#define GEMM_ROW_BLOCK 32 /* rows whose x stays in L2 while a column panel is reused */
#define PANEL_COLS 3

typedef struct {
    float *y;
    int64_t ldy;
    const float *x;
    int64_t ldx;
    int64_t k; /* n_in */
} tile_io;

/* Where a tile's weight columns are: column c's row at base + c * stride bytes. */
typedef struct {
    const char *base;
    size_t stride;
    const float *scale;  /* Q8: [C] multiplied at the end; Q4: [C][groups]; else NULL */
    const uint8_t *zero; /* Q4: [C][groups] */
    int64_t groups, gs;  /* Q4 */
} wsrc;

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

XI_INLINE float q4_offset(uint8_t z, float s) { return -((float)z * s); }

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
#define W_DENSE(c) const __m256 w##c = c < C ? avx2_load8(t, w->base + c * w->stride, k) : zero;
#define W_Q4(c) const __m256 w##c = c < C ? q4_dequant8(w->base + c * w->stride, k, s##c, m##c) : zero;
#define Q4_SCALE(c)                                                                         \
    const __m256 s##c = c < C ? _mm256_set1_ps(w->scale[c * w->groups + g]) : zero;        \
    const __m256 m##c = c < C ? _mm256_set1_ps(q4_offset(w->zero[c * w->groups + g],       \
                                                         w->scale[c * w->groups + g]))      \
                              : zero;

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
            s[c] = avx2_fma1(io->x[r * io->ldx + k], avx2_load1(t, w->base + c * w->stride, k), s[c]);
        if (w->scale && t != XI_Q4_AWQ) s[c] *= w->scale[c];
        io->y[r * io->ldy + c] = s[c];
    }
}

XI_INLINE void tile(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const int64_t K = io->k, K8 = K & ~(int64_t)7;
    const __m256 zero = _mm256_setzero_ps();
    FOR_TILE(ACC_DECL)
    if (t == XI_Q4_AWQ) {
        for (int64_t g = 0, k = 0; k < K; g++) {
            FOR_COLS(Q4_SCALE)
            for (const int64_t ke = k + w->gs; k < ke; k += 8) {
                FOR_COLS(W_Q4)
                FOR_ROWS(X_LOAD)
                FOR_TILE(ACC_FMA)
            }
        }
    } else {
        for (int64_t k = 0; k < K8; k += 8) {
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

XI_INLINE void wsrc_advance(xi_dtype t, wsrc *w, int C) {
    w->base += (size_t)C * w->stride;
    if (t == XI_Q4_AWQ) {
        w->scale += C * w->groups;
        w->zero += C * w->groups;
    } else if (w->scale) {
        w->scale += C;
    }
}

/* Rows [0, R) x nc columns starting at w, in tiles of TILE_COLS and one narrower tile. */
XI_INLINE void tile_cols(xi_dtype t, int R, const tile_io *io0, wsrc w, int64_t nc) {
    const int CM = TILE_COLS(t, R);
    tile_io io = *io0;
    int64_t n = 0;
    for (; n + CM <= nc; n += CM) {
        tile(t, R, CM, &io, &w);
        io.y += CM;
        wsrc_advance(t, &w, CM);
    }
    switch (nc - n) {
    case 1: tile(t, R, 1, &io, &w); break;
    case 2: tile(t, R, 2, &io, &w); break;
    case 3: if (CM > 3) tile(t, R, 3, &io, &w); break;
    case 4: if (CM > 4) tile(t, R, 4, &io, &w); break;
    case 5: if (CM > 5) tile(t, R, 5, &io, &w); break;
    case 6: if (CM > 6) tile(t, R, 6, &io, &w); break;
    case 7: if (CM > 7) tile(t, R, 7, &io, &w); break;
    default: break;
    }
}

typedef void (*cols_fn)(const tile_io *io, wsrc w, int64_t nc);
#define COLS_FN(name, T, R) \
    static void name(const tile_io *io, wsrc w, int64_t nc) { tile_cols(T, R, io, w, nc); }
#define COLS_FNS(sfx, T) \
    COLS_FN(cols_##sfx##1, T, 1) COLS_FN(cols_##sfx##2, T, 2) COLS_FN(cols_##sfx##3, T, 3) \
    COLS_FN(cols_##sfx##4, T, 4)
COLS_FNS(f32_, XI_F32)
COLS_FNS(f16_, XI_F16)
COLS_FNS(bf16_, XI_BF16)
COLS_FNS(q8_, XI_Q8)
COLS_FNS(q4_, XI_Q4_AWQ)

static cols_fn cols_for(xi_dtype t, int R) {
    static const cols_fn fns[5][4] = {
        {cols_f32_1, cols_f32_2, cols_f32_3, cols_f32_4},
        {cols_f16_1, cols_f16_2, cols_f16_3, cols_f16_4},
        {cols_bf16_1, cols_bf16_2, cols_bf16_3, cols_bf16_4},
        {cols_q8_1, cols_q8_2, cols_q8_3, cols_q8_4},
        {cols_q4_1, cols_q4_2, cols_q4_3, cols_q4_4},
    };
    const int i = t == XI_F16 ? 1 : t == XI_BF16 ? 2 : t == XI_Q8 ? 3 : t == XI_Q4_AWQ ? 4 : 0;
    return fns[i][R - 1];
}

/* The weight columns [n, ...) of w as a tile source. */
static wsrc wsrc_at(const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in;
    wsrc s = {0};
    if (w->dtype == XI_Q4_AWQ) {
        s.groups = K / w->group_size;
        s.gs = w->group_size;
        s.stride = (size_t)(K / 2);
        s.scale = w->scale + n * s.groups;
        s.zero = w->zero + n * s.groups;
    } else {
        s.stride = (size_t)K * (w->dtype == XI_Q8 ? 1 : xi_dtype_size(w->dtype));
        s.scale = w->dtype == XI_Q8 ? w->scale + n : NULL;
    }
    s.base = (const char *)w->data + (size_t)n * s.stride;
    return s;
}

/* Column n of W as exact f32 values in dst[K] (Q8 without its scale), with the same
 * per-element operations the direct tiles use, so panel and direct paths agree bitwise. */
static void panel_column(float *dst, const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in, K8 = K & ~(int64_t)7;
    const wsrc s = wsrc_at(w, n);
    if (w->dtype == XI_Q4_AWQ) {
        for (int64_t g = 0; g < s.groups; g++) {
            const __m256 sv = _mm256_set1_ps(s.scale[g]);
            const __m256 mv = _mm256_set1_ps(q4_offset(s.zero[g], s.scale[g]));
            for (int64_t k = g * s.gs; k < (g + 1) * s.gs; k += 8)
                _mm256_storeu_ps(dst + k, q4_dequant8(s.base, k, sv, mv));
        }
        return;
    }
    int64_t k = 0;
    for (; k < K8; k += 8) _mm256_storeu_ps(dst + k, avx2_load8(w->dtype, s.base, k));
    for (; k < K; k++) dst[k] = avx2_load1(w->dtype, s.base, k);
}

/* Many rows: per block of rows (x stays in L2), per PANEL_COLS columns, convert the columns
 * to f32 once and run every 4-row tile of the block over them. Returns -1 when the panel
 * cannot be allocated (the caller then uses the direct tiles, which give the same bits). */
static int gemm_panel(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in;
    float *panel = NULL;
    if (w->dtype != XI_F32) {
        panel = aligned_alloc(64, (size_t)((PANEL_COLS * K * 4 + 63) & ~(int64_t)63));
        if (!panel) return -1;
    }
    for (int64_t rb = 0; rb < rows; rb += GEMM_ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + GEMM_ROW_BLOCK);
        for (int64_t n = n0; n < n1; n += PANEL_COLS) {
            const int64_t C = XI_MIN((int64_t)PANEL_COLS, n1 - n);
            wsrc s = wsrc_at(w, n);
            if (panel) {
                for (int64_t c = 0; c < C; c++) panel_column(panel + c * K, w, n + c);
                s = (wsrc){.base = (const char *)panel, .stride = (size_t)K * 4,
                           .scale = w->dtype == XI_Q8 ? w->scale + n : NULL};
            }
            for (int64_t r = rb; r < re; r += 4) {
                const int R = (int)XI_MIN((int64_t)4, re - r);
                const tile_io io = {y + r * ldy + n, ldy, x + r * ldx, ldx, K};
                cols_for(XI_F32, R)(&io, s, C);
            }
        }
    }
    free(panel);
    return 0;
}

void xi_avx2_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1) {
    if (w->dtype == XI_Q4_AWQ &&
        (w->group_size <= 0 || w->group_size % 8 || w->n_in % w->group_size)) {
        /* Only AWQ group sizes that are multiples of 8 have a vector path. */
        xi_ops_ref()->matmul(y, ldy, x, ldx, rows, w, n0, n1);
        return;
    }
    if (n1 <= n0) return;
    if (rows > GEMM_MIN_ROWS && gemm_panel(y, ldy, x, ldx, rows, w, n0, n1) == 0) return;
    for (int64_t r = 0; r < rows; r += 4) {
        const int R = (int)XI_MIN((int64_t)4, rows - r);
        const tile_io io = {y + r * ldy + n0, ldy, x + r * ldx, ldx, w->n_in};
        cols_for(w->dtype, R)(&io, wsrc_at(w, n0), n1 - n0);
    }
}
