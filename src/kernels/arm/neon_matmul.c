/* kernels/arm/neon_matmul: y = x W^T for every weight format with NEON (fp32 FMA; f16
 * weights through vcvt). The int8 dot-product instructions would need int8 activations,
 * which the W8A16/W4A16 contract rules out, so they are not used here.
 *
 * Summation order (the determinism contract): y[r, n] keeps one 4-lane f32 accumulator;
 * lane l accumulates x[r, k] * W[n, k] for k = 4i + l, i ascending, one FMA each. Then the
 * lanes are summed as (l0+l1)+(l2+l3), then the k % 4 tail is added one scalar FMA at a
 * time, then (Q8) the sum is multiplied by scale[n]. Q4_AWQ runs that order per group over
 * the codes q (exact) to S_g, and the same order over x alone to X_g (q4_group_sums), then
 * folds each group as y = fma(S_g - z_g * X_g, scale_g, y) from y = 0, g ascending
 * (tile_q4). Every path (GEMV tiles, small-batch tiles, GEMM over an f32 panel, any tile
 * edge) performs exactly these operations. The dense blocked layout (block 8) has an order
 * of its own, described at btile. */
#include "kernels/arm/neon_common.h"

#define GEMM_MIN_ROWS 8
#define GEMM_ROW_BLOCK 32
#define PANEL_COLS 4

/* Q4_AWQ row-major: the codes q of inputs k..k+7 (k % 8 == 0) as exact f32 values, *lo =
 * k..k+3 and *hi = k+4..k+7; the little-endian u32 at byte k/2 holds them in nibbles 0..7. */
XI_INLINE void q4_codes8(const char *row, int64_t k, float32x4_t *lo, float32x4_t *hi) {
    uint32_t u;
    memcpy(&u, row + k / 2, 4);
    const uint32x4_t v = vdupq_n_u32(u), mask = vdupq_n_u32(15);
    const int32x4_t sh_lo = {0, -4, -8, -12}, sh_hi = {-16, -20, -24, -28};
    *lo = vcvtq_f32_u32(vandq_u32(vshlq_u32(v, sh_lo), mask));
    *hi = vcvtq_f32_u32(vandq_u32(vshlq_u32(v, sh_hi), mask));
}

/* Q4_AWQ block 16 (kernels.h): the codes of inputs k..k+15 (k % 16 == 0) as four f32
 * vectors from one 8-byte load: the bytes widen once to 16-bit lanes, a mask and a shift
 * split the nibbles there, and the codes go through f16 (exact for 0..15), one conversion
 * per 8 codes plus two lengthenings. */
XI_INLINE void q4b_codes16(const char *row, int64_t k, float32x4_t *w0, float32x4_t *w1,
                           float32x4_t *w2, float32x4_t *w3) {
    const uint16x8_t b = vmovl_u8(vld1_u8((const uint8_t *)row + k / 2));
    const float16x8_t lo = vcvtq_f16_u16(vandq_u16(b, vdupq_n_u16(15)));
    const float16x8_t hi = vcvtq_f16_u16(vshrq_n_u16(b, 4));
    *w0 = vcvt_f32_f16(vget_low_f16(lo));
    *w1 = vcvt_high_f32_f16(lo);
    *w2 = vcvt_f32_f16(vget_low_f16(hi));
    *w3 = vcvt_high_f32_f16(hi);
}

/* X_g of one row of x: per group, lane l sums x[k] for k = 4i + l within the group, i
 * ascending, then the lanes in neon_hsum's order, as tile_q4 sums q * x. */
static void q4_group_sums(float *out, const float *x, int64_t K, int64_t gs) {
    for (int64_t g = 0; g < K / gs; g++) {
        float32x4_t a = vdupq_n_f32(0.0f);
        for (int64_t k = g * gs; k < (g + 1) * gs; k += 4) a = vaddq_f32(a, vld1q_f32(x + k));
        out[g] = neon_hsum(a);
    }
}

