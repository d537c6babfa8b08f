/* kernels/x86/avx2_matmul: y = x W^T for every weight format with AVX2 + FMA + F16C.
 *
 * Summation order (the determinism contract): y[r, n] keeps one 8-lane f32 accumulator;
 * lane l accumulates x[r, k] * W[n, k] for k = 8i + l, i ascending, one FMA each. Then the
 * lanes are summed as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) (avx2_hsum4's order), then the
 * k % 8 tail is added one scalar FMA at a time, then (Q8) the sum is multiplied by scale[n].
 * Q4_AWQ runs that order per group over the codes q (exact) to S_g, and the same order over
 * x alone to X_g (q4_group_sums), then folds each group as y = fma(fma(-z_g, X_g, S_g),
 * scale_g, y) from y = 0, g ascending (tile_q4): the zero point costs one FMA per group
 * instead of one subtraction per weight. Every path
 * below (GEMV tiles, small-batch tiles, GEMM over an f32 panel, any tile edge) performs
 * exactly these operations per element, so results do not depend on rows, tiles or threads.
 * The dense blocked layout (block 8) has an order of its own, described at btile. */
#include "kernels/x86/avx2_common.h"

#define GEMM_MIN_ROWS 8   /* above this, weights are converted once into an f32 panel */
#define GEMM_ROW_BLOCK 32 /* rows whose x stays in L2 while a column panel is reused */
#define PANEL_COLS 3

/* Q4_AWQ: 8 codes in the low bits of each lane of q (the rest zero) as exact f32 values. */
XI_INLINE __m256 q4_f32(__m256i q) { return _mm256_cvtepi32_ps(q); }

/* Row-major Q4_AWQ: the codes of inputs k..k+7 (k % 8 == 0); the little-endian u32 at byte
 * k/2 holds them in nibbles 0..7. */
XI_INLINE __m256 q4_codes8(const char *row, int64_t k) {
    int32_t u;
    memcpy(&u, row + k / 2, 4);
    const __m256i q = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(u), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    return q4_f32(q);
}

/* Q4_AWQ block 16 (kernels.h): the codes of inputs k..k+15 (k % 16 == 0), *lo = k..k+7 and
 * *hi = k+8..k+15: one zero-extending load of 8 bytes, a mask for the low nibbles and a
 * shift for the high ones. */
XI_INLINE void q4b_codes16(const char *row, int64_t k, __m256 *lo, __m256 *hi) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + k / 2)));
    *lo = q4_f32(_mm256_and_si256(v, _mm256_set1_epi32(15)));
    *hi = q4_f32(_mm256_srli_epi32(v, 4));
}

/* X_g of one row of x: per group, lane l sums x[k] for k = 8i + l within the group, i
 * ascending, then the lanes in avx2_hsum's order, as tile_q4 sums q * x. */
static void q4_group_sums(float *out, const float *x, int64_t K, int64_t gs) {
    for (int64_t g = 0; g < K / gs; g++) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t k = g * gs; k < (g + 1) * gs; k += 8) a = _mm256_add_ps(a, _mm256_loadu_ps(x + k));
        out[g] = avx2_hsum(a);
    }
}

/* Tiles keep each accumulator in its own named variable a<r><c> (GCC spills arrays of
 * vectors); the shape guards are compile-time constants after inlining. */
#define FOR_COLS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define FOR_ROWS(OP) OP(0) OP(1) OP(2) OP(3)
#define FOR_COLS4(OP) OP(0) OP(1) OP(2) OP(3)
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
/* Block-16 codes of column c, converted and used at once (one register pair holds them);
 * columns 4..7 exist for one row only. */
