/* kernels/x86/avx512_gq: the integer matmul of GGML block-format weights (xi_ops.matmul_gq)
 * with AVX-512 VNNI (vpdpbusd), bit for bit xi_matmul_gq_ref (xi_qtype_dot_ref per output).
 * Fast paths for Q8_0, Q4_0, Q4_K, Q5_K and Q6_K; every other type goes to
 * xi_matmul_gq_avx2 for the same columns (bitwise the oracle too).
 *
 * Shape: lanes as columns, 16 columns per zmm. For a tile of 16 weight columns and a block,
 * the 16 columns' 16-byte runs of codes are transposed in registers (16 x 4 dwords: the four
 * 128-bit lanes of four zmm take columns j, 4 + j, 8 + j, 12 + j, then vpunpck{l,h}dq and
 * vpunpck{l,h}qdq within the 128-bit lanes), so that dword c of vector g holds codes
 * 4g .. 4g + 3 of column c. A row's 4 activation codes of the same values are broadcast to
 * every dword and one vpdpbusd adds the 4 products into each column's int32 lane: after a
 * block's steps lane c holds column c's integer sum, with no horizontal reduction. The
 * transpose costs 16 loads and 8 in-lane shuffles per 64 bytes of codes, about what the two
 * 8-column ymm halves of the AVX2 file cost, for twice the columns per instruction after it,
 * so the tile is one zmm wide.
 * The transposed codes, the columns' scales (as int32 or int16-pair lanes) and their f16 d of
 * a block form a panel, the vectors the steps read. From 2 rows gq_run fills the panel of a
 * whole column tile once per chunk of 64 rows into this thread's scratch (slot 11) and runs
 * tiles of up to 4 rows over it from L1 / L2; one row (decode) fills a block (K types) or 8
 * blocks (Q8_0, Q4_0) at a time into a buffer on the stack and dots them at once, so the
 * codes go from memory through L1 once. One row of a packed Q8_0 or Q4_0 weight (the loader's
 * layout for this table) has its own tile, with no fill: q8_pairs_row, q4_pairs_row. A tile of fewer than 16 columns (the last one of a
 * range) repeats its last column in the missing lanes and stores only its own. While a
 * column tile is filled, the next one is prefetched in address order, as many bytes per
 * block as the fill reads (the 16 rows of weights are 16 interleaved streams otherwise).
 * The integer steps keep two accumulator chains per row (even and odd steps) so one row is
 * not bound by vpdpbusd's latency.
 *
 * The integer sums (exact in any order, so every decomposition gives the oracle's sumi):
 *   vpdpbusd multiplies unsigned weight bytes u by signed activation bytes a and adds the 4
 *   products of a dword to its int32 lane, with no int16 step (so no saturation) and no
 *   saturation at all (not vpdpbusds): an int32 lane is exact while it stays in range. Every
 *   type dots unsigned codes u = q + o and takes the offset out per block (or sub-block) by
 *   starting the lane at -o * sum(a), the activation sum formed once per call (slot 10).
 *   The activation codes are in [-127, 127] (xi_qtype_quantize_act).
 *   Q8_0: u = q + 128 in [0, 255] (q = -128 included): |lane| <= 128 * 32 * 127 (start) +
 *     32 * 255 * 127 = 1,556,512.
 *   Q4_0: u in [0, 15], o = 8: |lane| <= 8 * 32 * 127 + 32 * 15 * 127 = 93,472.
 *   Q4_K / Q5_K: u in [0, 15] / [0, 31], no offset; per sub-block of 32 a lane t sums the
 *     products, |t| <= 32 * 31 * 127 = 125,984, then vpmulld by the sub-block's 6-bit scale
 *     (<= 63) and the 8 sub-blocks add up: |sumi| <= 8 * 63 * 125,984 = 63,495,936 < 2^31.
 *     mins = sum_s m[s] * B[s] (B the activation's sum over sub-block s, |B| <= 4064, an
 *     int16) as 4 vpmaddwd of (m[2t], m[2t+1]) by (B[2t], B[2t+1]): <= 8 * 63 * 4064 = 2,048,256.
 *   Q6_K: u = q + 32 in [0, 63], sub-blocks of 16 with int8 scales: t starts at -32 * B16[s]
 *     and takes 16 products, so |t| <= 32 * 16 * 127 + 63 * 16 * 127 = 193,040 on the way
 *     and |t| <= 32 * 16 * 127 = 65,024 at the end (u - 32 in [-32, 31]); vpmulld by the
 *     scale (|sc| <= 128) and 16 sub-blocks: |sumi| <= 16 * 128 * 65,024 = 133,169,152 < 2^31.
 * The float steps are the oracle's, per lane and in block order, separate multiplies and
 * adds (no contraction: -std=c11):
 *     acc += (d * da) * (float)sumi - (dmin * da) * (float)mins
 * with dmin = 0 and mins = 0 for the types without mins, so the minterm is the oracle's
 * (0 * da) * 0: +-0 for a finite da, so the tiles of those types skip it (4 of the ~13 float
 * and broadcast steps per row and block of 32). Bit for bit: t - (+-0) differs from t only
 * in the sign of a zero t, and acc + (+-0) equals acc + t then, as acc starts at +0 and a sum
 * of round-to-nearest adds from +0 is never -0. A call with a non-finite da (NaN there, not
 * t) goes to avx2's tiles (rows_prepare refuses it). vcvtdq2ps rounds as (float) does.
 *
 * Tests (tests/test_kernels_gq_avx512.c): this file is compiled a second time, for the test
 * binary only, with XI_AVX512_EMULATED: the intrinsics come from SIMDe's portable AVX-512
 * (and the few SIMDe lacks from the shims below, in ymm halves), the function is
 * xi_matmul_gq_avx512_emulated, and it runs on any x86-64 with AVX2. */
