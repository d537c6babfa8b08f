/* kernels/arm/neon_gq: the integer matmul of GGML block-format weights (xi_ops.matmul_gq) with
 * NEON dotprod (sdot), bitwise xi_matmul_gq_ref (xi_qtype_dot_ref per output).
 *
 * Each weight block is unpacked in registers to int8 values in the order of xi_qblock.q (the
 * same bytes the type's unpack writes), and sdot adds 4 products per int32 lane against the
 * quantized activation block. A sub-block's dot is the sum of its lanes; the sub-block scales
 * multiply those sums in int32 and the mins take the activation's sums (Q8_K's bsums), so
 * sumi and mins are the oracle's integers exactly (no int32 sum here can overflow: the
 * largest, Q6_K's, stays below 2^28). The float steps per block, in block order,
 *     acc += (d * da) * (float)sumi - minterm
 * run with one lane per output column (4 columns per vector), each lane doing the scalar
 * sequence: no horizontal float sums and no fused multiply-add (-std=c11 does not contract),
 * so every column has the oracle's bits for any row count, column range or thread split.
 * Rows go in blocks of ROW_BLOCK and tiles of up to 4 (2 for the K types), so a column group's weight rows are
 * read from memory once per row block and reused from cache by every tile; a tile of R rows
 * unpacks each weight block once for all R. */
#include "kernels/arm/neon_common.h"
#include "kernels/qtypes.h"

#define ROW_BLOCK 64

/* ---------------------------------------------------------------- helpers */

XI_INLINE int32x4_t red4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d)); /* lane i: the sum of the i-th */
}

XI_INLINE float f16s(const uint8_t *p) { /* an f16 as f32 (the conversion is exact) */
    __fp16 h;
    memcpy(&h, p, 2);
    return (float)h;
}

XI_INLINE uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

XI_INLINE int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* The 16 int8 scales in v, sign-extended, as four int32 vectors (scales 4g..4g+3 in out[g]). */
XI_INLINE void widen16(int8x16_t v, int32x4_t out[4]) {
    const int16x8_t l = vmovl_s8(vget_low_s8(v)), h = vmovl_high_s8(v);
    out[0] = vmovl_s16(vget_low_s16(l)), out[1] = vmovl_high_s16(l);
    out[2] = vmovl_s16(vget_low_s16(h)), out[3] = vmovl_high_s16(h);
}

/* sum_k w[k] a[k] over 32 values (w0: values 0-15, w1: 16-31) for each row: its lane sum. */
XI_INLINE void dot32(int R, int8x16_t w0, int8x16_t w1, const uint8_t *const *a, int off,
                     int32x4_t *s) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const int8_t *q = (const int8_t *)(a[r] + off);
        s[r] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(q)), w1, vld1q_s8(q + 16));
    }
}

/* Q5_0 / Q5_1: the fifth bits (bit j of the 32-bit qh for value j) as a byte mask each (0xff
 * where set). */
XI_INLINE void fifth(const uint8_t *qh4, uint8x16_t *h0, uint8x16_t *h1) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const uint8x16_t v = vreinterpretq_u8_u32(vdupq_n_u32(qh));
    static const uint8_t idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                    2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b = vld1q_u8(bit);
    *h0 = vtstq_u8(vqtbl1q_u8(v, vld1q_u8(idx)), b);
    *h1 = vtstq_u8(vqtbl1q_u8(v, vld1q_u8(idx + 16)), b);
}

/* ---------------------------------------------------------------- 32-value blocks */

/* Q8_0, Q4_0, Q5_0, IQ4_NL (activations Q8_0: int8 at +2) and Q4_1, Q5_1 (Q8_1: at +4);
 * their single sub-block has scale 1, so sumi is the dot. */