#define Q4B_STEP(c)                                                                         \
    if (c < C) {                                                                            \
        __m256 w##c, wh##c;                                                                 \
        q4b_codes16(w->base + c * w->stride, k, &w##c, &wh##c);                             \
        ACC_FMA2(0, c) ACC_FMA2(1, c) ACC_FMA2(2, c) ACC_FMA2(3, c)                         \
    }
#define Q4B_STEP1(c)                                                                        \
    if (c < C) {                                                                            \
        __m256 w##c, wh##c;                                                                 \
        q4b_codes16(w->base + c * w->stride, k, &w##c, &wh##c);                             \
        ACC_FMA2(0, c)                                                                      \
    }
#define W_DENSE(c) const __m256 w##c = c < C ? avx2_load8(t, w->base + c * w->stride, k) : zero;
#define W_Q4(c) const __m256 w##c = c < C ? q4_codes8(w->base + c * w->stride, k) : zero;
#define Q4_S(c) c < C ? w->scale[c * w->groups + g] : 0.0f
#define Q4_Z(c) c < C ? (float)w->zero[c * w->groups + g] : 0.0f
/* Row r of a tile, one x vector and then its FMAs (columns 4..7 exist for row 0 only). */
#define ROW_FMA(r)                                                                          \
    if (r < R) {                                                                            \
        const __m256 x##r = _mm256_loadu_ps(io->x + r * io->ldx + k);                       \
        ACC_FMA(r, 0) ACC_FMA(r, 1) ACC_FMA(r, 2) ACC_FMA(r, 3)                             \
    }
#define ROW_FMA0                                                                            \
    {                                                                                       \
        const __m256 x0 = _mm256_loadu_ps(io->x + k);                                       \
        FOR_ROW0(ACC_FMA)                                                                   \
    }
#define W_PANEL(c) \
    const __m256 w##c = c < C ? _mm256_loadu_ps((const float *)(w->base + c * w->stride) + k) : zero;

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

/* Q4_AWQ, for C <= 8 columns with one row, C <= 4 with more: per group g, each column's
 * lanes accumulate q * x in the canonical lane order over the group only; the group sum S_g
 * (avx2_hsum4's order) is folded as y = fma(fma(-z_g, X_g, S_g), scale_g, y) from y = 0, g
 * ascending, with X_g from io->xg. Zero point and scale cost two FMAs per group. */
XI_INLINE void tile_q4(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const __m256 zero = _mm256_setzero_ps();
    __m128 t0 = _mm_setzero_ps(), t1 = t0, t2 = t0, t3 = t0, u0 = t0;
    const int64_t K = io->k, G = w->groups;
    for (int64_t g = 0, k = 0; k < K; g++) {
        FOR_TILE(ACC_DECL)
        if (t == XI_Q4_PANEL) { /* the codes already in f32 columns */
            /* columns first, then one x vector per row: 12 accumulators + 3 + 1 registers */
            for (const int64_t ke = k + w->gs; k < ke; k += 8) {
                FOR_COLS4(W_PANEL)
                FOR_ROWS(ROW_FMA)
            }
        } else if (w->q4b == 16) {
            for (const int64_t ke = k + w->gs; k < ke; k += 16) {
                if (!(k & 127)) { FOR_COLS_Q4_PF }
                FOR_ROWS(X_LOAD2)
                Q4B_STEP(0) Q4B_STEP(1) Q4B_STEP(2) Q4B_STEP(3)
                Q4B_STEP1(4) Q4B_STEP1(5) Q4B_STEP1(6) Q4B_STEP1(7)
            }
        } else {
            for (const int64_t ke = k + w->gs; k < ke; k += 8) {
                if (!(k & 127)) { FOR_COLS_Q4_PF }
                FOR_COLS(W_Q4)
                FOR_ROWS(X_LOAD)
                FOR_TILE(ACC_FMA)
            }
        }
        const __m128 sv = _mm_setr_ps(Q4_S(0), Q4_S(1), Q4_S(2), Q4_S(3));
        const __m128 zv = _mm_setr_ps(Q4_Z(0), Q4_Z(1), Q4_Z(2), Q4_Z(3));
#define Q4_FOLD(acc, r, S, z, s)                                                            \
    acc = _mm_fmadd_ps(_mm_fnmadd_ps(z, _mm_set1_ps(io->xg[(r) * G + g]), S), s, acc);
        Q4_FOLD(t0, 0, avx2_hsum4(a00, a01, a02, a03), zv, sv)
        if (C > 4) {
            const __m128 sv4 = _mm_setr_ps(Q4_S(4), Q4_S(5), Q4_S(6), Q4_S(7));
            const __m128 zv4 = _mm_setr_ps(Q4_Z(4), Q4_Z(5), Q4_Z(6), Q4_Z(7));
            Q4_FOLD(u0, 0, avx2_hsum4(a04, a05, a06, a07), zv4, sv4)
        }
        if (R > 1) Q4_FOLD(t1, 1, avx2_hsum4(a10, a11, a12, a13), zv, sv)
        if (R > 2) Q4_FOLD(t2, 2, avx2_hsum4(a20, a21, a22, a23), zv, sv)
        if (R > 3) Q4_FOLD(t3, 3, avx2_hsum4(a30, a31, a32, a33), zv, sv)
#undef Q4_FOLD
    }
    const __m128 tr[4] = {t0, t1, t2, t3};
    for (int r = 0; r < R; r++) {
        float s[8];
        _mm_storeu_ps(s, tr[r]);
        _mm_storeu_ps(s + 4, u0);
        for (int c = 0; c < C; c++) io->y[r * io->ldy + c] = s[c];
    }
}

XI_INLINE void tile(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const int64_t K = io->k, K8 = K & ~(int64_t)7;
    if (t == XI_Q4_AWQ || t == XI_Q4_PANEL) {
        tile_q4(t, R, C, io, w);
        return;
    }
    const __m256 zero = _mm256_setzero_ps();
    FOR_TILE(ACC_DECL)
    const int64_t es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2;
    for (int64_t k = 0; k < K8; k += 8) {
        if (!((k * es) & 63)) { FOR_COLS(PF_NEXT) }
        FOR_COLS(W_DENSE)
        ROW_FMA0 ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) /* 4x3 tiles then fit in 16 registers */
    }
    finish_row(t, C, io, 0, w, a00, a01, a02, a03, a04, a05, a06, a07);
    if (R > 1) finish_row(t, C, io, 1, w, a10, a11, a12, a13, zero, zero, zero, zero);
    if (R > 2) finish_row(t, C, io, 2, w, a20, a21, a22, a23, zero, zero, zero, zero);
    if (R > 3) finish_row(t, C, io, 3, w, a30, a31, a32, a33, zero, zero, zero, zero);
}

/* Widest tile per row count within 16 ymm registers: 1x8, 2x4, 3x3, 4x3; Q4 loads two x
 * vectors per row: 1x8, 2x4, then 2 columns; the Q4 panel sums 4 columns per group. */
#define TILE_COLS(t, R)                                                                    \
    ((t) == XI_Q4_AWQ ? ((R) == 1 ? 8 : (R) == 2 ? 4 : 2)                                   \
     : (t) == XI_Q4_PANEL ? ((R) == 4 ? 3 : 4)                                              \
     : (R) == 1 ? 8 : (R) == 2 ? 4 : 3)

/* Column n of W as exact f32 values in dst[K] (Q8 without its scale), with the same
 * per-element operations the direct tiles use, so panel and direct paths agree bitwise. */
static void panel_column(float *dst, const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in, K8 = K & ~(int64_t)7;
    const wsrc s = wsrc_at(w, n);
    if (w->dtype == XI_Q4_AWQ) { /* the codes: the tiles apply zero points and scales */
        for (int64_t k = 0; k < K; k += s.q4b == 16 ? 16 : 8) {
            if (s.q4b == 16) {
                __m256 lo, hi;
                q4b_codes16(s.base, k, &lo, &hi);
                _mm256_storeu_ps(dst + k, lo);
                _mm256_storeu_ps(dst + k + 8, hi);
            } else {
                _mm256_storeu_ps(dst + k, q4_codes8(s.base, k));
            }
        }
        return;
    }
    int64_t k = 0;
    for (; k < K8; k += 8) _mm256_storeu_ps(dst + k, avx2_load8(w->dtype, s.base, k));
    for (; k < K; k++) dst[k] = xi_elem_f32(w->dtype, s.base, k);
}

/* Blocked weights (block 8, kernels.h) have their own summation order: lane c of a block's
 * vector is column c, and y[r, n] is one FMA chain over k ascending from 0, then (Q8) times
 * scale[n]. Every row count and tile shape below performs exactly that, so a row's bits do
 * not depend on the batch or the thread split; they differ from the row-major layout's order
 * by fp32 rounding only. A tile is R rows x NB blocks: each k converts NB weight vectors once
 * for all R rows and broadcasts R inputs once for all NB blocks, with no transposes. */
#define FOR_B(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define FOR_RB(OP)                                                                          \
    FOR_B(OP##0) FOR_B(OP##1) FOR_B(OP##2) FOR_B(OP##3)
#define BACC0(b) __m256 a0##b = _mm256_setzero_ps();
#define BACC1(b) __m256 a1##b = _mm256_setzero_ps();
#define BACC2(b) __m256 a2##b = _mm256_setzero_ps();
#define BACC3(b) __m256 a3##b = _mm256_setzero_ps();
#define BW(b) const __m256 w##b = b < NB ? avx2_load8(t, blk + b * bstride, k * 8) : zero;
#define BPF(b) if (b < NB) _mm_prefetch(blk + b * bstride + k * 8 * es + 512, _MM_HINT_T0);
#define BPF_ON(t) ((t) == XI_F32 || (t) == XI_BF16)
#define BX(r) const __m256 x##r = r < R ? _mm256_broadcast_ss(x + r * ldx + k) : zero;
#define BFMA_R(r, b) if (r < R && b < NB) a##r##b = _mm256_fmadd_ps(x##r, w##b, a##r##b);
#define BX1(r) const __m256 x##r = r < R ? _mm256_broadcast_ss(x + r * ldx + k + 1) : zero;

/* BF16 input pairs (kernels.h): 32 bytes hold inputs k and k + 1 of 8 columns; input k is
 * each u32's low half moved up, input k + 1 its high half with the low half cleared. */
XI_INLINE __m256 bf16_pair_k0(__m256i d) { return _mm256_castsi256_ps(_mm256_slli_epi32(d, 16)); }
XI_INLINE __m256 bf16_pair_k1(__m256i d) {
    return _mm256_castsi256_ps(_mm256_and_si256(d, _mm256_set1_epi32((int)0xFFFF0000u)));
}
/* bf16_pair_k1 without the mask constant, for the 3- and 4-row tiles, which have no register
 * to spare for it (with the mask, GCC spills accumulators: 3 rows 0.62 of the FMA peak with
 * it, 0.73 with the shifts; 2 rows keep the mask, 0.73 vs 0.61). */
XI_INLINE __m256 bf16_pair_k1_shift(__m256i d) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(d, 16), 16));
}
#define BPAIR(b) _mm256_loadu_si256((const __m256i *)(blk + b * bstride + k * 16))
#define BSTEP_K0(b)                                                                         \
    if (b < NB) {                                                                           \
        const __m256 w##b = bf16_pair_k0(BPAIR(b));                                         \
        BFMA_R(0, b) BFMA_R(1, b) BFMA_R(2, b) BFMA_R(3, b)                                 \
    }