#include <math.h>
#include <string.h>

#ifdef XI_AVX512_EMULATED
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#undef _mm512_madd_epi16 /* SIMDe 0.7.4 aliases it with the masked form's four arguments */
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
#define GQ512_FN xi_matmul_gq_avx512_emulated
#else
#include <immintrin.h>
#define GQ512_FN xi_matmul_gq_avx512
#endif

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/qtypes.h"
#include "kernels/x86/avx512_f16.h"

#define XI_INLINE static inline __attribute__((always_inline))

#define NC 16         /* columns per tile: one per int32 lane of a zmm */
#define RT 4          /* activation rows per tile */
#define ROW_CHUNK 64  /* rows whose panel is reused while a column tile stays in cache */

/* ---- what the emulation lacks, lane for lane the same results ---- */
#ifdef XI_AVX512_EMULATED
XI_INLINE __m512 cvt_ps(__m512i v) {
    int32_t i[16];
    float f[16];
    _mm512_storeu_si512(i, v);
    _mm256_storeu_ps(f, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)i)));
    _mm256_storeu_ps(f + 8, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(i + 8))));
    return _mm512_loadu_ps(f);
}
XI_INLINE __m512 f16x16(const uint16_t *h) {
    float f[16];
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    _mm256_storeu_ps(f + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8))));
    return _mm512_loadu_ps(f);
}
/* [lo(a) + hi(a), lo(b) + hi(b)] of the 256-bit halves */
XI_INLINE __m512i halves_add(__m512i a, __m512i b) {
    const __m512i lo = _mm512_inserti64x4(a, _mm512_castsi512_si256(b), 1);
    const __m512i hi = _mm512_inserti64x4(b, _mm512_extracti64x4_epi64(a, 1), 0);
    return _mm512_add_epi32(lo, hi);
}
#else
XI_INLINE __m512i halves_add(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
}
XI_INLINE __m512 cvt_ps(__m512i v) { return _mm512_cvtepi32_ps(v); }
XI_INLINE __m512 f16x16(const uint16_t *h) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)); }
#endif

/* The types with a fast path. */
enum { T_Q8_0, T_Q4_0, T_Q4_K, T_Q5_K, T_Q6_K };

XI_INLINE int t_block_bytes(int T) {
    static const int b[] = {34, 18, 144, 176, 210};
    return b[T];
}
XI_INLINE int t_kblock(int T) { return T >= T_Q4_K; } /* 256 values, Q8_K activations */
XI_INLINE int t_values(int T) { return t_kblock(T) ? 256 : 32; }
XI_INLINE int t_act_bytes(int T) { return t_kblock(T) ? 292 : 34; }
XI_INLINE int t_act_q(int T) { return t_kblock(T) ? 4 : 2; } /* where the int8 codes start */
XI_INLINE int t_k45(int T) { return T == T_Q4_K || T == T_Q5_K; }
/* Panel vectors per block: codes (8 or 64), then Q4_K / Q5_K: 8 scales, 4 min pairs, d, dmin;
 * Q6_K: 16 scales, d; Q8_0 / Q4_0: d. */
enum { K45_SC = 64, K45_MN = 72, K45_D = 76, K45_DMIN = 77, K45_VECS = 78 };
enum { Q6_SC = 64, Q6_D = 80, Q6_VECS = 81 };
enum { S32_D = 8, S32_VECS = 9 };
XI_INLINE int t_vecs(int T) { return T == T_Q6_K ? Q6_VECS : t_k45(T) ? K45_VECS : S32_VECS; }
XI_INLINE int t_dvec(int T) { return T == T_Q6_K ? Q6_D : t_k45(T) ? K45_D : S32_D; }
/* int32 row terms per row and block (slot 10): the lane start of Q8_0 / Q4_0, Q4_K / Q5_K's
 * 4 (B[2t], B[2t+1]) pairs, Q6_K's 16 sub-block starts. */
XI_INLINE int t_per(int T) { return T == T_Q6_K ? 16 : t_k45(T) ? 4 : 1; }
/* Blocks a one-row tile fills and dots at a time (its stack buffer holds Q6_VECS vectors). */
XI_INLINE int t_decode_blocks(int T) { return t_kblock(T) ? 1 : 8; }

XI_INLINE __m512i mask8(int v) { return _mm512_set1_epi8((char)v); }
XI_INLINE __m512i mask32(int v) { return _mm512_set1_epi32(v); }
/* Byte k (0..3) of every dword, zero-extended (a shift by a count known once unrolled). */
XI_INLINE __m512i byte_of(__m512i v, int k) {
    return _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(8 * k)), mask32(0xff));
}

/* The 16 columns of a tile: stored, column c's row of blocks (a tail repeats its last
 * column); packed (gq_pack.h), the groups of columns 0-7 and 8-15 (g[1] = g[0] for 8 or
 * fewer), with the type's block bytes, f16 factor count and their place in a stored block.
 * A fill reads either through cols_t16 / cols_f16 by the stored block's byte offsets. */
typedef struct {
    const uint8_t *c[NC];
    const uint8_t *g[2]; /* packed: NULL when stored */
    int bb, nf, fo;
} cols16;

/* Dword k of a stored block's bytes from off (stored offsets, a multiple of 4 past the
 * factors) in the packed groups: lanes 0-7 group 0's 8 columns, 8-15 group 1's. A dword
 * that is the factors (Q4_K / Q5_K read bytes 0-3 with the scales and skip it) is 0. */