#define FOR_COLS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define FOR_ROWS(OP) OP(0) OP(1) OP(2) OP(3)
#define FOR_ROW0(OP) OP(0, 0) OP(0, 1) OP(0, 2) OP(0, 3) OP(0, 4) OP(0, 5) OP(0, 6) OP(0, 7)
#define FOR_TILE(OP)                                                                        \
    FOR_ROW0(OP) OP(1, 0) OP(1, 1) OP(1, 2) OP(1, 3) OP(2, 0) OP(2, 1) OP(2, 2) OP(2, 3)    \
        OP(3, 0) OP(3, 1) OP(3, 2) OP(3, 3)
#define ACC_DECL(r, c) float32x4_t a##r##c = zero;
#define X_LOAD(r) const float32x4_t x##r = r < R ? vld1q_f32(io->x + r * io->ldx + k) : zero;
#define X_LOAD2(r)                                                                          \
    const float32x4_t x##r = r < R ? vld1q_f32(io->x + r * io->ldx + k) : zero;             \
    const float32x4_t xh##r = r < R ? vld1q_f32(io->x + r * io->ldx + k + 4) : zero;
#define ACC_FMA(r, c) if (r < R && c < C) a##r##c = vfmaq_f32(a##r##c, x##r, w##c);
#define ACC_FMA2(r, c)                                                                      \
    if (r < R && c < C) {                                                                   \
        a##r##c = vfmaq_f32(a##r##c, x##r, w##c);                                           \
        a##r##c = vfmaq_f32(a##r##c, xh##r, wh##c);                                         \
    }