XI_INLINE void blk32(int id, int R, const uint8_t *w, const uint8_t *const *a, int32x4_t *s) {
    const uint8x16_t m4 = vdupq_n_u8(15);
    int8x16_t w0, w1;
    int off = 2;
    switch (id) {
    case XI_GGML_Q8_0:
        w0 = vld1q_s8((const int8_t *)w + 2), w1 = vld1q_s8((const int8_t *)w + 18);
        break;
    case XI_GGML_Q4_0: {
        const uint8x16_t q = vld1q_u8(w + 2), b = vdupq_n_u8(8);
        w0 = s8(vsubq_u8(vandq_u8(q, m4), b)), w1 = s8(vsubq_u8(vshrq_n_u8(q, 4), b));
        break;
    }
    case XI_GGML_IQ4_NL: {
        static const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
        const int8x16_t t = vld1q_s8(values);
        const uint8x16_t q = vld1q_u8(w + 2);
        w0 = vqtbl1q_s8(t, vandq_u8(q, m4)), w1 = vqtbl1q_s8(t, vshrq_n_u8(q, 4));
        break;
    }
    case XI_GGML_Q5_0: { /* (nibble | 16 bit) - 16: the nibble, plus -16 (0xf0) where bit is clear */
        uint8x16_t h0, h1;
        fifth(w + 2, &h0, &h1);
        const uint8x16_t q = vld1q_u8(w + 6), f0 = vdupq_n_u8(0xf0);
        w0 = s8(vaddq_u8(vandq_u8(q, m4), vbicq_u8(f0, h0)));
        w1 = s8(vaddq_u8(vshrq_n_u8(q, 4), vbicq_u8(f0, h1)));
        break;
    }
    case XI_GGML_Q4_1: {
        const uint8x16_t q = vld1q_u8(w + 4);
        w0 = s8(vandq_u8(q, m4)), w1 = s8(vshrq_n_u8(q, 4)), off = 4;
        break;
    }
    default: { /* XI_GGML_Q5_1 */
        uint8x16_t h0, h1;
        fifth(w + 4, &h0, &h1);
        const uint8x16_t q = vld1q_u8(w + 8), x10 = vdupq_n_u8(0x10);
        w0 = s8(vorrq_u8(vandq_u8(q, m4), vandq_u8(h0, x10)));
        w1 = s8(vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(h1, x10))), off = 4;
        break;
    }
    }
    dot32(R, w0, w1, a, off, s);
}

/* ---------------------------------------------------------------- 256-value K blocks */

/* Activations Q8_K: f32 d, int8 q[256] at +4, int16 bsums[16] (sums of 16 values) at +260. */
#define AQ(a, r, k) vld1q_s8((const int8_t *)((a)[r] + 4) + (k))

/* Q4_K / Q5_K: 8 sub-blocks of 32; each 64 values are 32 bytes, low nibbles first. The 12
 * scale bytes q[0..11] give, as in scale_min_k4, for j < 4 sc = q[j] & 63, m = q[j+4] & 63
 * and for j >= 4 sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4:
 * two table lookups put each lane's sources in place (lanes 0-7 sc, 8-15 m). */