XI_INLINE __m512i packed_dword(const cols16 *cp, size_t off, int k) {
    const size_t bb = (size_t)cp->bb, i = off / bb, in = off % bb + 4 * (size_t)k;
    const size_t fo = (size_t)cp->fo, fe = fo + 2 * (size_t)cp->nf;
    if (in >= fo && in < fe) return _mm512_setzero_si512();
    const size_t at = i * 8 * bb + 16 * (size_t)cp->nf + 32 * ((in < fo ? in : in - 2 * (size_t)cp->nf) / 4);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(cp->g[0] + at))),
                              _mm256_loadu_si256((const __m256i *)(cp->g[1] + at)), 1);
}

/* The 16 bytes at off of the 16 columns: v[g] dword c = bytes 4g .. 4g + 3 of column c. */
XI_INLINE void cols_t16(const cols16 *cp, size_t off, __m512i *v) {
    if (cp->g[0]) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) v[k] = packed_dword(cp, off, k);
        return;
    }
    __m512i y[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i t = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(cp->c[j] + off)));
        t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)(cp->c[4 + j] + off)), 1);
        t = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)(cp->c[8 + j] + off)), 2);
        y[j] = _mm512_inserti32x4(t, _mm_loadu_si128((const __m128i *)(cp->c[12 + j] + off)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(y[0], y[1]), t1 = _mm512_unpackhi_epi32(y[0], y[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(y[2], y[3]), t3 = _mm512_unpackhi_epi32(y[2], y[3]);
    v[0] = _mm512_unpacklo_epi64(t0, t2);
    v[1] = _mm512_unpackhi_epi64(t0, t2);
    v[2] = _mm512_unpacklo_epi64(t1, t3);
    v[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The 16 columns' f16 at off, stored as they are in the low 32 bytes of *dst; the tiles
 * widen them to f32 (gq_tile's f16_vec) when they use them, long after these narrow stores
 * have left the store buffer (a wide load right behind them cannot be forwarded and stalls). */
XI_INLINE void cols_f16(const cols16 *cp, size_t off, __m512i *dst) {
    uint8_t *h = (uint8_t *)dst;
    if (cp->g[0]) { /* factor f of block i: the 8 columns' u16 at 16 f of each group */
        const size_t bb = (size_t)cp->bb, at = off / bb * 8 * bb + 16 * ((off % bb - (size_t)cp->fo) / 2);
        _mm256_storeu_si256((__m256i *)h, _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(cp->g[0] + at))),
                                                                  _mm_loadu_si128((const __m128i *)(cp->g[1] + at)), 1));
        return;
    }
#pragma GCC unroll 16
    for (int c = 0; c < NC; c++) memcpy(h + 2 * c, cp->c[c] + off, 2);
}
XI_INLINE __m512 f16_vec(const __m512i *v) { return f16x16((const uint16_t *)(const void *)v); }

/* The next column tile's block i, in address order, as many bytes as a fill reads of its
 * own (a hint: never faults, so pf may point past the weight; NULL: nothing). Non-temporal,
 * as avx2_gq.c measured best: the weights are read once per call. */
XI_INLINE void prefetch_block(const uint8_t *pf, int64_t i, int bb) {
    if (pf)
        for (int l = 0; l < NC * bb; l += 64) _mm_prefetch((const char *)pf + (size_t)i * NC * (size_t)bb + l, _MM_HINT_NTA);
}

/* Bits b of every byte moved to bit 4 (0x10), the rest cleared (Q5_K's fifth bits). */
XI_INLINE __m512i bit_to_4(__m512i h, int b) {
    const __m512i s = b <= 4 ? _mm512_sll_epi16(h, _mm_cvtsi32_si128(4 - b)) : _mm512_srl_epi16(h, _mm_cvtsi32_si128(b - 4));
    return _mm512_and_si512(s, mask8(0x10));
}

/* ---- panel fills: block i of the tile's 16 columns into p[0 .. t_vecs) ---- */

/* Q8_0: codes + 128 (vpxor 0x80); Q4_0: low nibbles (values 4g..), then high (16 + 4g..).
 * Vector k pairs with activation dword k. */
XI_INLINE void fill_s32(const int T, const cols16 *cp, size_t off, __m512i *p) {
    __m512i v[8];
    if (T == T_Q8_0) {
        cols_t16(cp, off + 2, v);
        cols_t16(cp, off + 18, v + 4);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) p[k] = _mm512_xor_si512(v[k], mask8(0x80));
    } else {
        cols_t16(cp, off + 2, v);
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            p[g] = _mm512_and_si512(v[g], mask8(15));
            p[4 + g] = _mm512_and_si512(_mm512_srli_epi16(v[g], 4), mask8(15));
        }
    }
    cols_f16(cp, off, &p[S32_D]);
}

/* Q4_K / Q5_K: sub-block s (values 32s ..) step g at 8s + g; the 12 bytes of scales and mins
 * unpacked in the lanes (the dwords u0, u1, u2 at bytes 4, 8, 12 of every column):
 * sc[0..3] = u0 & 0x3f, sc[4..7] = (u2 & 15) | (u0 >> 6) << 4, m[0..3] = u1 & 0x3f,
 * m[4..7] = (u2 >> 4) | (u1 >> 6) << 4, a byte of each per sub-block. */
XI_INLINE void fill_k45(const int T, const cols16 *cp, size_t off, __m512i *p) {
    __m512i h[8];
    if (T == T_Q5_K) {
        cols_t16(cp, off + 16, h);
        cols_t16(cp, off + 32, h + 4);
    }
    const size_t qs = off + (T == T_Q5_K ? 48 : 16);
#pragma GCC unroll 1
    for (int j = 0; j < 4; j++) {
        __m512i v[8];
        cols_t16(cp, qs + 32 * (size_t)j, v);
        cols_t16(cp, qs + 32 * (size_t)j + 16, v + 4);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            __m512i lo = _mm512_and_si512(v[g], mask8(15));
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v[g], 4), mask8(15));
            if (T == T_Q5_K) { /* bit 2j of qh: the fifth bit of sub-block 2j, 2j + 1 of 2j + 1 */
                lo = _mm512_or_si512(lo, bit_to_4(h[g], 2 * j));
                hi = _mm512_or_si512(hi, bit_to_4(h[g], 2 * j + 1));
            }
            p[8 * (2 * j) + g] = lo;
            p[8 * (2 * j + 1) + g] = hi;
        }
    }
    __m512i u[4];
    cols_t16(cp, off, u);
    const __m512i m6 = mask8(0x3f), m4 = mask8(0x0f), m2 = mask8(0x03);
    const __m512i sc03 = _mm512_and_si512(u[1], m6);
    const __m512i sc47 = _mm512_or_si512(_mm512_and_si512(u[3], m4),
                                         _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u[1], 6), m2), 4));
    const __m512i mn03 = _mm512_and_si512(u[2], m6);
    const __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u[3], 4), m4),
                                         _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u[2], 6), m2), 4));
    const __m512i ff = mask32(0xff), ff16 = mask32(0xff0000);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        p[K45_SC + s] = byte_of(sc03, s);
        p[K45_SC + 4 + s] = byte_of(sc47, s);
    }
    /* min pairs (m[2t], m[2t + 1]) as int16 halves of a lane */
    p[K45_MN + 0] = _mm512_or_si512(_mm512_and_si512(mn03, ff), _mm512_and_si512(_mm512_slli_epi32(mn03, 8), ff16));
    p[K45_MN + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(mn03, 16), ff), _mm512_and_si512(_mm512_srli_epi32(mn03, 8), ff16));
    p[K45_MN + 2] = _mm512_or_si512(_mm512_and_si512(mn47, ff), _mm512_and_si512(_mm512_slli_epi32(mn47, 8), ff16));
    p[K45_MN + 3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(mn47, 16), ff), _mm512_and_si512(_mm512_srli_epi32(mn47, 8), ff16));
    cols_f16(cp, off, &p[K45_D]);
    cols_f16(cp, off + 2, &p[K45_DMIN]);
}