#define W_DENSE(c) const float32x4_t w##c = c < C ? neon_load4(t, w->base + c * w->stride, k) : zero;
#define W_Q4(c)                                                                             \
    float32x4_t w##c = zero, wh##c = zero;                                                  \
    if (c < C) q4_codes8(w->base + c * w->stride, k, &w##c, &wh##c);
#define X_LOAD4(r)                                                                          \
    const float32x4_t x##r = r < R ? vld1q_f32(io->x + r * io->ldx + k) : zero;             \
    const float32x4_t xh##r = r < R ? vld1q_f32(io->x + r * io->ldx + k + 4) : zero;        \
    const float32x4_t xi##r = r < R ? vld1q_f32(io->x + r * io->ldx + k + 8) : zero;        \
    const float32x4_t xj##r = r < R ? vld1q_f32(io->x + r * io->ldx + k + 12) : zero;
#define ACC_FMA4(r, c)                                                                      \
    if (r < R) {                                                                            \
        a##r##c = vfmaq_f32(a##r##c, x##r, w0);                                             \
        a##r##c = vfmaq_f32(a##r##c, xh##r, w1);                                            \
        a##r##c = vfmaq_f32(a##r##c, xi##r, w2);                                            \
        a##r##c = vfmaq_f32(a##r##c, xj##r, w3);                                            \
    }
/* Block-16 codes of column c, converted and used at once. */
#define Q4B_STEP(c)                                                                         \
    if (c < C) {                                                                            \
        float32x4_t w0, w1, w2, w3;                                                         \
        q4b_codes16(w->base + c * w->stride, k, &w0, &w1, &w2, &w3);                        \
        ACC_FMA4(0, c) ACC_FMA4(1, c) ACC_FMA4(2, c) ACC_FMA4(3, c)                         \
    }
/* Columns 4..7 exist for one row only. */
#define Q4B_STEP1(c)                                                                        \
    if (c < C) {                                                                            \
        float32x4_t w0, w1, w2, w3;                                                         \
        q4b_codes16(w->base + c * w->stride, k, &w0, &w1, &w2, &w3);                        \
        ACC_FMA4(0, c)                                                                      \
    }
#define Q4_S(c) (c < C ? w->scale[c * w->groups + g] : 0.0f)
#define Q4_Z(c) (c < C ? (float)w->zero[c * w->groups + g] : 0.0f)
#define W_PANEL(c) \
    const float32x4_t w##c = c < C ? vld1q_f32((const float *)(w->base + c * w->stride) + k) : zero;

/* Each tile prefetches the next tile's rows at its own offset (short rows end a tile before
 * the hardware prefetchers ramp up on the new streams). */
#define PF_NEXT(c) if (c < C && io->pf) __builtin_prefetch(w->base + (C + c) * w->stride + k * es);
#define PF_NEXT_Q4(c) if (c < C && io->pf) __builtin_prefetch(w->base + (C + c) * w->stride + k / 2);

XI_INLINE void finish_row(xi_dtype t, int C, const tile_io *io, int r, const wsrc *w,
                          float32x4_t v0, float32x4_t v1, float32x4_t v2, float32x4_t v3,
                          float32x4_t v4, float32x4_t v5, float32x4_t v6, float32x4_t v7) {
    const int64_t K = io->k, K4 = K & ~(int64_t)3;
    float s[8];
    vst1q_f32(s, neon_hsum4(v0, v1, v2, v3));
    if (C > 4) vst1q_f32(s + 4, neon_hsum4(v4, v5, v6, v7));
    for (int c = 0; c < C; c++) {
        for (int64_t k = K4; k < K; k++)
            s[c] = fmaf(io->x[r * io->ldx + k], xi_elem_f32(t, w->base + c * w->stride, k), s[c]);
        if (w->scale && t != XI_Q4_AWQ) s[c] *= w->scale[c];
        io->y[r * io->ldy + c] = s[c];
    }
}

/* Q4_AWQ, for C <= 8 columns with one row, C <= 4 with more: per group g, each column's
 * lanes accumulate q * x in the canonical lane order over the group only; the group sum S_g
 * (neon_hsum4's order) is folded as y = fma(S_g - z_g * X_g, scale_g, y) (fused, one
 * rounding each) from y = 0, g ascending, with X_g from io->xg: the zero point costs one
 * FMA per group instead of one subtraction per weight. */
XI_INLINE void tile_q4(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    float32x4_t t0 = zero, t1 = zero, t2 = zero, t3 = zero, u0 = zero;
    const int64_t K = io->k, G = w->groups;
    for (int64_t g = 0, k = 0; k < K; g++) {
        FOR_TILE(ACC_DECL)
        if (t == XI_Q4_PANEL) { /* the codes already in f32 columns */
            for (const int64_t ke = k + w->gs; k < ke; k += 4) {
                FOR_COLS(W_PANEL)
                FOR_ROWS(X_LOAD)
                FOR_TILE(ACC_FMA)
            }
        } else if (w->q4b == 16) {
            for (const int64_t ke = k + w->gs; k < ke; k += 16) {
                if (!(k & 127)) { FOR_COLS(PF_NEXT_Q4) }
                FOR_ROWS(X_LOAD4)
                Q4B_STEP(0) Q4B_STEP(1) Q4B_STEP(2) Q4B_STEP(3)
                Q4B_STEP1(4) Q4B_STEP1(5) Q4B_STEP1(6) Q4B_STEP1(7)
            }
        } else {
            for (const int64_t ke = k + w->gs; k < ke; k += 8) {
                if (!(k & 127)) { FOR_COLS(PF_NEXT_Q4) }
                FOR_COLS(W_Q4)
                FOR_ROWS(X_LOAD2)
                FOR_TILE(ACC_FMA2)
            }
        }
        const float sa[4] = {Q4_S(0), Q4_S(1), Q4_S(2), Q4_S(3)};
        const float za[4] = {Q4_Z(0), Q4_Z(1), Q4_Z(2), Q4_Z(3)};
        const float32x4_t sv = vld1q_f32(sa), zv = vld1q_f32(za);
#define Q4_FOLD(acc, r, S, z, s) \
    acc = vfmaq_f32(acc, vfmsq_f32(S, z, vdupq_n_f32(io->xg[(r) * G + g])), s);
        Q4_FOLD(t0, 0, neon_hsum4(a00, a01, a02, a03), zv, sv)
        if (C > 4) {
            const float sa4[4] = {Q4_S(4), Q4_S(5), Q4_S(6), Q4_S(7)};
            const float za4[4] = {Q4_Z(4), Q4_Z(5), Q4_Z(6), Q4_Z(7)};
            Q4_FOLD(u0, 0, neon_hsum4(a04, a05, a06, a07), vld1q_f32(za4), vld1q_f32(sa4))
        }
        if (R > 1) Q4_FOLD(t1, 1, neon_hsum4(a10, a11, a12, a13), zv, sv)
        if (R > 2) Q4_FOLD(t2, 2, neon_hsum4(a20, a21, a22, a23), zv, sv)
        if (R > 3) Q4_FOLD(t3, 3, neon_hsum4(a30, a31, a32, a33), zv, sv)
#undef Q4_FOLD
    }
    const float32x4_t tr[4] = {t0, t1, t2, t3};
    for (int r = 0; r < R; r++) {
        float s[8];
        vst1q_f32(s, tr[r]);
        vst1q_f32(s + 4, u0);
        for (int c = 0; c < C; c++) io->y[r * io->ldy + c] = s[c];
    }
}

XI_INLINE void tile(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const int64_t K = io->k, K4 = K & ~(int64_t)3;
    if (t == XI_Q4_AWQ || t == XI_Q4_PANEL) {
        tile_q4(t, R, C, io, w);
        return;
    }
    const float32x4_t zero = vdupq_n_f32(0.0f);
    FOR_TILE(ACC_DECL)
    const int64_t es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2;
    for (int64_t k = 0; k < K4; k += 4) {
        if (!((k * es) & 63)) { FOR_COLS(PF_NEXT) }
        FOR_COLS(W_DENSE)
        FOR_ROWS(X_LOAD)
        FOR_TILE(ACC_FMA)
    }
    finish_row(t, C, io, 0, w, a00, a01, a02, a03, a04, a05, a06, a07);
    if (R > 1) finish_row(t, C, io, 1, w, a10, a11, a12, a13, zero, zero, zero, zero);
    if (R > 2) finish_row(t, C, io, 2, w, a20, a21, a22, a23, zero, zero, zero, zero);
    if (R > 3) finish_row(t, C, io, 3, w, a30, a31, a32, a33, zero, zero, zero, zero);
}

/* Widest tile per row count within 32 q registers: dense 1x8, then 4 columns; Q4 keeps
 * four x vectors per row: 1x8, 2x4, then 2 columns; the Q4 panel sums 4 columns per group. */
#define TILE_COLS(t, R)                                                                    \
    ((t) == XI_Q4_AWQ     ? ((R) == 1 ? 8 : (R) == 2 ? 4 : 2)                               \
     : (t) == XI_Q4_PANEL ? 4                                                               \
     : (R) == 1           ? 8                                                               \
                          : 4)

/* Column n of W as exact f32 values (Q8 without its scale), computed exactly as the direct
 * tiles compute them, so panel and direct paths agree bitwise. */
static void panel_column(float *dst, const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in, K4 = K & ~(int64_t)3;
    const wsrc s = wsrc_at(w, n);
    if (w->dtype == XI_Q4_AWQ) { /* the codes: the tiles apply zero points and scales */
        for (int64_t k = 0; k < K; k += s.q4b == 16 ? 16 : 8) {
            float32x4_t w0, w1, w2, w3;
            if (s.q4b == 16) {
                q4b_codes16(s.base, k, &w0, &w1, &w2, &w3);
                vst1q_f32(dst + k + 8, w2);
                vst1q_f32(dst + k + 12, w3);
            } else {
                q4_codes8(s.base, k, &w0, &w1);
            }
            vst1q_f32(dst + k, w0);
            vst1q_f32(dst + k + 4, w1);
        }
        return;
    }
    int64_t k = 0;
    for (; k < K4; k += 4) vst1q_f32(dst + k, neon_load4(w->dtype, s.base, k));
    for (; k < K; k++) dst[k] = xi_elem_f32(w->dtype, s.base, k);
}

/* Blocked weights (block 8, kernels.h): a block's 8 columns at input k are two vectors,
 * columns 0..3 and 4..7, lane = column. y[r, n] is one FMA chain over k ascending from 0,
 * then (Q8) times scale[n]; the tiles take four inputs of x per row in one vector and
 * multiply by its lanes, which rounds exactly like a broadcast, so every row count, tile
 * and thread split gives the same bits. A tile is R rows x NB blocks: each input converts
 * the NB blocks' weights once for all R rows. */

/* Input k of a block in the plain blocked layout (F32 / F16 / Q8, and BF16's odd last
 * input) as two f32 vectors. Q8 goes through f16 (int8 is exact in f16): one widening,
 * one conversion and two lengthenings per 8 weights instead of two conversions and four
 * widenings. */
XI_INLINE void bload(xi_dtype t, const char *p, float32x4_t *lo, float32x4_t *hi) {
    switch (t) {
    case XI_F16: {
        const float16x8_t h = vld1q_f16((const float16_t *)p);
        *lo = vcvt_f32_f16(vget_low_f16(h));
        *hi = vcvt_high_f32_f16(h);
        return;
    }
    case XI_BF16: {
        const uint16x8_t u = vld1q_u16((const uint16_t *)p);
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(u), 16));
        *hi = vreinterpretq_f32_u32(vshll_high_n_u16(u, 16));
        return;
    }
    case XI_Q8: {
        const float16x8_t h = vcvtq_f16_s16(vmovl_s8(vld1_s8((const int8_t *)p)));
        *lo = vcvt_f32_f16(vget_low_f16(h));
        *hi = vcvt_high_f32_f16(h);
        return;
    }
    default:
        *lo = vld1q_f32((const float *)p);
        *hi = vld1q_f32((const float *)p + 4);
        return;
    }
}