#define BSTEP_K1(b)                                                                         \
    if (b < NB) {                                                                           \
        const __m256 w##b = R < 3 ? bf16_pair_k1(BPAIR(b)) : bf16_pair_k1_shift(BPAIR(b));    \
        BFMA_R(0, b) BFMA_R(1, b) BFMA_R(2, b) BFMA_R(3, b)                                 \
    }
#define BSTEP(b)                                                                            \
    if (b < NB) {                                                                           \
        BW(b)                                                                               \
        BFMA_R(0, b) BFMA_R(1, b) BFMA_R(2, b) BFMA_R(3, b)                                 \
    }
#define BST_R(r, b) if (r < R && b < NB) bstore(y + r * ldy + b * 8, a##r##b, sc, b, lo, hi);
#define BST0(b) BST_R(0, b)
#define BST1(b) BST_R(1, b)
#define BST2(b) BST_R(2, b)
#define BST3(b) BST_R(3, b)

/* The 4-row tiles: weights of up to 3 blocks, then row r's broadcast and its FMAs. */
#define FOR_W3(OP) OP(0) OP(1) OP(2)
#define BW_K0(b) const __m256 w##b = b < NB ? bf16_pair_k0(BPAIR(b)) : zero;
#define BW_K1(b) const __m256 v##b = b < NB ? bf16_pair_k1_shift(BPAIR(b)) : zero;
#define BROW4(r)                                                                            \
    {                                                                                       \
        const __m256 xb = _mm256_broadcast_ss(x + r * ldx + k);                             \
        BFMA_B(r, 0, xb, w0) BFMA_B(r, 1, xb, w1) BFMA_B(r, 2, xb, w2)                      \
    }