/* Q6_K: values 32j + 4g .. at 8j + g, codes u = ql nibble | 2 bits of qh << 4 (0..63): for
 * j = 4h + k, the low nibble of ql[64h + 32 (k & 1) ..] (k < 2) or its high one, and qh
 * [128 + 32h ..] bits 2k, 2k + 1. Scales: int8, sign-extended into the lanes. */
XI_INLINE void fill_q6(const cols16 *cp, size_t off, __m512i *p) {
    if (cp->g[0]) { /* packed: group (h, g)'s triplets V0..V2 at 16 + 96 (8 h + g) */
        const size_t at = off / 210 * 8 * 210 + 16;
#pragma GCC unroll 1
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                __m512i v[3];
#pragma GCC unroll 3
                for (int k = 0; k < 3; k++) {
                    const size_t o = at + 96 * (size_t)(8 * h + g) + 32 * (size_t)k;
                    v[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(cp->g[0] + o))),
                                              _mm256_loadu_si256((const __m256i *)(cp->g[1] + o)), 1);
                    p[8 * (4 * h + k) + g] = _mm512_and_si512(v[k], mask8(63));
                }
                p[8 * (4 * h + 3) + g] = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16(v[0], 6), mask8(0x03)),
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v[1], 4), mask8(0x0c)),
                                    _mm512_and_si512(_mm512_srli_epi16(v[2], 2), mask8(0x30))));
            }
    } else
#pragma GCC unroll 1
    for (int h = 0; h < 2; h++) {
        __m512i l0[8], l1[8], q[8];
        cols_t16(cp, off + 64 * (size_t)h, l0);
        cols_t16(cp, off + 64 * (size_t)h + 16, l0 + 4);
        cols_t16(cp, off + 64 * (size_t)h + 32, l1);
        cols_t16(cp, off + 64 * (size_t)h + 48, l1 + 4);
        cols_t16(cp, off + 128 + 32 * (size_t)h, q);
        cols_t16(cp, off + 144 + 32 * (size_t)h, q + 4);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m512i l = k & 1 ? l1[g] : l0[g];
                const __m512i lo = _mm512_and_si512(k < 2 ? l : _mm512_srli_epi16(l, 4), mask8(15));
                const __m512i hi = k == 0 ? _mm512_slli_epi16(q[g], 4) : k == 1 ? _mm512_slli_epi16(q[g], 2)
                                   : k == 2 ? q[g] : _mm512_srli_epi16(q[g], 2);
                p[8 * (4 * h + k) + g] = _mm512_or_si512(lo, _mm512_and_si512(hi, mask8(0x30)));
            }
    }
    __m512i sc[4];
    cols_t16(cp, off + 192, sc);
    const __m512i sign = mask32(0x80);
#pragma GCC unroll 16
    for (int s = 0; s < 16; s++) {
        const __m512i b = byte_of(sc[s / 4], s % 4);
        p[Q6_SC + s] = _mm512_sub_epi32(_mm512_xor_si512(b, sign), sign);
    }
    cols_f16(cp, off + 208, &p[Q6_D]);
}

/* Blocks [i0, i1) of the tile into p, prefetching the next tile's (pf). */
XI_INLINE void panel_fill(const int T, const cols16 *cp, int64_t i0, int64_t i1, const uint8_t *pf,
                          __m512i *p) {
    const int bb = t_block_bytes(T);
    for (int64_t i = i0; i < i1; i++, p += t_vecs(T)) {
        const size_t off = (size_t)i * (size_t)bb;
        prefetch_block(pf, i, bb);
        if (T == T_Q6_K)
            fill_q6(cp, off, p);
        else if (t_k45(T))
            fill_k45(T, cp, off, p);
        else
            fill_s32(T, cp, off, p);
    }
}