/* BF16 input pairs (kernels.h): 32 bytes hold inputs k and k + 1 of 8 columns, one u32 per
 * column; input k is its low half moved up, input k + 1 its high half with the low cleared. */
XI_INLINE void bpair(const char *p, int second, float32x4_t *lo, float32x4_t *hi) {
    const uint32x4_t a = vld1q_u32((const uint32_t *)p), b = vld1q_u32((const uint32_t *)p + 4);
    if (second) {
        const uint32x4_t m = vdupq_n_u32(0xFFFF0000u);
        *lo = vreinterpretq_f32_u32(vandq_u32(a, m));
        *hi = vreinterpretq_f32_u32(vandq_u32(b, m));
    } else {
        *lo = vreinterpretq_f32_u32(vshlq_n_u32(a, 16));
        *hi = vreinterpretq_f32_u32(vshlq_n_u32(b, 16));
    }
}

#define FOR_B(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7)
#define BACC(r, b) float32x4_t a##r##b##l = zero, a##r##b##h = zero;
#define BACC0(b) BACC(0, b)
#define BACC1(b) BACC(1, b)
#define BACC2(b) BACC(2, b)
#define BACC3(b) BACC(3, b)
/* x of row r: four inputs from k (lane FMAs) or one input broadcast (tails). */
#define BX4(r) const float32x4_t x##r = r < R ? vld1q_f32(x + r * ldx + k) : zero;
#define BX1(r) const float32x4_t x##r = r < R ? vdupq_n_f32(x[r * ldx + k]) : zero;
#define BFMA_L(r, b, j)                                                                     \
    if (r < R && b < NB) {                                                                  \
        a##r##b##l = vfmaq_laneq_f32(a##r##b##l, wl##b, x##r, j);                           \
        a##r##b##h = vfmaq_laneq_f32(a##r##b##h, wh##b, x##r, j);                           \
    }