XI_INLINE void blk_q45k(int five, int R, const uint8_t *w, const uint8_t *const *a, int32x4_t *s,
                        int32x4_t *m) {
    static const uint8_t lo_src[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
    static const uint8_t hi_src[16] = {255, 255, 255, 255, 0, 1, 2, 3, 255, 255, 255, 255, 4, 5, 6, 7};
    static const int8_t lo_shift[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -4, -4, -4, -4};
    static const uint8_t lo_mask[16] = {63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15};
    const uint8x16_t v = vld1q_u8(w + 4); /* the 12 scale bytes and 4 more of the block */
    const uint8x16_t lo = vandq_u8(vshlq_u8(vqtbl1q_u8(v, vld1q_u8(lo_src)), vld1q_s8(lo_shift)),
                                   vld1q_u8(lo_mask));
    const uint8x16_t sm = vorrq_u8(lo, vshlq_n_u8(vshrq_n_u8(vqtbl1q_u8(v, vld1q_u8(hi_src)), 6), 4));
    const int16x8_t sc = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(sm)));
    const int16x8_t mn = vreinterpretq_s16_u16(vmovl_high_u8(sm));
    const int32x4_t sc4[2] = {vmovl_s16(vget_low_s16(sc)), vmovl_high_s16(sc)};
    const uint8_t *qs = w + (five ? 48 : 16);
    const uint8x16_t m4 = vdupq_n_u8(15), x10 = vdupq_n_u8(0x10), x1f = vdupq_n_u8(0x1f);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if (five) h0 = vld1q_u8(w + 16), h1 = vld1q_u8(w + 32);
    int32x4_t t[4][4]; /* [row][sub-block within the 128 values] */
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) s[r] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* 64 values: sub-blocks 2j (low nibbles) and 2j+1 */
        const uint8x16_t v0 = vld1q_u8(qs + 32 * j), v1 = vld1q_u8(qs + 32 * j + 16);
        uint8x16_t l0 = vandq_u8(v0, m4), l1 = vandq_u8(v1, m4);
        uint8x16_t u0 = vshrq_n_u8(v0, 4), u1 = vshrq_n_u8(v1, 4);
        if (five) { /* bit 2j of qh for the low half (sli over the nibble, 5 bits kept),
                     * 2j+1 for the high half (masked in place, sri the nibble under it) */
            l0 = vandq_u8(vsliq_n_u8(v0, h0, 4), x1f), l1 = vandq_u8(vsliq_n_u8(v1, h1, 4), x1f);
            u0 = vsriq_n_u8(vandq_u8(vshlq_n_u8(h0, 3), x10), v0, 4);
            u1 = vsriq_n_u8(vandq_u8(vshlq_n_u8(h1, 3), x10), v1, 4);
            h0 = vshrq_n_u8(h0, 2), h1 = vshrq_n_u8(h1, 2);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const int k = 64 * j, z = 2 * (j & 1);
            t[r][z] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), s8(l0), AQ(a, r, k)), s8(l1), AQ(a, r, k + 16));
            t[r][z + 1] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), s8(u0), AQ(a, r, k + 32)), s8(u1),
                                    AQ(a, r, k + 48));
            if (j & 1)
                s[r] = vmlaq_s32(s[r], red4(t[r][0], t[r][1], t[r][2], t[r][3]), sc4[j >> 1]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) { /* mins: m[s] times the sum of sub-block s's activations */
        const int16_t *bs = (const int16_t *)(a[r] + 260);
        const int16x8_t sa = vpaddq_s16(vld1q_s16(bs), vld1q_s16(bs + 8));
        m[r] = vmlal_high_s16(vmull_s16(vget_low_s16(mn), vget_low_s16(sa)), mn, sa);
    }
}

/* 16 sub-blocks of 16 values (Q2_K, Q3_K, Q6_K): y[g][0..3] are the int8 values of sub-blocks
 * 4g..4g+3 (one vector each), sc4[g] their scales. */
XI_INLINE void sub16_dot(int R, const int8x16_t *y, int g, const int32x4_t *sc4,
                         const uint8_t *const *a, int32x4_t *s) {
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const int k = 64 * g;
        const int32x4_t z = vdupq_n_s32(0);
        const int32x4_t d = red4(vdotq_s32(z, y[0], AQ(a, r, k)), vdotq_s32(z, y[1], AQ(a, r, k + 16)),
                                 vdotq_s32(z, y[2], AQ(a, r, k + 32)), vdotq_s32(z, y[3], AQ(a, r, k + 48)));
        s[r] = g ? vmlaq_s32(s[r], d, sc4[g]) : vmulq_s32(d, sc4[g]);
    }
}