/* ---- tiles: R rows over panel blocks [i0, i1) ---- */

/* Per row and block (slot 10): the activation scale da and t_per int32 terms. */
typedef struct {
    const float *da;     /* [r * nb + i] */
    const int32_t *tab;  /* [(r * nb + i) * t_per + j] */
    int64_t nb;
} row_terms;

XI_INLINE __m512i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* acc[r] (16 columns of row r) += blocks [i0, i1) of p, in block order. Rows at a0 (stride
 * as), their terms at rt (row 0 of the tile). */
XI_INLINE void gq_tile(const int T, const int R, __m512 *acc, const uint8_t *a0, size_t as,
                       const row_terms *rt, const __m512i *p, int64_t i0, int64_t i1) {
    const int ab = t_act_bytes(T), per = t_per(T);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t i = i0; i < i1; i++, p += t_vecs(T)) {
        const uint8_t *aq[RT];
        const int32_t *tb[RT];
        for (int r = 0; r < R; r++) {
            aq[r] = a0 + (size_t)r * as + (size_t)i * (size_t)ab + t_act_q(T);
            tb[r] = rt->tab + ((int64_t)r * rt->nb + i) * per;
        }
        __m512i si[RT], mins[RT];
        if (!t_kblock(T)) {
            __m512i e[RT], o[RT];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) e[r] = _mm512_set1_epi32(tb[r][0]), o[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 8; k += 2)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    e[r] = _mm512_dpbusd_epi32(e[r], p[k], bcast4(aq[r] + 4 * k));
                    o[r] = _mm512_dpbusd_epi32(o[r], p[k + 1], bcast4(aq[r] + 4 * k + 4));
                }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) si[r] = _mm512_add_epi32(e[r], o[r]), mins[r] = _mm512_setzero_si512();
        } else if (T == T_Q6_K) {
#pragma GCC unroll 1
            for (int s = 0; s < 16; s++) {
                __m512i e[RT], o[RT];
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    e[r] = _mm512_dpbusd_epi32(_mm512_set1_epi32(tb[r][s]), p[4 * s], bcast4(aq[r] + 16 * s));
                    o[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p[4 * s + 1], bcast4(aq[r] + 16 * s + 4));
                    e[r] = _mm512_dpbusd_epi32(e[r], p[4 * s + 2], bcast4(aq[r] + 16 * s + 8));
                    o[r] = _mm512_dpbusd_epi32(o[r], p[4 * s + 3], bcast4(aq[r] + 16 * s + 12));
                }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m512i q = _mm512_mullo_epi32(_mm512_add_epi32(e[r], o[r]), p[Q6_SC + s]);
                    si[r] = s ? _mm512_add_epi32(si[r], q) : q;
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) mins[r] = _mm512_setzero_si512();
        } else { /* Q4_K, Q5_K */
#pragma GCC unroll 1
            for (int s = 0; s < 8; s++) {
                __m512i e[RT], o[RT];
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) e[r] = o[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int g = 0; g < 8; g += 2)
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        e[r] = _mm512_dpbusd_epi32(e[r], p[8 * s + g], bcast4(aq[r] + 32 * s + 4 * g));
                        o[r] = _mm512_dpbusd_epi32(o[r], p[8 * s + g + 1], bcast4(aq[r] + 32 * s + 4 * g + 4));
                    }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m512i q = _mm512_mullo_epi32(_mm512_add_epi32(e[r], o[r]), p[K45_SC + s]);
                    si[r] = s ? _mm512_add_epi32(si[r], q) : q;
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                mins[r] = _mm512_add_epi32(
                    _mm512_add_epi32(_mm512_madd_epi16(p[K45_MN], _mm512_set1_epi32(tb[r][0])),
                                     _mm512_madd_epi16(p[K45_MN + 1], _mm512_set1_epi32(tb[r][1]))),
                    _mm512_add_epi32(_mm512_madd_epi16(p[K45_MN + 2], _mm512_set1_epi32(tb[r][2])),
                                     _mm512_madd_epi16(p[K45_MN + 3], _mm512_set1_epi32(tb[r][3]))));
        }
        const __m512 d = f16_vec(&p[t_dvec(T)]);
        const __m512 dmin = t_k45(T) ? f16_vec(&p[K45_DMIN]) : zero;
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 dav = _mm512_set1_ps(rt->da[(int64_t)r * rt->nb + i]);
            const __m512 t = _mm512_mul_ps(_mm512_mul_ps(d, dav), cvt_ps(si[r]));
            if (!t_k45(T)) { /* m = (0 * da) * 0 = +-0 for the finite da gq_run lets in */
                acc[r] = _mm512_add_ps(acc[r], t);
                continue;
            }
            const __m512 m = _mm512_mul_ps(_mm512_mul_ps(dmin, dav), cvt_ps(mins[r]));
            acc[r] = _mm512_add_ps(acc[r], _mm512_sub_ps(t, m));
        }
    }
}

XI_INLINE void gq_tile_rows(const int T, const int R, float *y, int64_t ldy, int cols, const uint8_t *a0,
                            size_t as, const row_terms *rt, const __m512i *p, int64_t nb) {
    __m512 acc[RT];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    gq_tile(T, R, acc, a0, as, rt, p, 0, nb);
    for (int r = 0; r < R; r++) {
        if (cols == NC) {
            _mm512_storeu_ps(y + r * ldy, acc[r]);
        } else {
            float tmp[NC];
            _mm512_storeu_ps(tmp, acc[r]);
            memcpy(y + r * ldy, tmp, (size_t)cols * 4);
        }
    }
}

/* ---- per call ---- */

XI_INLINE float f16at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The row terms of rows [0, rows) (scratch slot 10), from the activation codes themselves;
 * 0 when out of memory or, for the types without mins (whose tiles drop the minterm, see the
 * top), when a da is NaN or inf: the caller then takes avx2's tiles. */