#define BFMA_V(r, b)                                                                        \
    if (r < R && b < NB) {                                                                  \
        a##r##b##l = vfmaq_f32(a##r##b##l, wl##b, x##r);                                    \
        a##r##b##h = vfmaq_f32(a##r##b##h, wh##b, x##r);                                    \
    }
/* Input k + j of block b, converted and used at once so one register pair holds it. */
#define BSTEP(b, j)                                                                         \
    if (b < NB) {                                                                           \
        float32x4_t wl##b, wh##b;                                                           \
        if (t == XI_BF16)                                                                   \
            bpair(blk + b * bstride + (size_t)((k + (j & ~1)) * 16), j & 1, &wl##b, &wh##b); \
        else                                                                                \
            bload(t, blk + b * bstride + (size_t)((k + j) * 8) * es, &wl##b, &wh##b);        \
        BFMA_L(0, b, j) BFMA_L(1, b, j) BFMA_L(2, b, j) BFMA_L(3, b, j)                     \
    }
#define BSTEP0(b) BSTEP(b, 0)
#define BSTEP1(b) BSTEP(b, 1)
#define BSTEP2(b) BSTEP(b, 2)
#define BSTEP3(b) BSTEP(b, 3)
/* One input in a tail: BF16 as the first or second half of its pair, or unpaired. */
#define BTAIL(b)                                                                            \
    if (b < NB) {                                                                           \
        float32x4_t wl##b, wh##b;                                                           \
        if (t == XI_BF16 && k < K2)                                                         \
            bpair(blk + b * bstride + (size_t)((k & ~(int64_t)1) * 16), (int)(k & 1), &wl##b, \
                  &wh##b);                                                                  \
        else                                                                                \
            bload(t, blk + b * bstride + (size_t)(k * 8) * es, &wl##b, &wh##b);              \
        BFMA_V(0, b) BFMA_V(1, b) BFMA_V(2, b) BFMA_V(3, b)                                 \
    }
#define BPF(b) if (b < NB) __builtin_prefetch(blk + b * bstride + pf);
#define BST(r, b) if (r < R && b < NB) bstore(y + r * ldy + b * 8, a##r##b##l, a##r##b##h, sc, b, lo, hi);
#define BST0(b) BST(0, b)
#define BST1(b) BST(1, b)
#define BST2(b) BST(2, b)
#define BST3(b) BST(3, b)

/* R rows x NB blocks starting at block pointer blk; y points at the first block's column 0
 * of row 0; columns outside [lo, hi) of the tile are computed and not stored. */
XI_INLINE void btile(xi_dtype t, int R, int NB, float *y, int64_t ldy, const float *x,
                     int64_t ldx, const char *blk, size_t bstride, int64_t K, const float *sc,
                     int64_t lo, int64_t hi) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    const int64_t es = t == XI_F32 ? 4 : t == XI_Q8 ? 1 : 2;
    const int64_t K2 = t == XI_BF16 ? K & ~(int64_t)1 : K; /* BF16: inputs in pairs */
    FOR_B(BACC0) FOR_B(BACC1) FOR_B(BACC2) FOR_B(BACC3)
    int64_t k = 0;
    for (; k + 4 <= K2; k += 4) {
        /* a few lines ahead on each block's stream, once per 64 bytes */
        if (R == 1 && !((k * 8 * es) & 63) && (size_t)(k * 8 * es) + 640 < bstride) {
            size_t pf = (size_t)(k * 8 * es) + 512;
            FOR_B(BPF)
            if (es == 4) { /* an f32 step reads two lines */
                pf += 64;
                FOR_B(BPF)
            }
        }
        BX4(0) BX4(1) BX4(2) BX4(3)
        FOR_B(BSTEP0) FOR_B(BSTEP1) FOR_B(BSTEP2) FOR_B(BSTEP3)
    }
    for (; k < K; k++) {
        BX1(0) BX1(1) BX1(2) BX1(3)
        FOR_B(BTAIL)
    }
    FOR_B(BST0) FOR_B(BST1) FOR_B(BST2) FOR_B(BST3)
}

/* Blocks per tile for R rows: at most 16 accumulators (2 * R * NB), which leaves the other
 * q registers to the converted weights and x. Wider tiles (up to 1x8, 2x6, 4x3) fit their
 * accumulators but spill while converting: on a cortex-a76 under qemu they executed 8-25%
 * more instructions per multiply-add for F16, BF16 and INT8 (F32 GEMV 2% fewer). */
#define BTILE_NB(R) ((R) == 1 ? 4 : (R) == 2 ? 3 : 2)

/* Above these row counts the f32 panel executes fewer instructions per multiply-add
 * (bench/arm64_insns.sh, 192x896): INT8 0.476 direct vs 0.500 panel at 8 rows, 0.476 vs 0.421
 * at 16; F16 0.378 vs 0.397 at 16 rows, 0.378 vs 0.370 at 32. */
#define BLOCKED_PANEL_ROWS(t) ((t) == XI_Q8 ? 8 : 16)

/* Blocks [b, b + NB) of a blocked F16 / BF16 / Q8 weight as f32 (Q8 unscaled) in the plain
 * blocked layout: the conversions are exact, so tiles over it give the bits of tiles over
 * the weight. */
/* n elements of the plain blocked layout as f32; t is a constant at each call, so the
 * conversion inlines without a switch per input. */
XI_INLINE void plain_to_f32(float *dst, const char *src, int64_t n, xi_dtype t) {
    const size_t es = t == XI_Q8 ? 1 : 2;
    for (int64_t i = 0; i < n; i += 8) {
        float32x4_t l, h;
        bload(t, src + (size_t)i * es, &l, &h);
        vst1q_f32(dst + i, l);
        vst1q_f32(dst + i + 4, h);
    }
}

static void blocks_to_f32(float *dst, const xi_weight *w, int64_t b, int NB) {
    const int64_t K = w->n_in, n = 8 * K * NB;
    const size_t es = w->dtype == XI_Q8 ? 1 : 2;
    const char *src = (const char *)w->data + (size_t)(b * 8 * K) * es;
    switch (w->dtype) { /* one loop per format, with the conversion inlined */
    case XI_BF16: { /* per block: input pairs, then an odd last input */
        const int64_t K2 = K & ~(int64_t)1;
        float32x4_t l, h;
        for (int64_t i0 = 0; i0 < n; i0 += 8 * K) {
            for (int64_t k = 0; k < K2; k += 2) {
                const char *p = src + (size_t)((i0 + k * 8) * 2);
                bpair(p, 0, &l, &h);
                vst1q_f32(dst + i0 + k * 8, l);
                vst1q_f32(dst + i0 + k * 8 + 4, h);
                bpair(p, 1, &l, &h);
                vst1q_f32(dst + i0 + k * 8 + 8, l);
                vst1q_f32(dst + i0 + k * 8 + 12, h);
            }
            if (K2 < K) plain_to_f32(dst + i0 + K2 * 8, src + (size_t)((i0 + K2 * 8) * 2), 8, XI_BF16);
        }
        return;
    }
    case XI_F16: plain_to_f32(dst, src, n, XI_F16); return;
    default: plain_to_f32(dst, src, n, XI_Q8); return;
    }
}

#include "kernels/matmul_driver.h"

void xi_neon_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1) {
    matmul_driver(y, ldy, x, ldx, rows, w, n0, n1);
}