/* Q6_K: ql[128], qh[64], int8 scales[16], f16 d; per 128 values (half) y[l] takes the low
 * nibble of ql[l] and bits 0-1 of qh[l], y[l+32] ql[l+32] and bits 2-3, y[l+64] the high
 * nibble of ql[l] and bits 4-5, y[l+96] ql[l+32]'s and bits 6-7; minus 32. */
XI_INLINE void blk_q6k(int R, const uint8_t *w, const uint8_t *const *a, int32x4_t *s) {
    int32x4_t sc4[4];
    widen16(vld1q_s8((const int8_t *)w + 192), sc4);
    const uint8x16_t m3f = vdupq_n_u8(0x3f), m30 = vdupq_n_u8(0x30), b = vdupq_n_u8(32);
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = w + 64 * half, *qh = w + 128 + 32 * half;
        const uint8x16_t q0 = vld1q_u8(ql), q1 = vld1q_u8(ql + 16), q2 = vld1q_u8(ql + 32),
                         q3 = vld1q_u8(ql + 48), g0 = vld1q_u8(qh), g1 = vld1q_u8(qh + 16);
        const uint8x16_t e0 = vshrq_n_u8(g0, 2), e1 = vshrq_n_u8(g1, 2); /* bits 2-3, 6-7 down */
        /* sli: the high bits over the low nibble, then 6 bits kept; sri: the high nibble
         * under the high bits already masked in place */
        const int8x16_t y0[4] = {s8(vsubq_u8(vandq_u8(vsliq_n_u8(q0, g0, 4), m3f), b)),
                                 s8(vsubq_u8(vandq_u8(vsliq_n_u8(q1, g1, 4), m3f), b)),
                                 s8(vsubq_u8(vandq_u8(vsliq_n_u8(q2, e0, 4), m3f), b)),
                                 s8(vsubq_u8(vandq_u8(vsliq_n_u8(q3, e1, 4), m3f), b))};
        sub16_dot(R, y0, 2 * half, sc4, a, s);
        const int8x16_t y1[4] = {s8(vsubq_u8(vsriq_n_u8(vandq_u8(g0, m30), q0, 4), b)),
                                 s8(vsubq_u8(vsriq_n_u8(vandq_u8(g1, m30), q1, 4), b)),
                                 s8(vsubq_u8(vsriq_n_u8(vandq_u8(e0, m30), q2, 4), b)),
                                 s8(vsubq_u8(vsriq_n_u8(vandq_u8(e1, m30), q3, 4), b))};
        sub16_dot(R, y1, 2 * half + 1, sc4, a, s);
    }
}

/* Q2_K (scales[16]: low nibble scale, high nibble min; qs[64]) and Q3_K (hmask[32], qs[64],
 * 12 bytes of 6-bit scales offset by 32): each 128 values read 32 bytes of qs at shifts 0, 2,
 * 4, 6, two sub-blocks per shift; Q3_K subtracts 4 where the value's hmask bit (one bit per
 * shift, counting on over both halves) is clear. */