XI_INLINE int rows_prepare(const int T, const uint8_t *act, size_t as, int64_t rows, int64_t nb,
                           row_terms *rt) {
    const int ab = t_act_bytes(T), per = t_per(T);
    float *da = xi_kernel_scratch(10, (size_t)(rows * nb) * (size_t)(4 + 4 * per));
    if (!da) return 0;
    int32_t *tab = (int32_t *)(da + rows * nb);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *ablk = act + (size_t)r * as + (size_t)i * (size_t)ab;
            const int8_t *q = (const int8_t *)(ablk + t_act_q(T));
            int32_t *t = tab + (r * nb + i) * per;
            if (t_kblock(T))
                memcpy(&da[r * nb + i], ablk, 4);
            else
                da[r * nb + i] = f16at(ablk);
            if (!t_k45(T) && !isfinite(da[r * nb + i])) return 0;
            int32_t s16[16] = {0};
            for (int k = 0; k < t_values(T); k++) s16[k / 16] += q[k];
            if (!t_kblock(T)) {
                t[0] = -(T == T_Q8_0 ? 128 : 8) * (s16[0] + s16[1]);
            } else if (T == T_Q6_K) {
                for (int s = 0; s < 16; s++) t[s] = -32 * s16[s];
            } else { /* (B[2t], B[2t + 1]), B[s] the sum over sub-block s of 32: an int16 */
                for (int j = 0; j < 4; j++) {
                    const int32_t b0 = s16[4 * j] + s16[4 * j + 1], b1 = s16[4 * j + 2] + s16[4 * j + 3];
                    t[j] = (int32_t)((uint32_t)(uint16_t)b0 | (uint32_t)(uint16_t)b1 << 16);
                }
            }
        }
    *rt = (row_terms){da, tab, nb};
    return 1;
}

/* ---- one row of a packed Q8_0 weight (decode) ----
 * A packed block of a group of 8 columns (gq_pack.h) is their 8 f16 d (16 bytes), then 8
 * code units of 32 bytes, unit u lane c = column c's codes 4u .. 4u + 3. Units 2k and 2k + 1
 * are one 64-byte load: a zmm whose low half holds dword 2k of the 8 columns and whose high
 * half dword 2k + 1. Their activation vectors (dword 2k broadcast to the low 8 lanes, 2k + 1
 * to the high 8) are made once per call (4 zmm per block, slot 11), so a block of 8 columns
 * is 4 loads with vpxor 0x80 and 4 vpdpbusd (two chains), with no transpose and no panel.
 * Two groups' sums meet in one zmm of 16 columns (their 256-bit halves added crosswise), the
 * lane start -128 * sum(a) added (rows_prepare's term), and the float steps run 16 columns
 * wide, in block order, the oracle's for a finite da:
 *     acc += (d * da) * (float)sumi
 * (its minterm (0 * da) * 0 is +0 then; a row with a non-finite da goes to avx2's tiles).
 * Lanes before the halves meet: |lane| <= 8 * 255 * 127; after, gq_run's Q8_0 bound.
 * Memory: a packed group is one sequential stream, and one core reads a single stream well
 * below its bandwidth (machine_limits.h: streams far apart reach it). So a tile takes
 * Q8_PAIRS pairs of groups, 8 streams 8 rows apart, every block in step. 1 thread, weights
 * from memory (128 MiB of copies), Zen 5, of the read bandwidth at 896x4864 / 4864x896:
 * the stored layout's tile 0.71 / 0.78, this one 0.96 / 0.90 (3 alternating runs, medians;
 * one pair 0.75 / 0.62, two 0.90 / 0.85 in a single run). Q4_0's blocks, half the bytes,
 * measured slower this way than avx2's one-group packed tile; they have q4_pairs_row. A last
 * tile short of columns repeats its last group and stores only its own. */
enum { Q8_PAIRS = 4 };

/* The first cols columns of a pairs tile's accumulators (16 columns each) to y. */
XI_INLINE void store_pairs(float *y, int cols, const __m512 *acc, int pairs) {
    for (int j = 0; j < pairs; j++) {
        const int c = cols - NC * j;
        if (c >= NC) {
            _mm512_storeu_ps(y + NC * j, acc[j]);
        } else if (c > 0) {
            float tmp[NC];
            _mm512_storeu_ps(tmp, acc[j]);
            memcpy(y + NC * j, tmp, (size_t)c * 4);
        }
    }
}

XI_INLINE void q8_pairs_row(float *y, int cols, const uint8_t *const *g, const __m512i *av, const row_terms *rt,
                            int64_t nb) {
    __m512 acc[Q8_PAIRS];
    for (int j = 0; j < Q8_PAIRS; j++) acc[j] = _mm512_setzero_ps();
    const __m512i flip = mask8(0x80);
    for (int64_t i = 0; i < nb; i++, av += 4) {
        const __m512 dav = _mm512_set1_ps(rt->da[i]);
        const __m512i start = _mm512_set1_epi32(rt->tab[i]);
#pragma GCC unroll 4
        for (int j = 0; j < Q8_PAIRS; j++) {
            const uint8_t *a = g[2 * j] + (size_t)i * 272, *b = g[2 * j + 1] + (size_t)i * 272;
            __m512i va[4], vb[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                va[k] = _mm512_xor_si512(_mm512_loadu_si512(a + 16 + 64 * k), flip);
                vb[k] = _mm512_xor_si512(_mm512_loadu_si512(b + 16 + 64 * k), flip);
            }
            const __m512i e0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), va[0], av[0]), va[2], av[2]);
            const __m512i o0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), va[1], av[1]), va[3], av[3]);
            const __m512i e1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), vb[0], av[0]), vb[2], av[2]);
            const __m512i o1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), vb[1], av[1]), vb[3], av[3]);
            const __m512i s = _mm512_add_epi32(halves_add(_mm512_add_epi32(e0, o0), _mm512_add_epi32(e1, o1)), start);
            acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_mul_ps(f16x8x2(a, b), dav), cvt_ps(s)));
        }
    }
    store_pairs(y, cols, acc, Q8_PAIRS);
}