#define BROW4_1(r)                                                                          \
    {                                                                                       \
        const __m256 xb = _mm256_broadcast_ss(x + r * ldx + k + 1);                         \
        BFMA_B(r, 0, xb, v0) BFMA_B(r, 1, xb, v1) BFMA_B(r, 2, xb, v2)                      \
    }
#define BFMA_B(r, b, xv, wv) if (b < NB) a##r##b = _mm256_fmadd_ps(xv, wv, a##r##b);

/* R rows x NB blocks starting at block pointer blk; y points at the first block's column 0
 * of row 0; columns outside [lo, hi) of the tile are computed and not stored. */
XI_INLINE void btile(xi_dtype t, int R, int NB, float *y, int64_t ldy, const float *x,
                     int64_t ldx, const char *blk, size_t bstride, int64_t K, const float *sc,
                     int64_t lo, int64_t hi) {
    const __m256 zero = _mm256_setzero_ps();
    const int64_t es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2;
    FOR_B(BACC0) FOR_B(BACC1) FOR_B(BACC2) FOR_B(BACC3)
    int64_t k = 0;
    if (R == 4) {
        /* 12 accumulators leave 4 registers: the NB <= 3 weight vectors of an input first,
         * then one broadcast per row (x first would need 17 and spill an accumulator). Same
         * FMAs per accumulator, in the same order. */
        if (t == XI_BF16)
            for (; k + 2 <= K; k += 2) {
                FOR_W3(BW_K0) FOR_ROWS(BROW4)
                FOR_W3(BW_K1) FOR_ROWS(BROW4_1)
            }
        for (; k < K; k++) {
            FOR_W3(BW) FOR_ROWS(BROW4)
        }
    } else {
        if (t == XI_BF16) { /* input pairs (kernels.h): the same FMAs, in the same order */
            for (; k + 2 <= K; k += 2) {
                if (R == 1 && !((k * 16) & 63) && (size_t)(k * 16) + 512 < bstride) {
                    FOR_B(BPF)
                }
                {
                    BX(0) BX(1) BX(2) BX(3)
                    FOR_B(BSTEP_K0)
                }
                {
                    BX1(0) BX1(1) BX1(2) BX1(3)
                    FOR_B(BSTEP_K1)
                }
            }
        }
        for (; k < K; k++) {
            /* a few lines ahead on each block's stream, once per 64 bytes, for the formats
             * that keep up with memory; F16 and INT8 GEMVs are bound by their conversions,
             * and the prefetches cost them issue slots (bench_kernels --gemv, 1 thread,
             * n_in 896, 5 alternating runs: f16 10.3-10.6 GB/s with vs 11.1-11.5 without,
             * int8 5.8-5.9 vs 6.0-6.2; bf16 15.3-17.2 with vs 14.0-16.2 without) */
            if (BPF_ON(t) && R == 1 && !((k * 8 * es) & 63) && (size_t)(k * 8 * es) + 512 < bstride) {
                FOR_B(BPF)
            }
            BX(0) BX(1) BX(2) BX(3)
            /* each block's vector is converted and used at once, so one register holds it */
            FOR_B(BSTEP)
        }
    }
    FOR_B(BST0) FOR_B(BST1) FOR_B(BST2) FOR_B(BST3)
}