XI_INLINE void blk_q23k(int three, int R, const uint8_t *w, const uint8_t *const *a, int32x4_t *s,
                        int32x4_t *m) {
    int32x4_t sc4[4];
    int16x8_t mn[2] = {vdupq_n_s16(0), vdupq_n_s16(0)};
    const uint8x16_t c3 = vdupq_n_u8(3), fc = vdupq_n_u8(0xfc);
    const uint8_t *qs = w + (three ? 32 : 16);
    uint8x16_t hm0 = vdupq_n_u8(0), hm1 = vdupq_n_u8(0);
    if (three) {
        /* scale s: low 4 bits s12[s] & 15 (s < 8) or s12[s-8] >> 4, high 2 bits
         * (s12[8 + s%4] >> 2 (s/4)) & 3 */
        const uint8x8_t l8 = vld1_u8(w + 96);
        const uint8x16_t lo = vcombine_u8(vand_u8(l8, vdup_n_u8(15)), vshr_n_u8(l8, 4));
        uint32_t h4;
        memcpy(&h4, w + 104, 4);
        static const int8_t sh[16] = {0, 0, 0, 0, -2, -2, -2, -2, -4, -4, -4, -4, -6, -6, -6, -6};
        const uint8x16_t hi = vandq_u8(vshlq_u8(vreinterpretq_u8_u32(vdupq_n_u32(h4)), vld1q_s8(sh)), c3);
        widen16(vsubq_s8(s8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32)), sc4);
        hm0 = vld1q_u8(w), hm1 = vld1q_u8(w + 16);
    } else {
        const uint8x16_t v = vld1q_u8(w);
        widen16(s8(vandq_u8(v, vdupq_n_u8(15))), sc4);
        const uint8x16_t mm = vshrq_n_u8(v, 4);
        mn[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mm)));
        mn[1] = vreinterpretq_s16_u16(vmovl_high_u8(mm));
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
        uint8x16_t v0 = vld1q_u8(qs + 32 * half), v1 = vld1q_u8(qs + 32 * half + 16);
#pragma GCC unroll 2
        for (int g = 0; g < 2; g++) { /* shifts 2g.. and 2g+1.. : 4 sub-blocks */
            int8x16_t y[4];
#pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                uint8x16_t x0 = vandq_u8(v0, c3), x1 = vandq_u8(v1, c3);
                if (three) { /* x - 4 where the bit is clear: plus 0xfc */
                    const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * half + 2 * g + p)));
                    x0 = vaddq_u8(x0, vbicq_u8(fc, vtstq_u8(hm0, bit)));
                    x1 = vaddq_u8(x1, vbicq_u8(fc, vtstq_u8(hm1, bit)));
                }
                y[2 * p] = s8(x0), y[2 * p + 1] = s8(x1);
                v0 = vshrq_n_u8(v0, 2), v1 = vshrq_n_u8(v1, 2);
            }
            sub16_dot(R, y, 2 * half + g, sc4, a, s);
        }
    }
    if (!three)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const int16_t *bs = (const int16_t *)(a[r] + 260);
            const int16x8_t b0 = vld1q_s16(bs), b1 = vld1q_s16(bs + 8);
            int32x4_t t = vmull_s16(vget_low_s16(mn[0]), vget_low_s16(b0));
            t = vmlal_high_s16(t, mn[0], b0);
            t = vmlal_s16(t, vget_low_s16(mn[1]), vget_low_s16(b1));
            m[r] = vmlal_high_s16(t, mn[1], b1);
        }
}

/* ---------------------------------------------------------------- the tile */

/* sumi and mins partials (their lane sums) of one column's block for R rows. */
XI_INLINE void col_block(int id, int R, const uint8_t *w, const uint8_t *const *a, int32x4_t *s,
                         int32x4_t *m) {
    switch (id) {
    case XI_GGML_Q4_K: blk_q45k(0, R, w, a, s, m); break;
    case XI_GGML_Q5_K: blk_q45k(1, R, w, a, s, m); break;
    case XI_GGML_Q6_K: blk_q6k(R, w, a, s); break;
    case XI_GGML_Q2_K: blk_q23k(0, R, w, a, s, m); break;
    case XI_GGML_Q3_K: blk_q23k(1, R, w, a, s, m); break;
    default: blk32(id, R, w, a, s); break;
    }
}

/* Byte offsets in a weight block of d and dmin (-1: none). */
XI_INLINE int d_off(int id) {
    return id == XI_GGML_Q2_K ? 80 : id == XI_GGML_Q3_K ? 108 : id == XI_GGML_Q6_K ? 208 : 0;
}
XI_INLINE int dmin_off(int id) {
    switch (id) {
    case XI_GGML_Q4_1:
    case XI_GGML_Q5_1:
    case XI_GGML_Q4_K:
    case XI_GGML_Q5_K: return 2;
    case XI_GGML_Q2_K: return 82;
    default: return -1;
    }
}