/* ---- one row of a packed Q4_0 weight (decode) ----
 * A packed Q4_0 block of 8 columns is their 8 f16 d, then 4 units of 32 bytes, unit u lane
 * c = column c's code bytes 4u .. 4u + 3 (low nibbles values 4u.., high 16 + 4u..). One
 * 64-byte load is units 2m and 2m + 1 in its halves, and q8_pairs_row's 4 activation vectors
 * of the block are Q4_0's too: av[m] (m < 2) the values of the low nibbles of units 2m, 2m + 1,
 * av[2 + m] those of the high nibbles. So a group's block is 2 loads, 2 vpand of the low and 2
 * of the shifted high nibbles, and 4 vpdpbusd, where avx2's tile spends 4 loads, 8 vpmaddubsw,
 * 8 broadcasts of the activation and the int16 adds (one row of Q4_0 from L2 ran at about 1.2x
 * the read bandwidth there, so it could not overlap its compute with the memory). Lane start
 * -8 * sum(a), float steps as q8_pairs_row's: acc += (d * da) * (float)sumi per block in block
 * order, the oracle's for a finite da. Memory: the Q4_PAIRS pairs of a tile are consecutive
 * groups, and the next tile's blocks are prefetched at the same block index (one tile ahead,
 * as avx2's one-group tile does): Q8_0's 8 streams far apart measured slower for Q4_0, and
 * so did one pair (Zen 5, 1 thread, 4864x896 from memory: one pair 13.0-16.6 GB/s, avx2's
 * tile 16.0-19.7, two pairs 20.8-22.8; 896x4864 12.8-16.9 -> 17.0-18.9 with two).
 * |lane| <= 8 * 32 * 127 + 32 * 15 * 127 (gq_run's Q4_0 bound). */
enum { Q4_PAIRS = 2 };

XI_INLINE void q4_pairs_row(float *y, int cols, const uint8_t *const *g, const __m512i *av, const row_terms *rt,
                            int64_t nb, const uint8_t *pf, size_t gstride) {
    __m512 acc[Q4_PAIRS];
    for (int j = 0; j < Q4_PAIRS; j++) acc[j] = _mm512_setzero_ps();
    const __m512i m15 = mask8(15);
    for (int64_t i = 0; i < nb; i++, av += 4) {
        if (pf)
            for (int j = 0; j < 2 * Q4_PAIRS; j++)
                for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)pf + (size_t)j * gstride + (size_t)i * 144 + l, _MM_HINT_NTA);
        const __m512 dav = _mm512_set1_ps(rt->da[i]);
        const __m512i start = _mm512_set1_epi32(rt->tab[i]);
#pragma GCC unroll 4
        for (int j = 0; j < Q4_PAIRS; j++) {
            __m512i e[2];
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const uint8_t *b = g[2 * j + h] + (size_t)i * 144;
                const __m512i v0 = _mm512_loadu_si512(b + 16), v1 = _mm512_loadu_si512(b + 80);
                const __m512i l0 = _mm512_and_si512(v0, m15), h0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m15);
                const __m512i l1 = _mm512_and_si512(v1, m15), h1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m15);
                const __m512i ev = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), l0, av[0]), h0, av[2]);
                const __m512i od = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), l1, av[1]), h1, av[3]);
                e[h] = _mm512_add_epi32(ev, od);
            }
            const __m512i sm = _mm512_add_epi32(halves_add(e[0], e[1]), start);
            acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_mul_ps(f16x8x2(g[2 * j] + (size_t)i * 144, g[2 * j + 1] + (size_t)i * 144), dav), cvt_ps(sm)));
        }
    }
    store_pairs(y, cols, acc, Q4_PAIRS);
}

/* Columns [n0, n1) of one row, n0 a multiple of 8; 0 when a da is not finite or out of
 * memory (the caller takes another path). */
XI_INLINE int run_packed_row(const int T, float *y, const uint8_t *act, const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t nb = w->n_in / 32;
    const size_t rb = (size_t)nb * (size_t)t_block_bytes(T);
    row_terms rt;
    if (!rows_prepare(T, act, 0, 1, nb, &rt)) return 0;
    __m512i *av = xi_kernel_scratch(11, (size_t)nb * 4 * 64);
    if (!av) return 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *q = act + (size_t)i * 34 + 2;
        for (int k = 0; k < 4; k++) {
            int32_t lo, hi;
            memcpy(&lo, q + 8 * k, 4);
            memcpy(&hi, q + 8 * k + 4, 4);
            av[4 * i + k] = _mm512_inserti64x4(_mm512_set1_epi32(lo), _mm256_set1_epi32(hi), 1);
        }
    }
    const int pairs = T == T_Q8_0 ? Q8_PAIRS : Q4_PAIRS;
    for (int64_t n = n0; n < n1; n += NC * pairs) {
        const int cols = (int)XI_MIN((int64_t)NC * pairs, n1 - n);
        const uint8_t *g[2 * Q8_PAIRS];
        for (int j = 0; j < 2 * pairs; j++) /* past cols: the last group again */
            g[j] = (const uint8_t *)w->data + (size_t)(n + 8 * XI_MIN(j, (cols - 1) / 8)) * rb;
        if (T == T_Q8_0) {
            q8_pairs_row(y + n, cols, g, av, &rt, nb);
        } else { /* the next tile's groups (a hint, never faults: the last may ask past n1) */
            const uint8_t *pf = n + NC * pairs < n1 ? (const uint8_t *)w->data + (size_t)(n + NC * pairs) * rb : NULL;
            q4_pairs_row(y + n, cols, g, av, &rt, nb, pf, 8 * rb);
        }
    }
    return 1;
}

