/* kernels/arm/neon_matmul: y = x W^T for every weight format with NEON (fp32 FMA; f16
 * weights through vcvt). The int8 dot-product instructions would need int8 activations,
 * which the W8A16/W4A16 contract rules out, so they are not used here.
 *
 * Summation order (the determinism contract): y[r, n] keeps one 4-lane f32 accumulator;
 * lane l accumulates x[r, k] * W[n, k] for k = 4i + l, i ascending, one FMA each. Then the
 * lanes are summed as (l0+l1)+(l2+l3), then the k % 4 tail is added one scalar FMA at a
 * time, then (Q8) the sum is multiplied by scale[n]. Q4_AWQ runs that order per group over
 * (q - z) (exact) and folds each group's sum S_g as y = fma(S_g, scale_g, y) from y = 0, g
 * ascending (tile_q4). Every path (GEMV tiles, small-batch
 * tiles, GEMM over an f32 panel, any tile edge) performs exactly these operations. */
#include "kernels/arm/neon_common.h"

#define GEMM_MIN_ROWS 8
#define GEMM_ROW_BLOCK 32
#define PANEL_COLS 4

/* Q4_AWQ: q - z (exact) of inputs k..k+7 (k % 8 == 0), *lo = k..k+3 and *hi = k+4..k+7.
 * Row-major: the little-endian u32 at byte k/2 holds them in nibbles 0..7; block 16
 * (kernels.h): one nibble of each of the 8 bytes of k's 16 inputs. */
XI_INLINE void q4_codes8(const char *row, int64_t k, float32x4_t zv, float32x4_t *lo,
                         float32x4_t *hi, int q4b) {
    if (q4b == 16) {
        const uint8x8_t b = vld1_u8((const uint8_t *)row + (k / 16) * 8);
        const uint16x8_t h = vmovl_u8(k & 8 ? vshr_n_u8(b, 4) : vand_u8(b, vdup_n_u8(15)));
        *lo = vsubq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(h))), zv);
        *hi = vsubq_f32(vcvtq_f32_u32(vmovl_u16(vget_high_u16(h))), zv);
        return;
    }
    uint32_t u;
    memcpy(&u, row + k / 2, 4);
    const uint32x4_t v = vdupq_n_u32(u), mask = vdupq_n_u32(15);
    const int32x4_t sh_lo = {0, -4, -8, -12}, sh_hi = {-16, -20, -24, -28};
    *lo = vsubq_f32(vcvtq_f32_u32(vandq_u32(vshlq_u32(v, sh_lo), mask)), zv);
    *hi = vsubq_f32(vcvtq_f32_u32(vandq_u32(vshlq_u32(v, sh_hi), mask)), zv);
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
    if (c < C) q4_codes8(w->base + c * w->stride, k, z##c, &w##c, &wh##c, w->q4b);
#define Q4_ZERO(c) \
    const float32x4_t z##c = c < C ? vdupq_n_f32((float)w->zero[c * w->groups + g]) : zero;
#define Q4_S(c) (c < C ? w->scale[c * w->groups + g] : 0.0f)
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

/* Q4_AWQ, for C <= 4 columns: per group g, each column's lanes accumulate (q - z) * x in
 * the canonical lane order over the group only; the group sum S_g (neon_hsum4's order) is
 * folded as y = fma(S_g, scale_g, y) from y = 0, g ascending. */
XI_INLINE void tile_q4(xi_dtype t, int R, int C, const tile_io *io, const wsrc *w) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    float32x4_t t0 = zero, t1 = zero, t2 = zero, t3 = zero;
    const int64_t K = io->k;
    for (int64_t g = 0, k = 0; k < K; g++) {
        FOR_TILE(ACC_DECL)
        if (t == XI_Q4_PANEL) { /* q - z already in f32 columns */
            for (const int64_t ke = k + w->gs; k < ke; k += 4) {
                FOR_COLS(W_PANEL)
                FOR_ROWS(X_LOAD)
                FOR_TILE(ACC_FMA)
            }
        } else {
            FOR_COLS(Q4_ZERO)
            for (const int64_t ke = k + w->gs; k < ke; k += 8) {
                if (!(k & 127)) FOR_COLS(PF_NEXT_Q4)
                FOR_COLS(W_Q4)
                FOR_ROWS(X_LOAD2)
                FOR_TILE(ACC_FMA2)
            }
        }
        const float sa[4] = {Q4_S(0), Q4_S(1), Q4_S(2), Q4_S(3)};
        const float32x4_t sv = vld1q_f32(sa);
        t0 = vfmaq_f32(t0, neon_hsum4(a00, a01, a02, a03), sv);
        if (R > 1) t1 = vfmaq_f32(t1, neon_hsum4(a10, a11, a12, a13), sv);
        if (R > 2) t2 = vfmaq_f32(t2, neon_hsum4(a20, a21, a22, a23), sv);
        if (R > 3) t3 = vfmaq_f32(t3, neon_hsum4(a30, a31, a32, a33), sv);
        (void)a04, (void)a05, (void)a06, (void)a07;
    }
    const float32x4_t tr[4] = {t0, t1, t2, t3};
    for (int r = 0; r < R; r++) {
        float s[4];
        vst1q_f32(s, tr[r]);
        for (int c = 0; c < C && c < 4; c++) io->y[r * io->ldy + c] = s[c];
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
        if (!((k * es) & 63)) FOR_COLS(PF_NEXT)
        FOR_COLS(W_DENSE)
        FOR_ROWS(X_LOAD)
        FOR_TILE(ACC_FMA)
    }
    finish_row(t, C, io, 0, w, a00, a01, a02, a03, a04, a05, a06, a07);
    if (R > 1) finish_row(t, C, io, 1, w, a10, a11, a12, a13, zero, zero, zero, zero);
    if (R > 2) finish_row(t, C, io, 2, w, a20, a21, a22, a23, zero, zero, zero, zero);
    if (R > 3) finish_row(t, C, io, 3, w, a30, a31, a32, a33, zero, zero, zero, zero);
}

/* Widest tile per row count within 32 q registers; Q4 also keeps a zero-point vector. */
#define TILE_COLS(t, R) \
    ((t) == XI_Q4_AWQ ? ((R) <= 2 ? 4 : 2) : (t) == XI_Q4_PANEL ? 4 : (R) == 1 ? 8 : 4)

/* Column n of W as exact f32 values (Q8 without its scale), computed exactly as the direct
 * tiles compute them, so panel and direct paths agree bitwise. */
static void panel_column(float *dst, const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in, K4 = K & ~(int64_t)3;
    const wsrc s = wsrc_at(w, n);
    if (w->dtype == XI_Q4_AWQ) { /* q - z: the driver applies the scales per group */
        for (int64_t g = 0; g < s.groups; g++) {
            const float32x4_t zv = vdupq_n_f32((float)s.zero[g]);
            for (int64_t k = g * s.gs; k < (g + 1) * s.gs; k += 8) {
                float32x4_t lo, hi;
                q4_codes8(s.base, k, zv, &lo, &hi, s.q4b);
                vst1q_f32(dst + k, lo);
                vst1q_f32(dst + k + 4, hi);
            }
        }
        return;
    }
    int64_t k = 0;
    for (; k < K4; k += 4) vst1q_f32(dst + k, neon_load4(w->dtype, s.base, k));
    for (; k < K; k++) dst[k] = xi_elem_f32(w->dtype, s.base, k);
}

#include "kernels/matmul_driver.h"

void xi_neon_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1) {
    matmul_driver(y, ldy, x, ldx, rows, w, n0, n1);
}