/* Bytes of a weight block and the activation format (the qtypes table's, as constants). */
XI_INLINE int blk_bytes(int id) {
    switch (id) {
    case XI_GGML_Q4_0: case XI_GGML_IQ4_NL: return 18;
    case XI_GGML_Q4_1: return 20;
    case XI_GGML_Q5_0: return 22;
    case XI_GGML_Q5_1: return 24;
    case XI_GGML_Q8_0: return 34;
    case XI_GGML_Q2_K: return 84;
    case XI_GGML_Q3_K: return 110;
    case XI_GGML_Q4_K: return 144;
    case XI_GGML_Q5_K: return 176;
    default: return 210; /* Q6_K */
    }
}
XI_INLINE xi_act_fmt act_fmt(int id) {
    return id >= XI_GGML_Q2_K && id <= XI_GGML_Q6_K         ? XI_ACT_Q8_K
           : id == XI_GGML_Q4_1 || id == XI_GGML_Q5_1 ? XI_ACT_Q8_1
                                                        : XI_ACT_Q8_0;
}

/* Rows r0..r0+R-1 and the 4 columns whose weight rows are wr[] (repeated past the last
 * column); stores the first nc columns to y. */
XI_INLINE void gq_tile(int id, int R, float *y, int64_t ldy, const uint8_t *act, size_t astride,
                       const uint8_t *const *wr, int64_t nb, int nc) {
    const xi_act_fmt f = act_fmt(id);
    const int bb = blk_bytes(id), q81 = f == XI_ACT_Q8_1;
    const int abb = f == XI_ACT_Q8_K ? 292 : q81 ? 36 : 34;
    const int mo = dmin_off(id), has_mins = mo >= 0 && !q81;
    float32x4_t acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *a[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) a[r] = act + (size_t)r * astride + (size_t)i * (size_t)abb;
        /* a pair of columns at a time, their partials added pairwise at once (fewer live) */
        int32x4_t ps[2][4], pm[2][4];
        uint16_t dh[4], mh[4] = {0, 0, 0, 0};
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int32x4_t s0[4], s1[4], m0[4], m1[4];
            const uint8_t *w0 = wr[2 * h] + (size_t)i * (size_t)bb, *w1 = wr[2 * h + 1] + (size_t)i * (size_t)bb;
            col_block(id, R, w0, a, s0, m0);
            col_block(id, R, w1, a, s1, m1);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                ps[h][r] = vpaddq_s32(s0[r], s1[r]);
                if (has_mins) pm[h][r] = vpaddq_s32(m0[r], m1[r]);
            }
            dh[2 * h] = u16(w0 + d_off(id)), dh[2 * h + 1] = u16(w1 + d_off(id));
            if (mo >= 0) mh[2 * h] = u16(w0 + mo), mh[2 * h + 1] = u16(w1 + mo);
        }
        const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(dh)));
        float32x4_t dm = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(mh))); /* +0 when none */
        if (q81) dm = vnegq_f32(dm); /* Q4_1 / Q5_1 store m, the oracle's dmin is -m */
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float da;
            if (f == XI_ACT_Q8_K)
                memcpy(&da, a[r], 4);
            else
                da = f16s(a[r]);
            const int32x4_t sumi = vpaddq_s32(ps[0][r], ps[1][r]); /* lane c: column c's sum */
            float32x4_t mt;
            if (q81) /* dmin * s * m[0], m[0] = 1 */
                mt = vmulq_n_f32(dm, f16s(a[r] + 2));
            else
                mt = vmulq_f32(vmulq_n_f32(dm, da),
                               vcvtq_f32_s32(has_mins ? vpaddq_s32(pm[0][r], pm[1][r]) : vdupq_n_s32(0)));
            acc[r] = vaddq_f32(acc[r], vsubq_f32(vmulq_f32(vmulq_n_f32(d, da), vcvtq_f32_s32(sumi)), mt));
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (nc == 4) {
            vst1q_f32(y + r * ldy, acc[r]);
        } else {
            float tmp[4];
            vst1q_f32(tmp, acc[r]);
            for (int c = 0; c < nc; c++) y[r * ldy + c] = tmp[c];
        }
    }
}