/* Blocks per tile for R rows within 16 ymm registers. */
#define BTILE_NB(R) ((R) == 1 ? 8 : (R) == 2 ? 6 : (R) == 3 ? 4 : 3)

/* Above these row counts the f32 panel wins (bench_kernels, 4864x896, Zen 1, 1 thread):
 * INT8 from 8 rows; F16 0.64 direct vs 0.59 panel of the FMA peak at 8 rows, 0.65 vs 0.76 at
 * 16; BF16's shift-and-mask conversion is cheap enough that 16 rows run as fast without. */
#define BLOCKED_PANEL_ROWS(t) ((t) == XI_Q8 ? 4 : (t) == XI_F16 ? 8 : 16)

/* Blocks [b, b + NB) of a blocked F16 / BF16 / Q8 weight as f32 (Q8 unscaled), same layout:
 * the conversions are exact, so tiles over it give the bits of tiles over the weight. */
static void blocks_to_f32(float *dst, const xi_weight *w, int64_t b, int NB) {
    const int64_t n = 8 * w->n_in * NB;
    const size_t es = w->dtype == XI_Q8 ? 1 : 2;
    const char *src = (const char *)w->data + (size_t)(b * 8 * w->n_in) * es;
    if (w->dtype == XI_BF16) { /* per block: input pairs, then an odd last input */
        const int64_t K = w->n_in, K2 = K & ~(int64_t)1;
        for (int64_t i0 = 0; i0 < n; i0 += 8 * K) {
            for (int64_t k = 0; k < K2; k += 2) {
                const __m256i d = _mm256_loadu_si256((const __m256i *)(src + (i0 + k * 8) * 2));
                _mm256_storeu_ps(dst + i0 + k * 8, bf16_pair_k0(d));
                _mm256_storeu_ps(dst + i0 + k * 8 + 8, bf16_pair_k1(d));
            }
            if (K2 < K) _mm256_storeu_ps(dst + i0 + K2 * 8, avx2_load8(w->dtype, src, i0 + K2 * 8));
        }
        return;
    }
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(dst + i, avx2_load8(w->dtype, src, i));
}


#include "kernels/matmul_driver.h"

void xi_avx2_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1) {
    matmul_driver(y, ldy, x, ldx, rows, w, n0, n1);
}