/* Rows [0, rows) x columns [n0, n1); 0 when out of memory (the caller takes another path). */
XI_INLINE int gq_run(const int T, float *y, int64_t ldy, const uint8_t *act, size_t as,
                     int64_t rows, const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t nb = w->n_in / t_values(T);
    const size_t rb = (size_t)nb * (size_t)t_block_bytes(T);
    /* packed (the loader's layout for this table): one row of Q8_0 or Q4_0 goes to its own tile,
     * other types' to avx2's packed tiles, faster than a fill per block; panels read the
     * groups (n0, a multiple of 16, starts one) */
    if ((T == T_Q8_0 || T == T_Q4_0) && w->block && rows == 1 && n0 % 8 == 0) return run_packed_row(T, y, act, w, n0, n1);
    if (w->block && (rows == 1 || n0 % 8)) return 0;
    row_terms rt;
    if (!rows_prepare(T, act, as, rows, nb, &rt)) return 0;
    __m512i *panel = NULL;
    if (rows > 1 && !(panel = xi_kernel_scratch(11, (size_t)(nb * t_vecs(T)) * 64))) return 0;
    for (int64_t c0 = 0; c0 < rows; c0 += ROW_CHUNK) {
        const int64_t c1 = XI_MIN(rows, c0 + ROW_CHUNK);
        for (int64_t n = n0; n < n1; n += NC) {
            const int cols = (int)XI_MIN((int64_t)NC, n1 - n);
            const uint8_t *w0 = (const uint8_t *)w->data + (size_t)n * rb;
            cols16 cp = {.bb = t_block_bytes(T), .nf = w->qtype->f16_n, .fo = w->qtype->f16_off};
            if (w->block) { /* group n / 8 starts at n * rb too */
                cp.g[0] = w0;
                cp.g[1] = cols > 8 ? w0 + 8 * rb : w0;
            } else
                for (int c = 0; c < NC; c++) cp.c[c] = w0 + (size_t)(c < cols ? c : cols - 1) * rb;
            /* the next tile's columns, prefetched while these are filled (a hint, which never
             * faults, so the last tile may ask past n1) */
            const uint8_t *pf = n + NC < n1 ? w0 + NC * rb : NULL;
            if (!panel) { /* one row: fill a few blocks, dot them, go on */
                __m512i buf[Q6_VECS];
                __m512 acc = _mm512_setzero_ps();
                const int step = t_decode_blocks(T);
                for (int64_t i = 0; i < nb; i += step) {
                    const int64_t i1 = XI_MIN(nb, i + step);
                    panel_fill(T, &cp, i, i1, pf, buf);
                    gq_tile(T, 1, &acc, act, as, &rt, buf, i, i1);
                }
                float tmp[NC];
                _mm512_storeu_ps(tmp, acc);
                memcpy(y + n, tmp, (size_t)cols * 4);
                continue;
            }
            panel_fill(T, &cp, 0, nb, pf, panel);
            for (int64_t r = c0; r < c1; r += RT) {
                const row_terms lt = {rt.da + r * nb, rt.tab + r * nb * t_per(T), nb};
                float *yt = y + r * ldy + n;
                const uint8_t *at = act + (size_t)r * as;
                switch (XI_MIN((int64_t)RT, c1 - r)) {
                case 4: gq_tile_rows(T, 4, yt, ldy, cols, at, as, &lt, panel, nb); break;
                case 3: gq_tile_rows(T, 3, yt, ldy, cols, at, as, &lt, panel, nb); break;
                case 2: gq_tile_rows(T, 2, yt, ldy, cols, at, as, &lt, panel, nb); break;
                default: gq_tile_rows(T, 1, yt, ldy, cols, at, as, &lt, panel, nb); break;
                }
            }
        }
    }
    return 1;
}

#define GQ_RUN(T)                                                                              \
    static int run_##T(float *y, int64_t ldy, const uint8_t *act, size_t as, int64_t rows,      \
                       const xi_weight *w, int64_t n0, int64_t n1) {                           \
        return gq_run(T, y, ldy, act, as, rows, w, n0, n1);                                    \
    }
GQ_RUN(T_Q8_0)
GQ_RUN(T_Q4_0)
GQ_RUN(T_Q4_K)
GQ_RUN(T_Q5_K)
GQ_RUN(T_Q6_K)

typedef int (*gq_fn)(float *, int64_t, const uint8_t *, size_t, int64_t, const xi_weight *,
                     int64_t, int64_t);

static gq_fn fast_path(int id) {
    switch (id) {
    case XI_GGML_Q8_0: return run_T_Q8_0;
    case XI_GGML_Q4_0: return run_T_Q4_0;
    case XI_GGML_Q4_K: return run_T_Q4_K;
    case XI_GGML_Q5_K: return run_T_Q5_K;
    case XI_GGML_Q6_K: return run_T_Q6_K;
    default: return NULL;
    }
}

#ifdef XI_AVX512_EMULATED
void GQ512_FN(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
              const xi_weight *w, int64_t n0, int64_t n1);
#endif

void GQ512_FN(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
              const xi_weight *w, int64_t n0, int64_t n1) {
    const gq_fn f = fast_path(w->qtype->id);
    if (n0 >= n1 || rows <= 0) return;
    /* other types, one row of a packed weight and out of memory: avx2's, same bits */
    if (!f || !f(y, ldy, act, act_stride, rows, w, n0, n1))
        xi_matmul_gq_avx2(y, ldy, act, act_stride, rows, w, n0, n1);
}