/* One out-of-line function per (type, R). The K types take at most 2 rows a tile: with more,
 * the live partials spill and a tile costs more per row than two of 2 (counted under qemu). */
typedef void (*gq_fn)(float *, int64_t, const uint8_t *, size_t, const uint8_t *const *, int64_t, int);
#define GQ_FN(T, R)                                                                            \
    static void gq_##T##_##R(float *y, int64_t ldy, const uint8_t *act, size_t astride,         \
                             const uint8_t *const *wr, int64_t nb, int nc) {                    \
        gq_tile(XI_GGML_##T, R, y, ldy, act, astride, wr, nb, nc);                              \
    }
#define GQ_FNS4(T) GQ_FN(T, 1) GQ_FN(T, 2) GQ_FN(T, 3) GQ_FN(T, 4)
#define GQ_FNS2(T) GQ_FN(T, 1) GQ_FN(T, 2)
#define GQ_ROW4(T) {XI_GGML_##T, 4, {gq_##T##_1, gq_##T##_2, gq_##T##_3, gq_##T##_4}}
#define GQ_ROW2(T) {XI_GGML_##T, 2, {gq_##T##_1, gq_##T##_2, NULL, NULL}}
GQ_FNS4(Q4_0)
GQ_FNS4(Q4_1)
GQ_FNS4(Q5_0)
GQ_FNS4(Q5_1)
GQ_FNS4(Q8_0)
GQ_FNS4(IQ4_NL)
GQ_FNS2(Q2_K)
GQ_FNS2(Q3_K)
GQ_FNS2(Q4_K)
GQ_FNS2(Q5_K)
GQ_FNS2(Q6_K)
static const struct {
    int id, rmax;
    gq_fn fn[4]; /* [R - 1] */
} TILES[] = {GQ_ROW4(Q4_0), GQ_ROW4(Q4_1), GQ_ROW4(Q5_0), GQ_ROW4(Q5_1), GQ_ROW4(Q8_0), GQ_ROW4(IQ4_NL),
             GQ_ROW2(Q2_K), GQ_ROW2(Q3_K), GQ_ROW2(Q4_K), GQ_ROW2(Q5_K), GQ_ROW2(Q6_K)};

void xi_matmul_gq_neon(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                       const xi_weight *w, int64_t n0, int64_t n1) {
    const gq_fn *fn = NULL;
    int64_t rmax = 0;
    for (size_t i = 0; i < XI_ARRAY_LEN(TILES); i++)
        if (TILES[i].id == w->qtype->id) fn = TILES[i].fn, rmax = TILES[i].rmax;
    if (!fn || w->block) { /* another type, or packed (gq_pack.h): the oracle itself */
        xi_matmul_gq_ref(y, ldy, act, act_stride, rows, w, n0, n1);
        return;
    }
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    const int64_t nb = w->n_in / w->qtype->block;
    for (int64_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, r0 + ROW_BLOCK);
        for (int64_t n = n0; n < n1; n += 4) {
            const int nc = (int)XI_MIN((int64_t)4, n1 - n);
            const uint8_t *wr[4];
            for (int c = 0; c < 4; c++) /* past the last column: the last one again */
                wr[c] = (const uint8_t *)w->data + (size_t)(n + XI_MIN(c, nc - 1)) * rb;
            for (int64_t r = r0, R; r < re; r += R) {
                R = XI_MIN(rmax, re - r);
                fn[R - 1](y + r * ldy + n, ldy, (const uint8_t *)act + (size_t)r * act_stride,
                          act_stride, wr, nb, nc);
            }
        }
    }
}
