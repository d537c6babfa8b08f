/* kernels/x86/avx2_gq: the integer matmul of GGML block-format weights (xi_ops.matmul_gq)
 * with AVX2, bit for bit xi_matmul_gq_ref (xi_qtype_dot_ref per output, qtypes.h).
 *
 * Shape of the work: a tile is up to RT activation rows x 8 output columns. For every weight
 * block (in row order) each of the 8 columns' blocks is decoded once into unsigned or signed
 * 8-bit codes and dotted with the RT rows' activation blocks (vpmaddubsw, then vpmaddwd by
 * the sub-block scale or by 1), leaving per column and row an int32 vector whose lanes sum to
 * the block's sumi (and, for the types with mins, a second group of lanes summing to mins).
 * A vphaddd tree turns the 8 columns' vectors into one vector with one column per lane, and
 * the float steps run in those lanes, each lane doing the oracle's scalar sequence:
 *     acc += (d * da) * (float)sumi - minterm
 * with minterm = (dmin * da) * (float)mins, or dmin * s for Q8_1 activations (Q4_1, Q5_1,
 * whose m is 1), separate multiplies and adds (no contraction: -std=c11), blocks in row
 * order. Integer sums are exact in any order, so every row count, column range and thread
 * split gives the oracle's bits. A tile reads its 8 rows block by block, 8 interleaved short
 * streams the hardware prefetcher follows poorly (Q6_K with 1024 inputs ran at a quarter of
 * read bandwidth), so the first row tile prefetches the next 8 rows in address order, as many
 * bytes per block as it reads.
 * Q4_0 (every row count) and Q8_0 (from 2 rows) take a second tile, with lanes as columns
 * (below), which needs no reduction tree.
 * Every type xi_qtype_supported computes has a path here; one
 * added to the table later goes to the oracle until it has one.
 *
 * No int16 saturation in vpmaddubsw (u8 x s8, two products summed to s16):
 *   The activation codes a are in [-127, 127] (xi_qtype_quantize_act).
 *   Q8_0, IQ4_NL: signed weight codes w (Q8_0 may hold -128): the product is |w| (u8, <= 128:
 *     vpabsb of -128 is 0x80) times a * sign(w) (s8, |.| <= 127, so the negation fits):
 *     |pair| <= 2 * 128 * 127 = 32512 < 32767.
 *   Q4_0, Q4_1, Q5_0, Q5_1: the stored codes 0..15 / 0..31 (u8) times a: <= 2 * 31 * 127 = 7874;
 *     Q4_0 / Q5_0's offset (8, 16) comes off as offset * sum(a) per block, exact in int32.
 *   Q4_K: codes 0..15 times a: |pair| <= 2 * 15 * 127 = 3810; Q5_K: codes 0..31: 7874;
 *   Q6_K: codes 0..63 (the -32 offset is taken out through the activation block sums):
 *     2 * 63 * 127 = 16002; Q3_K: codes 0..7 (offset 4): 1778; Q2_K: codes 0..3: 762.
 * vpmaddwd then multiplies by a scale (6-bit for Q4_K / Q5_K / Q3_K, 4-bit for Q2_K, int8 for
 * Q6_K) or 1 and adds two:
 * |lane| <= 2 * 16002 * 128 < 2^22, and a block's sum stays far inside int32. */
#include <math.h>

#include "kernels/qtypes.h"
#include "kernels/x86/avx2_common.h"

#define RT 4          /* activation rows per tile: one decoded weight block serves them all */
#define ROW_CHUNK 64  /* rows whose quantized activations are reused while 8 columns stream */

/* The types with a fast path. */
enum { T_Q8_0, T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1, T_IQ4_NL, T_Q4_K, T_Q5_K, T_Q6_K, T_Q3_K, T_Q2_K };

/* How a type's minterm is formed: none (dmin 0, mins 0), integer mins of a K block scaled by
 * dmin * da, or dmin * s of a Q8_1 activation block. */
enum { MIN_NONE, MIN_K, MIN_Q81 };

XI_INLINE int t_block_bytes(int T) {
    static const int b[] = {34, 18, 20, 22, 24, 18, 144, 176, 210, 110, 84};
    return b[T];
}
XI_INLINE int t_values(int T) { return T >= T_Q4_K ? 256 : 32; }
XI_INLINE int t_min(int T) {
    return T == T_Q4_1 || T == T_Q5_1 ? MIN_Q81 : T == T_Q4_K || T == T_Q5_K || T == T_Q2_K ? MIN_K : MIN_NONE;
}
/* Where the f16 d and the f16 dmin (or Q4_1 / Q5_1's m) of a block are. */
XI_INLINE int t_d_off(int T) { return T == T_Q6_K ? 208 : T == T_Q3_K ? 108 : T == T_Q2_K ? 80 : 0; }
XI_INLINE int t_m_off(int T) { return T == T_Q2_K ? 82 : 2; }
/* Activation block: bytes, and where its int8 codes start (Q8_0: f16 d; Q8_1: f16 d, f16 s;
 * Q8_K: f32 d, then codes, then int16 sums of each 16). */
XI_INLINE int t_act_bytes(int T) { return T >= T_Q4_K ? 292 : t_min(T) == MIN_Q81 ? 36 : 34; }
XI_INLINE int t_act_q(int T) { return T >= T_Q4_K || t_min(T) == MIN_Q81 ? 4 : 2; }

XI_INLINE __m256i mask8(int v) { return _mm256_set1_epi8((char)v); }

/* 16 bytes of nibbles as 32 codes: low nibbles first, then high (the 32-value layout). */
XI_INLINE __m256i nibbles32(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(t, mask8(15));
}

/* The 32 bits at p (bit j for value j) as bytes 0x10 where set. */
XI_INLINE __m256i fifth_bits32(const uint8_t *p) {
    uint32_t h;
    memcpy(&h, p, 4);
    const __m256i pick = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                            0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), mask8(0x10));
}

/* Q4_0 / Q5_0 codes are stored with an offset (8, 16); the kernels dot the stored unsigned
 * codes and take offset * sum(a) off after the reduction. */
XI_INLINE int t_offset(int T) { return T == T_Q4_0 ? 8 : T == T_Q5_0 ? 16 : 0; }
XI_INLINE int t_signed(int T) { return T == T_Q8_0 || T == T_IQ4_NL; }

/* A 32-value block's codes: signed bytes (Q8_0, IQ4_NL) or the stored unsigned ones. */
XI_INLINE __m256i codes32(int T, const uint8_t *x) {
    switch (T) {
    case T_Q8_0: return _mm256_loadu_si256((const __m256i *)(x + 2));
    case T_Q4_0: return nibbles32(x + 2);
    case T_Q4_1: return nibbles32(x + 4);
    case T_Q5_0: return _mm256_or_si256(nibbles32(x + 6), fifth_bits32(x + 2));
    case T_Q5_1: return _mm256_or_si256(nibbles32(x + 8), fifth_bits32(x + 4));
    default: { /* IQ4_NL: nibbles index the non-linear table */
        const __m128i tab = _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38,
                                          53, 69, 89, 113);
        return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(tab), nibbles32(x + 2));
    }
    }
}

/* 32-value types: out[r] lanes sum to sumi (less the offset term); bounds above. */
XI_INLINE void dot32(int T, int R, const uint8_t *x, const uint8_t *const *a, __m256i *out) {
    const __m256i w = codes32(T, x), ones = _mm256_set1_epi16(1);
    const __m256i aw = t_signed(T) ? _mm256_abs_epi8(w) : w;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)a[r]);
        if (t_signed(T)) av = _mm256_sign_epi8(av, w);
        out[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, av), ones);
    }
}

/* The six-bit scales and mins of the 8 columns' Q4_K / Q5_K block i (its 12 bytes at 4),
 * once per block for the whole tile, two columns per vector: sc[c][s] = scale s of column c
 * in both int16 halves (the vpmaddwd operand of sub-block s: one broadcast load), mn[c] its
 * 8 mins as int16. Per 128-bit lane the dwords u0, u1, u2 of the 12 bytes give
 *   scales 0-3: u0 & 0x3f..   scales 4-7: (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4
 *   mins 0-3:   u1 & 0x3f..   mins 4-7:   ((u2 >> 4) & 0x0f..) | ((u1 >> 6) & 0x03..) << 4
 * ((u >> 2) & 0x30 per byte is ((u >> 6) & 3) << 4 of the same byte). */
XI_INLINE void k45_scales8(const uint8_t *const *col, size_t off, int32_t (*sc)[8], int16_t (*mn)[8]) {
    const __m256i ma = _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                         0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m256i mb = _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030);
    const __m256i sh = _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4), z = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {
        const __m256i v = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(col[c] + off + 4))),
            _mm_loadu_si128((const __m128i *)(col[c + 1] + off + 4)), 1);
        const __m256i a = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0x98), sh), ma);
        const __m256i b = _mm256_and_si256(_mm256_srli_epi32(_mm256_shuffle_epi32(v, 0x50), 2), mb);
        const __m256i u = _mm256_or_si256(a, b);       /* per lane: sc0..7, m0..7 (bytes) */
        const __m256i s16 = _mm256_unpacklo_epi8(u, z); /* per lane: sc0..7 (int16) */
        const __m256i lo = _mm256_unpacklo_epi16(s16, s16), hi = _mm256_unpackhi_epi16(s16, s16);
        const __m256i m16 = _mm256_unpackhi_epi8(u, z);
        _mm_storeu_si128((__m128i *)sc[c], _mm256_castsi256_si128(lo));
        _mm_storeu_si128((__m128i *)(sc[c] + 4), _mm256_castsi256_si128(hi));
        _mm_storeu_si128((__m128i *)sc[c + 1], _mm256_extracti128_si256(lo, 1));
        _mm_storeu_si128((__m128i *)(sc[c + 1] + 4), _mm256_extracti128_si256(hi, 1));
        _mm_storeu_si128((__m128i *)mn[c], _mm256_castsi256_si128(m16));
        _mm_storeu_si128((__m128i *)mn[c + 1], _mm256_extracti128_si256(m16, 1));
    }
}

/* Q4_K / Q5_K: eight sub-blocks of 32 with 6-bit scales and mins (sc, mn of this column from
 * k45_scales8). out[r]: low 4 lanes sum to sumi, high 4 to mins; pre[r] holds the
 * activation's 8 sums of 32 (int16). */
XI_INLINE void dot_k45(int T, int R, const uint8_t *x, const uint8_t *const *a,
                       const __m256i *pre, const int32_t *sc, const int16_t *mn, __m256i *out) {
    const __m128i mins = _mm_loadu_si128((const __m128i *)mn);
    const uint8_t *qs = x + (T == T_Q5_K ? 48 : 16);
    __m256i qh = _mm256_setzero_si256();
    if (T == T_Q5_K) qh = _mm256_loadu_si256((const __m256i *)(x + 16));
    __m256i acc[RT];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(q, mask8(15)), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask8(15));
        if (T == T_Q5_K) { /* bit 2j of qh is the fifth bit of the low half, 2j+1 of the high */
            __m256i bl, bh;
            switch (j) {
            case 0: bl = _mm256_slli_epi16(qh, 4), bh = _mm256_slli_epi16(qh, 3); break;
            case 1: bl = _mm256_slli_epi16(qh, 2), bh = _mm256_slli_epi16(qh, 1); break;
            case 2: bl = qh, bh = _mm256_srli_epi16(qh, 1); break;
            default: bl = _mm256_srli_epi16(qh, 2), bh = _mm256_srli_epi16(qh, 3); break;
            }
            lo = _mm256_or_si256(lo, _mm256_and_si256(bl, mask8(0x10)));
            hi = _mm256_or_si256(hi, _mm256_and_si256(bh, mask8(0x10)));
        }
        const __m256i sl = _mm256_set1_epi32(sc[2 * j]), sh = _mm256_set1_epi32(sc[2 * j + 1]);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a[r] + 64 * j)));
            const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a[r] + 64 * j + 32)));
            acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(_mm256_madd_epi16(pl, sl), _mm256_madd_epi16(ph, sh)));
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc[r]), _mm256_extracti128_si256(acc[r], 1));
        const __m128i m4 = _mm_madd_epi16(mins, _mm256_castsi256_si128(pre[r]));
        out[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(s4), m4, 1);
    }
}

/* The 16 signed six-bit scales of Q3_K (12 bytes: low nibbles, then 2-bit high parts). */
XI_INLINE __m128i q3k_scales(const uint8_t *s12) {
    uint32_t u[3];
    memcpy(u, s12, 12);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const __m128i v = _mm_setr_epi32((int)((u[0] & m4) | (u[2] & m2) << 4),
                                     (int)((u[1] & m4) | ((u[2] >> 2) & m2) << 4),
                                     (int)(((u[0] >> 4) & m4) | ((u[2] >> 4) & m2) << 4),
                                     (int)(((u[1] >> 4) & m4) | ((u[2] >> 6) & m2) << 4));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

/* Values 32j .. 32j+31 of a Q6_K / Q3_K / Q2_K block as unsigned codes (the offset, 32 or 4,
 * comes off through the activation block sums). */
XI_INLINE __m256i k16_codes(int T, const uint8_t *x, int j) {
    const int h = j / 4, k = j % 4;
    if (T == T_Q6_K) { /* ql: low 4 bits, qh: 2 high bits at 2k */
        const __m256i l = _mm256_loadu_si256((const __m256i *)(x + 64 * h + 32 * (k & 1)));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h));
        const __m256i lo = k < 2 ? l : _mm256_srli_epi16(l, 4);
        const __m256i hi = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2)
                           : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
        return _mm256_or_si256(_mm256_and_si256(lo, mask8(15)), _mm256_and_si256(hi, mask8(0x30)));
    }
    const __m256i q = _mm256_loadu_si256((const __m256i *)(x + (T == T_Q3_K ? 32 : 16) + 32 * h));
    const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), mask8(3));
    if (T == T_Q2_K) return v;
    /* Q3_K: hmask bit j set adds 4 (the value is then v, else v - 4) */
    const __m256i hm = _mm256_loadu_si256((const __m256i *)x);
    return _mm256_or_si256(v, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, j), mask8(1)), 2));
}

/* Q6_K, Q3_K, Q2_K: sixteen sub-blocks of 16 with int8 scales sc; 32 values span sub-blocks
 * 2j and 2j+1, one per 128-bit lane. Codes u = q + offset (32, 4, 0):
 * sumi = sum_s sc[s] * sum(u * a) - offset * sum_s sc[s] * bsum[s]. Q2_K's mins (4 bits) give
 * mins = sum_s m[s] * bsum[s], in the high 4 lanes of out[r]. pre[r] holds the 16 bsums. */
XI_INLINE void dot_k16(int T, int R, const uint8_t *x, const uint8_t *const *a, const __m256i *pre,
                       __m256i *out) {
    __m128i sc, mn = _mm_setzero_si128();
    if (T == T_Q6_K) {
        sc = _mm_loadu_si128((const __m128i *)(x + 192));
    } else if (T == T_Q3_K) {
        sc = q3k_scales(x + 96);
    } else {
        const __m128i b = _mm_loadu_si128((const __m128i *)x);
        sc = _mm_and_si128(b, _mm_set1_epi8(15));
        mn = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15));
    }
    const int off_log2 = T == T_Q6_K ? 5 : 2; /* offset 32 or 4 */
    __m256i acc[RT];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        acc[r] = T == T_Q2_K ? _mm256_setzero_si256()
                             : _mm256_sub_epi32(_mm256_setzero_si256(),
                                                _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), pre[r]), off_log2));
    /* the scales as int16, the even sub-blocks' in the low 128-bit lane, the odd ones' in the
     * high: step j's operand (sc[2j] in the low lane, sc[2j + 1] in the high) is one vpshufb */
    const __m256i sc2 = _mm256_cvtepi8_epi16(
        _mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const __m256i v = k16_codes(T, x, j);
        const __m256i sv = _mm256_shuffle_epi8(sc2, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(
                _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(a[r] + 32 * j))), sv));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (T != T_Q2_K) {
            out[r] = acc[r];
            continue;
        }
        const __m256i m8 = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mn), pre[r]);
        const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc[r]), _mm256_extracti128_si256(acc[r], 1));
        const __m128i m4 = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
        out[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(s4), m4, 1);
    }
}

/* Per-row activation data a kernel wants, once per block for all 8 columns. */
XI_INLINE __m256i act_pre(int T, const uint8_t *ablk) {
    if (T == T_Q4_K || T == T_Q5_K) {
        const __m128i lo = _mm_loadu_si128((const __m128i *)(ablk + 260));
        const __m128i hi = _mm_loadu_si128((const __m128i *)(ablk + 276));
        return _mm256_castsi128_si256(_mm_hadd_epi16(lo, hi)); /* sums of 32: |.| <= 4064 */
    }
    if (T == T_Q6_K || T == T_Q3_K || T == T_Q2_K) return _mm256_loadu_si256((const __m256i *)(ablk + 260));
    if (t_offset(T)) { /* offset * sum of the 32 codes, in every lane */
        const __m256i a = _mm256_loadu_si256((const __m256i *)(ablk + 2));
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(mask8(1), a), _mm256_set1_epi16(1));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        return _mm256_mullo_epi32(_mm256_broadcastd_epi32(h), _mm256_set1_epi32(t_offset(T)));
    }
    return _mm256_setzero_si256();
}

/* Eight columns' vectors p[c] to one vector per lane group: with lo / hi the two 128-bit
 * halves of each p[c] summed separately, lane c of *lo is p[c]'s low half, of *hi its high. */
XI_INLINE void reduce8(const __m256i *p, __m256i *lo, __m256i *hi) {
    const __m256i x = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256i y = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    *lo = _mm256_permute2x128_si256(x, y, 0x20);
    *hi = _mm256_permute2x128_si256(x, y, 0x31);
}

XI_INLINE float f16at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The next 8 columns' block i, in address order, as many bytes as a tile reads of its own
 * (a hint: never faults, so pf may point past the weight; NULL: nothing). Non-temporal: the
 * weights are read once per call, and the lines need not displace activations and panels
 * from L2 / L3 (one-row Q6_K 12288 x 4096 from memory 12% faster than with T0, Q8_0 8%,
 * the 512-row panels 3-4%). */
XI_INLINE void prefetch_block(const uint8_t *pf, int64_t i, int bb) {
    if (pf)
        for (int l = 0; l < 8 * bb; l += 64) _mm_prefetch((const char *)pf + (size_t)i * 8 * (size_t)bb + l, _MM_HINT_NTA);
}

/* Column c's block x with the R rows: its partial sums and f16 scale factors. */
XI_INLINE void col_block(int T, int R, const uint8_t *x, const uint8_t *const *aq, const __m256i *pre,
                         const int32_t (*sc)[8], const int16_t (*mn)[8], __m256i (*part)[8], int c) {
    __m256i o[RT];
    if (T == T_Q6_K || T == T_Q3_K || T == T_Q2_K)
        dot_k16(T, R, x, aq, pre, o);
    else if (T == T_Q4_K || T == T_Q5_K)
        dot_k45(T, R, x, aq, pre, sc[c], mn[c], o);
    else
        dot32(T, R, x, aq, o);
    for (int r = 0; r < R; r++) part[r][c] = o[r];
}

/* R rows (act rows a0.., stride as) x columns n .. n + cols - 1 (cols <= 8) of type T. */
XI_INLINE void gq_tile(const int T, const int R, float *y, int64_t ldy, const uint8_t *a0,
                       size_t as, const uint8_t *w0, size_t rb, int cols, int64_t nb,
                       const uint8_t *pf) {
    const int bb = t_block_bytes(T), ab = t_act_bytes(T), mk = t_min(T);
    const uint8_t *wp[8];
    for (int c = 0; c < 8; c++) wp[c] = w0 + (size_t)(c < cols ? c : cols - 1) * rb;
    __m256 acc[RT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *aq[RT];
        __m256i pre[RT], part[RT][8];
        float da[RT], s[RT];
        for (int r = 0; r < R; r++) {
            const uint8_t *ablk = a0 + (size_t)r * as + (size_t)i * (size_t)ab;
            aq[r] = ablk + t_act_q(T);
            pre[r] = act_pre(T, ablk);
            if (T >= T_Q4_K)
                memcpy(&da[r], ablk, 4);
            else
                da[r] = f16at(ablk);
            s[r] = mk == MIN_Q81 ? f16at(ablk + 2) : 0.0f;
        }
        prefetch_block(pf, i, bb); /* one tile ahead all the way */
        /* the scales go through the stack, stored before the integer work and read after it
         * (as in gq_tile_lc: read at once, the narrow stores stall the wide load) */
        uint16_t dh[8], mh[8] = {0};
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            memcpy(&dh[c], wp[c] + (size_t)i * (size_t)bb + t_d_off(T), 2);
            if (mk != MIN_NONE) memcpy(&mh[c], wp[c] + (size_t)i * (size_t)bb + t_m_off(T), 2);
        }
        int32_t sc[8][8];
        int16_t mn[8][8];
        if (T == T_Q4_K || T == T_Q5_K) k45_scales8(wp, (size_t)i * (size_t)bb, sc, mn);
        /* unrolled for the small 32-value blocks; a K block's code is long enough */
        if (t_values(T) == 32) {
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) col_block(T, R, wp[c] + (size_t)i * (size_t)bb, aq, pre, sc, mn, part, c);
        } else if (T == T_Q4_K || T == T_Q5_K) { /* two columns an iteration: one-row Q4_K 7% faster */
#pragma GCC unroll 2
            for (int c = 0; c < 8; c++) col_block(T, R, wp[c] + (size_t)i * (size_t)bb, aq, pre, sc, mn, part, c);
        } else { /* Q6_K: 7% slower so */
#pragma GCC unroll 1
            for (int c = 0; c < 8; c++) col_block(T, R, wp[c] + (size_t)i * (size_t)bb, aq, pre, sc, mn, part, c);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
        __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)mh));
        if (mk == MIN_Q81) dmin = _mm256_xor_ps(dmin, _mm256_set1_ps(-0.0f)); /* dmin = -m */
        if (mk == MIN_NONE) dmin = _mm256_setzero_ps();
        for (int r = 0; r < R; r++) {
            __m256i lo, hi, sumi, mins;
            reduce8(part[r], &lo, &hi);
            if (mk == MIN_K) {
                sumi = lo, mins = hi;
            } else {
                sumi = _mm256_add_epi32(lo, hi), mins = _mm256_setzero_si256();
            }
            if (t_offset(T)) sumi = _mm256_sub_epi32(sumi, pre[r]);
            const __m256 dav = _mm256_set1_ps(da[r]);
            const __m256 t = _mm256_mul_ps(_mm256_mul_ps(d, dav), _mm256_cvtepi32_ps(sumi));
            const __m256 m = mk == MIN_Q81 ? _mm256_mul_ps(dmin, _mm256_set1_ps(s[r]))
                                           : _mm256_mul_ps(_mm256_mul_ps(dmin, dav), _mm256_cvtepi32_ps(mins));
            acc[r] = _mm256_add_ps(acc[r], _mm256_sub_ps(t, m));
        }
    }
    for (int r = 0; r < R; r++) {
        if (cols == 8) {
            _mm256_storeu_ps(y + r * ldy, acc[r]);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, acc[r]);
            memcpy(y + r * ldy, tmp, (size_t)cols * 4);
        }
    }
}

/* ---- 32-value blocks with lanes as columns (Q4_0, Q5_0, Q8_0) ----
 * The tile above turns each column's products into a vector and then needs a vphaddd tree
 * per row and block to bring the 8 columns together: for 32-value blocks that reduction, not
 * the products, was most of the work. Here the 8 columns' codes of a block are transposed in
 * registers (an 8 x 4-byte transpose of each 16 bytes) so that each 32-bit lane holds 4
 * consecutive codes of one column; a row's 4 activation codes are broadcast to every lane,
 * and one vpmaddubsw adds 4 products into each column's lane. After the block's 8 steps lane
 * c holds column c's sumi: no reduction at all. Q8_0 with one row keeps the tile above (its
 * transposes cost more than the reduction there; measured).
 * Q4_0, Q5_0: the stored codes u = q + o (o = 8, 16) times a, summed in the two int16 halves
 * of each lane, which start at -o * (the sum of the activation codes that half will meet:
 * those at k % 4 < 2 for the low half, the others for the high; gq_run's table, once per call).
 * After any number of steps a half holds sum_done (u - o) a - o sum_rest a, whose 16 terms
 * are each at most o * 127 in size: |half| <= 16 * 16 * 127 = 32512 < 32767 (Q5_0; Q4_0
 * half that), so int16 never wraps and one vpmaddwd by 1 gives sumi. Q5_0's fifth bits come
 * from the 8 columns' 32-bit qh: each step's byte of qh shuffled to the 4 bytes of its lane,
 * tested against the 4 bits of those values. Q8_0: vpabsb / vpsignb as above, each step
 * widened by vpmaddwd (|pair| <= 32512).
 * The float steps are the oracle's: acc += (d * da) * (float)sumi - minterm, where the
 * minterm of these types is (0 * da) * 0, +0 for every finite da; gq_run takes this tile only
 * when every da of the rows is finite (else the tile above, which forms it). */

/* The 16 bytes at b + c * rb + off of the 8 columns c: v[g] lane c = bytes 4g..4g+3 of
 * column c. */
XI_INLINE void cols_t16(const uint8_t *b, size_t rb, int off, __m256i *v) {
    __m256i y[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        y[j] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b + j * rb + off))),
                                       _mm_loadu_si128((const __m128i *)(b + (j + 4) * rb + off)), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
    v[0] = _mm256_unpacklo_epi64(t0, t2);
    v[1] = _mm256_unpackhi_epi64(t0, t2);
    v[2] = _mm256_unpacklo_epi64(t1, t3);
    v[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* The sum of each lane's two int16 halves as an int32, on the shift ports (vpmaddwd by 1
 * would take the multiplier the tiles are bound by). */
XI_INLINE __m256i hsum16(__m256i s) {
    return _mm256_add_epi32(_mm256_srai_epi32(_mm256_slli_epi32(s, 16), 16), _mm256_srai_epi32(s, 16));
}

XI_INLINE __m256i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The 32 bits at b + c * rb + off of the 8 columns, one per lane. */
XI_INLINE __m256i cols_u32(const uint8_t *b, size_t rb, int off) {
    int32_t u[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) memcpy(&u[c], b + c * rb + off, 4);
    return _mm256_setr_epi32(u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7]);
}

/* ---- the packed layout (gq_pack.h: w->block == 8) ----
 * A packed block of 8 columns starts with their f16 factors (16 bytes each), then holds the
 * block's other bytes as 4-byte units, one column per lane: what cols_t16 / cols_u32 make of
 * the stored rows is one load there. t_lead: the bytes of factors before the units in the
 * stored block; t_nf: the factors (the packed types only: Q4_0, Q5_0, Q8_0, Q4_K, Q6_K). */
XI_INLINE int t_lead(int T) { return T == T_Q6_K ? 0 : T == T_Q4_K ? 4 : 2; }
XI_INLINE int t_nf(int T) { return T == T_Q4_K ? 2 : 1; }

XI_INLINE const uint8_t *pk_unit(int T, const uint8_t *b, int off) {
    return b + 16 * t_nf(T) + 32 * ((off - t_lead(T)) / 4);
}

/* cols_t16 of the stored block b (columns rb apart), or the same 4 vectors of the packed
 * block b. */
XI_INLINE void src_t16(int T, int pk, const uint8_t *b, size_t rb, int off, __m256i *v) {
    if (!pk) {
        cols_t16(b, rb, off, v);
        return;
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) v[g] = _mm256_loadu_si256((const __m256i *)(pk_unit(T, b, off) + 32 * g));
}

XI_INLINE __m256i src_u32(int T, int pk, const uint8_t *b, size_t rb, int off) {
    return pk ? _mm256_loadu_si256((const __m256i *)pk_unit(T, b, off)) : cols_u32(b, rb, off);
}

/* A vpshufb control that gives each 32-bit lane bytes b0..b3 of the same lane (-1: zero). */
XI_INLINE __m256i lane_bytes(int b0, int b1, int b2, int b3) {
    const uint32_t p = (uint32_t)(b0 < 0 ? 0x80 : b0) | (uint32_t)(b1 < 0 ? 0x80 : b1) << 8 |
                       (uint32_t)(b2 < 0 ? 0x80 : b2) << 16 | (uint32_t)(b3 < 0 ? 0x80 : b3) << 24;
    return _mm256_add_epi8(_mm256_set1_epi32((int)p), _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                                                 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
}

/* Q4_K's six-bit scales and mins of 8 columns, lanes as columns, from the 3 units of their
 * 12 bytes (u[0..2]: lane c = bytes 4..7, 8..11, 12..15 of column c's block; see k45_scales8
 * for the bit layout): b[0] lane c = column c's scales 0-3 as bytes, b[1] scales 4-7, b[2]
 * mins 0-3, b[3] mins 4-7. k4_sc of b gives sub-block j's scale in both int16 halves of each
 * lane (the vpmaddwd operand), k4_mn mins 2t, 2t + 1 as int16; one vpshufb each, made where
 * they are used (all twelve made at once stay live across the block and spill). */
XI_INLINE void k4_bytes_lc(const __m256i *u, __m256i *b) {
    const __m256i m6 = mask8(0x3f), m4 = mask8(15), m30 = mask8(0x30);
    b[0] = _mm256_and_si256(u[0], m6);
    b[1] = _mm256_or_si256(_mm256_and_si256(u[2], m4), _mm256_and_si256(_mm256_srli_epi32(u[0], 2), m30));
    b[2] = _mm256_and_si256(u[1], m6);
    b[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u[2], 4), m4),
                           _mm256_and_si256(_mm256_srli_epi32(u[1], 2), m30));
}

XI_INLINE __m256i k4_sc(const __m256i *b, int j) {
    return _mm256_shuffle_epi8(b[j / 4], lane_bytes(j % 4, -1, j % 4, -1));
}

XI_INLINE __m256i k4_mn(const __m256i *b, int t) {
    return _mm256_shuffle_epi8(b[2 + t / 2], lane_bytes(2 * (t % 2), -1, 2 * (t % 2) + 1, -1));
}

/* Q6_K's four code vectors of group (h, g) of a packed block b (gq_pack.h: triplets): c[k]
 * lane c = column c's codes of values 128 h + 32 k + 4 g.. (k < 4). */
XI_INLINE void q6_triplet(const uint8_t *b, int h, int g, __m256i *c) {
    const uint8_t *v = b + 16 + 96 * (8 * h + g);
    const __m256i v0 = _mm256_loadu_si256((const __m256i *)v), v1 = _mm256_loadu_si256((const __m256i *)(v + 32));
    const __m256i v2 = _mm256_loadu_si256((const __m256i *)(v + 64)), m6 = mask8(0x3f);
    c[0] = _mm256_and_si256(v0, m6);
    c[1] = _mm256_and_si256(v1, m6);
    c[2] = _mm256_and_si256(v2, m6);
    /* each byte's top two bits alone, shifted down within its 16-bit lane (no bit crosses a
     * byte): one mask register, not four */
    c[3] = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m6, v0), 6),
                                           _mm256_srli_epi16(_mm256_andnot_si256(m6, v1), 4)),
                           _mm256_srli_epi16(_mm256_andnot_si256(m6, v2), 2));
}

/* Q6_K's int8 scale of sub-block t of 8 columns in both int16 halves of each lane, from the
 * unit of their scales 4 (t / 4).. (lane c = column c's 4 scale bytes). */
XI_INLINE __m256i q6_scale_of(__m256i q, int t) {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(q, lane_bytes(-1, t % 4, -1, t % 4)), 8);
}


/* Q5_0: bytes 0x10 where the fifth bit of value 4g + j (j the byte in the lane) is set, from
 * the columns' qh h; hi: of value 16 + 4g + j. */
XI_INLINE __m256i fifth_lc(__m256i h, int g, int hi) {
    const __m256i at = _mm256_add_epi8(_mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                                        0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
                                       _mm256_set1_epi8((char)(2 * hi + (g >> 1))));
    const __m256i bit = _mm256_set1_epi32((int)(0x08040201u << (4 * (g & 1))));
    const __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(h, at), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(t, bit), mask8(0x10));
}

/* Per row and block, once per call (scratch slot 10): the activation scale da as f32 and a
 * few int32 of terms the tiles need (tab[(r * nb + i) * per + j]; Q4_0 / Q5_0: one, the start
 * of the int16 halves: low -o * the sum of the codes at k % 4 < 2, high of the others). */
typedef struct {
    const float *da;
    const int32_t *tab;
    int64_t nb;
} lc_rows;

/* 8 whole columns (a tail of fewer goes to gq_tile), stored or packed (pk). */
XI_INLINE void gq_tile_lc(const int T, const int pk, const int R, float *y, int64_t ldy,
                          const uint8_t *a0, size_t as, const lc_rows *lr, const uint8_t *w0,
                          size_t rb, int64_t nb, const uint8_t *pf) {
    const int bb = t_block_bytes(T), ab = t_act_bytes(T);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[RT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w0 + (size_t)i * (size_t)bb * (pk ? 8 : 1), *aq[RT];
        for (int r = 0; r < R; r++) aq[r] = a0 + (size_t)r * as + (size_t)i * (size_t)ab + 2;
        prefetch_block(pf, i, bb);
        /* the 8 scales go through the stack: stored here, read back after the integer work,
         * when the stores have long left the store buffer (read at once, the narrow stores
         * cannot forward to the wide load and the tile stalled on it); packed: one load */
        uint16_t dh[8];
        if (!pk)
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) memcpy(&dh[c], b + c * rb, 2);
        __m256i s[RT];
        if (T == T_Q4_0 || T == T_Q5_0) {
            __m256i v[4], h = _mm256_setzero_si256();
            src_t16(T, pk, b, rb, T == T_Q5_0 ? 6 : 2, v);
            if (T == T_Q5_0) h = src_u32(T, pk, b, rb, 2);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) s[r] = _mm256_set1_epi32(lr->tab[r * lr->nb + i]);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                __m256i lo = _mm256_and_si256(v[g], mask8(15));
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v[g], 4), mask8(15));
                if (T == T_Q5_0) {
                    lo = _mm256_or_si256(lo, fifth_lc(h, g, 0));
                    hi = _mm256_or_si256(hi, fifth_lc(h, g, 1));
                }
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    s[r] = _mm256_add_epi16(s[r], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(aq[r] + 4 * g)),
                                                                   _mm256_maddubs_epi16(hi, bcast4(aq[r] + 16 + 4 * g))));
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) s[r] = _mm256_madd_epi16(s[r], ones);
        } else { /* T_Q8_0 */
            __m256i v[8];
            src_t16(T, pk, b, rb, 2, v);
            src_t16(T, pk, b, rb, 18, v + 4);
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m256i aw = _mm256_abs_epi8(v[g]);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m256i p = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(aq[r] + 4 * g), v[g])), ones);
                    s[r] = g ? _mm256_add_epi32(s[r], p) : p;
                }
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk ? (const void *)b : (const void *)dh)));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(lr->da[r * lr->nb + i]));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s[r])));
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy, acc[r]);
}

/* lr for rows [0, rows) of act (scratch slot 10); 0 when a da is not finite or out of memory. */
XI_INLINE int lc_prepare(const int T, const uint8_t *act, size_t as, int64_t rows, int64_t nb,
                         lc_rows *lr) {
    const int ab = t_act_bytes(T);
    float *da = xi_kernel_scratch(10, (size_t)(rows * nb) * 8);
    if (!da) return 0;
    int32_t *init = (int32_t *)(da + rows * nb);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *ablk = act + (size_t)r * as + (size_t)i * (size_t)ab;
            const float f = f16at(ablk);
            if (!isfinite(f)) return 0;
            da[r * nb + i] = f;
            int32_t s0 = 0, s1 = 0;
            for (int k = 0; k < 32; k++) {
                const int8_t q = (int8_t)ablk[2 + k];
                if (k % 4 < 2)
                    s0 += q;
                else
                    s1 += q;
            }
            const int o = t_offset(T); /* |o * s| <= 16 * 16 * 127: an int16 */
            init[r * nb + i] = (int32_t)((uint32_t)(uint16_t)(-o * s0) | (uint32_t)(uint16_t)(-o * s1) << 16);
        }
    *lr = (lc_rows){da, init, nb};
    return 1;
}

/* ---- lanes as columns over many rows: a transposed panel ----
 * With many rows each 4-row tile transposed the same 8 columns again (16 times per chunk of
 * 64 rows). gq_run instead transposes a column tile once per row chunk into this thread's
 * scratch (slot 11), as the vectors the steps read (step g: Q4_0 / Q5_0 the low and the high
 * codes, fifth bits in; Q8_0 |codes| and the codes), then the 8 scales as f32, and every row
 * tile of the chunk reads them from L1 / L2. Same integer sums, same float steps. */
XI_INLINE int lcp_vecs(int T) { return T == T_Q8_0 ? 17 : 9; } /* per block, scales included */

XI_INLINE void lcp_fill(const int T, const int pk, const uint8_t *w0, size_t rb, int64_t nb,
                        const uint8_t *pf, __m256i *p) {
    const int bb = t_block_bytes(T);
    for (int64_t i = 0; i < nb; i++, p += lcp_vecs(T)) {
        const uint8_t *b = w0 + (size_t)i * (size_t)bb * (pk ? 8 : 1);
        prefetch_block(pf, i, bb);
        uint16_t dh[8];
        if (!pk)
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) memcpy(&dh[c], b + c * rb, 2);
        if (T == T_Q8_0) {
            __m256i v[8];
            src_t16(T, pk, b, rb, 2, v);
            src_t16(T, pk, b, rb, 18, v + 4);
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                p[2 * g] = _mm256_abs_epi8(v[g]);
                p[2 * g + 1] = v[g];
            }
        } else {
            __m256i v[4], h = _mm256_setzero_si256();
            src_t16(T, pk, b, rb, T == T_Q5_0 ? 6 : 2, v);
            if (T == T_Q5_0) h = src_u32(T, pk, b, rb, 2);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                __m256i lo = _mm256_and_si256(v[g], mask8(15));
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v[g], 4), mask8(15));
                if (T == T_Q5_0) {
                    lo = _mm256_or_si256(lo, fifth_lc(h, g, 0));
                    hi = _mm256_or_si256(hi, fifth_lc(h, g, 1));
                }
                p[2 * g] = lo;
                p[2 * g + 1] = hi;
            }
        }
        p[lcp_vecs(T) - 1] = _mm256_castps_si256(
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk ? (const void *)b : (const void *)dh))));
    }
}

XI_INLINE void gq_tile_lcp(const int T, const int R, float *y, int64_t ldy, const uint8_t *a0,
                           size_t as, const lc_rows *lr, const __m256i *p, int64_t nb) {
    const int ab = t_act_bytes(T);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[RT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, p += lcp_vecs(T)) {
        const uint8_t *aq[RT];
        for (int r = 0; r < R; r++) aq[r] = a0 + (size_t)r * as + (size_t)i * (size_t)ab + 2;
        __m256i s[RT];
        if (T == T_Q8_0) {
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m256i q = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(p[2 * g], _mm256_sign_epi8(bcast4(aq[r] + 4 * g), p[2 * g + 1])), ones);
                    s[r] = g ? _mm256_add_epi32(s[r], q) : q;
                }
        } else {
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) s[r] = _mm256_set1_epi32(lr->tab[r * lr->nb + i]);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    s[r] = _mm256_add_epi16(s[r], _mm256_add_epi16(_mm256_maddubs_epi16(p[2 * g], bcast4(aq[r] + 4 * g)),
                                                                   _mm256_maddubs_epi16(p[2 * g + 1], bcast4(aq[r] + 16 + 4 * g))));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) s[r] = hsum16(s[r]);
        }
        const __m256 d = _mm256_castsi256_ps(p[lcp_vecs(T) - 1]);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(lr->da[r * lr->nb + i]));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s[r])));
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy, acc[r]);
}

/* ---- Q4_K over many rows: lanes as columns from a panel ----
 * The same scheme for Q4_K's 256-value blocks. A sub-block s of 32 values is 8 steps of 4
 * codes per lane (codes 0..15: |int16 sum| <= 8 * 2 * 15 * 127 = 30480), then one vpmaddwd by
 * the columns' scales of s (an int16 pair per lane) adds sc[s] * (its products) to the lane's
 * int32 sumi; the mins term is 4 vpmaddwd of the columns' (m[2t], m[2t+1]) pairs by the row's
 * (B[2t], B[2t+1]), B[s] the activation's sum over sub-block s (|B| <= 32 * 127: an int16).
 * Per column tile and row chunk the panel holds, per block: the 64 code vectors (sub-block s,
 * step g at 8s + g), the 8 scale vectors, the 4 min-pair vectors and d, dmin as f32. The
 * float steps are the oracle's and the other tile's: acc += (d * da) * sumi - (dmin * da) * mins
 * (nothing to assume about da here: the minterm is formed). */
enum { K4P_VECS = 78 };

XI_INLINE void k4p_fill(const int pk, const uint8_t *w0, size_t rb, int64_t nb, const uint8_t *pf, __m256i *p) {
    const int bb = t_block_bytes(T_Q4_K);
    for (int64_t i = 0; i < nb; i++, p += K4P_VECS) {
        const uint8_t *b = w0 + (size_t)i * (size_t)bb * (pk ? 8 : 1);
        prefetch_block(pf, i, bb);
#pragma GCC unroll 1
        for (int c4 = 0; c4 < 4; c4++) {
            __m256i v[8];
            src_t16(T_Q4_K, pk, b, rb, 16 + 32 * c4, v);
            src_t16(T_Q4_K, pk, b, rb, 32 + 32 * c4, v + 4);
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                p[16 * c4 + g] = _mm256_and_si256(v[g], mask8(15));
                p[16 * c4 + 8 + g] = _mm256_and_si256(_mm256_srli_epi16(v[g], 4), mask8(15));
            }
        }
        /* the scales and min pairs, lanes as columns */
        __m256i u[4], sb[4];
        src_t16(T_Q4_K, pk, b, rb, 4, u);
        k4_bytes_lc(u, sb);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) p[64 + j] = k4_sc(sb, j);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) p[72 + t] = k4_mn(sb, t);
        __m128i dh, mh;
        if (pk) {
            dh = _mm_loadu_si128((const __m128i *)b), mh = _mm_loadu_si128((const __m128i *)(b + 16));
        } else {
            uint16_t d16[8], m16[8];
            for (int c = 0; c < 8; c++) {
                memcpy(&d16[c], b + c * rb, 2);
                memcpy(&m16[c], b + c * rb + 2, 2);
            }
            dh = _mm_loadu_si128((const __m128i *)d16), mh = _mm_loadu_si128((const __m128i *)m16);
        }
        p[76] = _mm256_castps_si256(_mm256_cvtph_ps(dh));
        p[77] = _mm256_castps_si256(_mm256_cvtph_ps(mh));
    }
}

XI_INLINE int k4p_prepare(const uint8_t *act, size_t as, int64_t rows, int64_t nb, lc_rows *kr) {
    const int ab = t_act_bytes(T_Q4_K);
    float *da = xi_kernel_scratch(10, (size_t)(rows * nb) * 20);
    if (!da) return 0;
    int32_t *tab = (int32_t *)(da + rows * nb);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *ablk = act + (size_t)r * as + (size_t)i * (size_t)ab;
            memcpy(&da[r * nb + i], ablk, 4);
            int16_t bs[16];
            memcpy(bs, ablk + 260, 32);
            for (int t = 0; t < 4; t++) {
                const int b0 = bs[4 * t] + bs[4 * t + 1], b1 = bs[4 * t + 2] + bs[4 * t + 3];
                tab[(r * nb + i) * 4 + t] = (int32_t)((uint32_t)(uint16_t)b0 | (uint32_t)(uint16_t)b1 << 16);
            }
        }
    *kr = (lc_rows){da, tab, nb};
    return 1;
}

XI_INLINE void gq_tile_k4p(const int R, float *y, int64_t ldy, const uint8_t *a0, size_t as,
                           const lc_rows *kr, const __m256i *p, int64_t nb) {
    const int ab = t_act_bytes(T_Q4_K);
    __m256 acc[RT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, p += K4P_VECS) {
        const uint8_t *aq[RT];
        for (int r = 0; r < R; r++) aq[r] = a0 + (size_t)r * as + (size_t)i * (size_t)ab + 4;
        __m256i si[RT], t[RT];
#pragma GCC unroll 1
        for (int j = 0; j < 8; j++) {
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    const __m256i q = _mm256_maddubs_epi16(p[8 * j + g], bcast4(aq[r] + 32 * j + 4 * g));
                    t[r] = g ? _mm256_add_epi16(t[r], q) : q;
                }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256i q = _mm256_madd_epi16(t[r], p[64 + j]);
                si[r] = j ? _mm256_add_epi32(si[r], q) : q;
            }
        }
        const __m256 d = _mm256_castsi256_ps(p[76]), dmin = _mm256_castsi256_ps(p[77]);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const int32_t *bp = kr->tab + (r * kr->nb + i) * 4;
            const __m256i mins = _mm256_add_epi32(
                _mm256_add_epi32(_mm256_madd_epi16(p[72], _mm256_set1_epi32(bp[0])), _mm256_madd_epi16(p[73], _mm256_set1_epi32(bp[1]))),
                _mm256_add_epi32(_mm256_madd_epi16(p[74], _mm256_set1_epi32(bp[2])), _mm256_madd_epi16(p[75], _mm256_set1_epi32(bp[3]))));
            const __m256 dav = _mm256_set1_ps(kr->da[r * kr->nb + i]);
            const __m256 tt = _mm256_mul_ps(_mm256_mul_ps(d, dav), _mm256_cvtepi32_ps(si[r]));
            const __m256 m = _mm256_mul_ps(_mm256_mul_ps(dmin, dav), _mm256_cvtepi32_ps(mins));
            acc[r] = _mm256_add_ps(acc[r], _mm256_sub_ps(tt, m));
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy, acc[r]);
}

/* ---- Q6_K over many rows: the same panel scheme ----
 * Sub-blocks of 16 values with int8 scales; codes u = q + 32 (0..63). Each int16 half of a
 * lane starts at -32 * (the sum of the 8 activation codes it meets in the sub-block: those at
 * k % 4 < 2 for the low half), so after any of the 4 steps it holds sum_done (u - 32) a -
 * 32 sum_rest a, 8 terms of at most 32 * 127: |half| <= 32512; one vpmaddwd by the columns'
 * scales of the sub-block then adds sc * sum (u - 32) a, the oracle's integer, to sumi.
 * Panel per block: 64 code vectors (values 32j + 4g.. at 8j + g), 16 scale vectors, d. */
enum { Q6P_VECS = 81 };

XI_INLINE void q6p_fill(const int pk, const uint8_t *w0, size_t rb, int64_t nb, const uint8_t *pf, __m256i *p) {
    const int bb = t_block_bytes(T_Q6_K);
    for (int64_t i = 0; i < nb; i++, p += Q6P_VECS) {
        const uint8_t *b = w0 + (size_t)i * (size_t)bb * (pk ? 8 : 1);
        prefetch_block(pf, i, bb);
        if (pk)
#pragma GCC unroll 1
            for (int hg = 0; hg < 16; hg++) {
                __m256i c[4];
                q6_triplet(b, hg / 8, hg % 8, c);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) p[8 * (4 * (hg / 8) + k) + hg % 8] = c[k];
            }
#pragma GCC unroll 1
        for (int j = 0; j < 8 && !pk; j++) {
            const int h = j / 4, k = j % 4;
            __m256i l[8], q[8];
            src_t16(T_Q6_K, pk, b, rb, 64 * h + 32 * (k & 1), l);
            src_t16(T_Q6_K, pk, b, rb, 64 * h + 32 * (k & 1) + 16, l + 4);
            src_t16(T_Q6_K, pk, b, rb, 128 + 32 * h, q);
            src_t16(T_Q6_K, pk, b, rb, 144 + 32 * h, q + 4);
            for (int g = 0; g < 8; g++) {
                const __m256i lo = _mm256_and_si256(k < 2 ? l[g] : _mm256_srli_epi16(l[g], 4), mask8(15));
                const __m256i hi = k == 0 ? _mm256_slli_epi16(q[g], 4) : k == 1 ? _mm256_slli_epi16(q[g], 2)
                                   : k == 2 ? q[g] : _mm256_srli_epi16(q[g], 2);
                p[8 * j + g] = _mm256_or_si256(lo, _mm256_and_si256(hi, mask8(0x30)));
            }
        }
        __m256i sq[4];
        src_t16(T_Q6_K, pk, b, rb, 192, sq);
#pragma GCC unroll 16
        for (int t = 0; t < 16; t++) p[64 + t] = q6_scale_of(sq[t / 4], t);
        __m128i dh;
        if (pk) {
            dh = _mm_loadu_si128((const __m128i *)b);
        } else {
            uint16_t d16[8];
            for (int c = 0; c < 8; c++) memcpy(&d16[c], b + c * rb + 208, 2);
            dh = _mm_loadu_si128((const __m128i *)d16);
        }
        p[80] = _mm256_castps_si256(_mm256_cvtph_ps(dh));
    }
}

/* Q6_K rows: da and, per sub-block, the int16 halves' start (scratch slot 10). */
XI_INLINE int q6p_prepare(const uint8_t *act, size_t as, int64_t rows, int64_t nb, lc_rows *kr) {
    const int ab = t_act_bytes(T_Q6_K);
    float *da = xi_kernel_scratch(10, (size_t)(rows * nb) * 68);
    if (!da) return 0;
    int32_t *init = (int32_t *)(da + rows * nb);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *ablk = act + (size_t)r * as + (size_t)i * (size_t)ab;
            memcpy(&da[r * nb + i], ablk, 4);
            for (int t = 0; t < 16; t++) {
                int32_t s0 = 0, s1 = 0;
                for (int k = 0; k < 16; k++) {
                    const int8_t q = (int8_t)ablk[4 + 16 * t + k];
                    if (k % 4 < 2)
                        s0 += q;
                    else
                        s1 += q;
                }
                init[(r * nb + i) * 16 + t] = (int32_t)((uint32_t)(uint16_t)(-32 * s0) | (uint32_t)(uint16_t)(-32 * s1) << 16);
            }
        }
    *kr = (lc_rows){da, init, nb};
    return 1;
}

XI_INLINE void gq_tile_q6p(const int R, float *y, int64_t ldy, const uint8_t *a0, size_t as,
                           const lc_rows *kr, const __m256i *p, int64_t nb) {
    const int ab = t_act_bytes(T_Q6_K);
    const __m256 zero = _mm256_setzero_ps();
    __m256 acc[RT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, p += Q6P_VECS) {
        const uint8_t *aq[RT];
        for (int r = 0; r < R; r++) aq[r] = a0 + (size_t)r * as + (size_t)i * (size_t)ab + 4;
        __m256i si[RT], t[RT];
#pragma GCC unroll 1
        for (int sb = 0; sb < 16; sb++) {
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) t[r] = _mm256_set1_epi32(kr->tab[(r * kr->nb + i) * 16 + sb]);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++)
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    t[r] = _mm256_add_epi16(t[r], _mm256_maddubs_epi16(p[4 * sb + g], bcast4(aq[r] + 16 * sb + 4 * g)));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const __m256i q = _mm256_madd_epi16(t[r], p[64 + sb]);
                si[r] = sb ? _mm256_add_epi32(si[r], q) : q;
            }
        }
        const __m256 d = _mm256_castsi256_ps(p[80]);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 dav = _mm256_set1_ps(kr->da[r * kr->nb + i]);
            const __m256 tt = _mm256_mul_ps(_mm256_mul_ps(d, dav), _mm256_cvtepi32_ps(si[r]));
            const __m256 m = _mm256_mul_ps(_mm256_mul_ps(zero, dav), zero); /* the oracle's (0 * da) * 0 */
            acc[r] = _mm256_add_ps(acc[r], _mm256_sub_ps(tt, m));
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(y + r * ldy, acc[r]);
}

/* The panels by type: which types have one, its vectors and row terms per block. */
XI_INLINE int t_panel(int T) { return T == T_Q4_0 || T == T_Q5_0 || T == T_Q8_0 || T == T_Q4_K || T == T_Q6_K; }
XI_INLINE int panel_vecs(int T) { return T == T_Q6_K ? Q6P_VECS : T == T_Q4_K ? K4P_VECS : lcp_vecs(T); }
XI_INLINE int panel_per(int T) { return T == T_Q6_K ? 16 : T == T_Q4_K ? 4 : 1; }

XI_INLINE int panel_prepare(const int T, const uint8_t *act, size_t as, int64_t rows, int64_t nb,
                            lc_rows *lr) {
    return T == T_Q6_K ? q6p_prepare(act, as, rows, nb, lr)
           : T == T_Q4_K ? k4p_prepare(act, as, rows, nb, lr) : lc_prepare(T, act, as, rows, nb, lr);
}

XI_INLINE void panel_fill(const int T, const int pk, const uint8_t *w0, size_t rb, int64_t nb,
                          const uint8_t *pf, __m256i *p) {
    if (T == T_Q6_K)
        q6p_fill(pk, w0, rb, nb, pf, p);
    else if (T == T_Q4_K)
        k4p_fill(pk, w0, rb, nb, pf, p);
    else
        lcp_fill(T, pk, w0, rb, nb, pf, p);
}

XI_INLINE void panel_tile(const int T, const int R, float *y, int64_t ldy, const uint8_t *a0,
                          size_t as, const lc_rows *lr, const __m256i *p, int64_t nb) {
    if (T == T_Q6_K)
        gq_tile_q6p(R, y, ldy, a0, as, lr, p, nb);
    else if (T == T_Q4_K)
        gq_tile_k4p(R, y, ldy, a0, as, lr, p, nb);
    else
        gq_tile_lcp(T, R, y, ldy, a0, as, lr, p, nb);
}

/* The full 4-row panel tile of each type as a function of its own: inlined into gq_run's
 * loops it was register-allocated around them and spilled its accumulators. */
#define PANEL_TILE4(T)                                                                         \
    static __attribute__((noinline)) void panel_tile4_##T(float *y, int64_t ldy, const uint8_t *a0, \
                                                          size_t as, const lc_rows *lr,        \
                                                          const __m256i *p, int64_t nb) {      \
        panel_tile(T, 4, y, ldy, a0, as, lr, p, nb);                                           \
    }
PANEL_TILE4(T_Q4_0)
PANEL_TILE4(T_Q5_0)
PANEL_TILE4(T_Q8_0)
PANEL_TILE4(T_Q4_K)
PANEL_TILE4(T_Q6_K)

XI_INLINE void panel_tile4(const int T, float *y, int64_t ldy, const uint8_t *a0, size_t as,
                           const lc_rows *lr, const __m256i *p, int64_t nb) {
    switch (T) {
    case T_Q4_0: panel_tile4_T_Q4_0(y, ldy, a0, as, lr, p, nb); break;
    case T_Q5_0: panel_tile4_T_Q5_0(y, ldy, a0, as, lr, p, nb); break;
    case T_Q8_0: panel_tile4_T_Q8_0(y, ldy, a0, as, lr, p, nb); break;
    case T_Q4_K: panel_tile4_T_Q4_K(y, ldy, a0, as, lr, p, nb); break;
    default: panel_tile4_T_Q6_K(y, ldy, a0, as, lr, p, nb); break;
    }
}

/* The one-row (decode) Q6_K reduction tile as a function of its own, like the panel tiles
 * (its column loop then schedules with the pressure-aware scheduler). */
static __attribute__((noinline)) void gq_tile1_q6(float *y, int64_t ldy, const uint8_t *a0, size_t as,
                                                  const uint8_t *w0, size_t rb, int cols, int64_t nb,
                                                  const uint8_t *pf) {
    gq_tile(T_Q6_K, 1, y, ldy, a0, as, w0, rb, cols, nb, pf);
}

XI_INLINE void gq_tile1(const int T, float *y, int64_t ldy, const uint8_t *a0, size_t as,
                        const uint8_t *w0, size_t rb, int cols, int64_t nb, const uint8_t *pf) {
    if (T == T_Q6_K)
        gq_tile1_q6(y, ldy, a0, as, w0, rb, cols, nb, pf);
    else
        gq_tile(T, 1, y, ldy, a0, as, w0, rb, cols, nb, pf);
}

/* ---- one row of a packed Q4_K / Q6_K weight ----
 * The panel tiles' integer steps and float steps, with each code vector unpacked from the
 * packed block in registers (used by one row only, a panel would cost more to write than to
 * read) and the scales unpacked per block with lanes as columns. Functions of their own, and
 * without the pressure-aware scheduler this file is built with (GCC): it hoisted the
 * activation broadcasts and spilled them, twice the stack traffic (one row from L3, 1024 x
 * 4096, 3000 calls: Q4_K 0.33 -> 0.30 s without it, Q6_K 0.45-0.50 -> 0.45). */
#ifdef __clang__
#define PK_TILE1 static __attribute__((noinline))
#else
#define PK_TILE1 static __attribute__((noinline, optimize("no-schedule-insns")))
#endif
PK_TILE1 void pk_tile1_k4(float *y, const uint8_t *a0, const lc_rows *kr,
                                                  const uint8_t *w0, int64_t nb, const uint8_t *pf) {
    const int ab = t_act_bytes(T_Q4_K), bb = t_block_bytes(T_Q4_K);
    const __m256i m15 = mask8(15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w0 + (size_t)i * 8 * (size_t)bb, *aq = a0 + (size_t)i * (size_t)ab + 4;
        prefetch_block(pf, i, bb);
        __m256i u[4], sb[4];
        src_t16(T_Q4_K, 1, b, 0, 4, u);
        k4_bytes_lc(u, sb);
        const uint8_t *cb = pk_unit(T_Q4_K, b, 16);
        __m256i si = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c4 = 0; c4 < 4; c4++) {
            __m256i tl = _mm256_setzero_si256(), th = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(cb + 32 * (8 * c4 + g)));
                tl = _mm256_add_epi16(tl, _mm256_maddubs_epi16(_mm256_and_si256(v, m15), bcast4(aq + 64 * c4 + 4 * g)));
                th = _mm256_add_epi16(th, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m15),
                                                               bcast4(aq + 64 * c4 + 32 + 4 * g)));
            }
            si = _mm256_add_epi32(si, _mm256_add_epi32(_mm256_madd_epi16(tl, k4_sc(sb, 2 * c4)),
                                                       _mm256_madd_epi16(th, k4_sc(sb, 2 * c4 + 1))));
        }
        const int32_t *bp = kr->tab + i * 4;
        const __m256i mins = _mm256_add_epi32(
            _mm256_add_epi32(_mm256_madd_epi16(k4_mn(sb, 0), _mm256_set1_epi32(bp[0])),
                             _mm256_madd_epi16(k4_mn(sb, 1), _mm256_set1_epi32(bp[1]))),
            _mm256_add_epi32(_mm256_madd_epi16(k4_mn(sb, 2), _mm256_set1_epi32(bp[2])),
                             _mm256_madd_epi16(k4_mn(sb, 3), _mm256_set1_epi32(bp[3]))));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 16)));
        const __m256 dav = _mm256_set1_ps(kr->da[i]);
        const __m256 tt = _mm256_mul_ps(_mm256_mul_ps(d, dav), _mm256_cvtepi32_ps(si));
        const __m256 m = _mm256_mul_ps(_mm256_mul_ps(dmin, dav), _mm256_cvtepi32_ps(mins));
        acc = _mm256_add_ps(acc, _mm256_sub_ps(tt, m));
    }
    _mm256_storeu_ps(y, acc);
}

PK_TILE1 void pk_tile1_q6(float *y, const uint8_t *a0, const lc_rows *kr,
                                                  const uint8_t *w0, int64_t nb, const uint8_t *pf) {
    const int ab = t_act_bytes(T_Q6_K), bb = t_block_bytes(T_Q6_K);
    const __m256 zero = _mm256_setzero_ps();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = w0 + (size_t)i * 8 * (size_t)bb, *aq = a0 + (size_t)i * (size_t)ab + 4;
        const int32_t *tab = kr->tab + i * 16;
        prefetch_block(pf, i, bb);
        const uint8_t *su = pk_unit(T_Q6_K, b, 192); /* the scales' units, loaded where used */
        __m256i si = _mm256_setzero_si256();
        /* per half h of the block and step g: one triplet holds values 32 j + 4 g.. for the
         * four j = 4 h + k; four sub-blocks' sums (2 j + g / 4) advance */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
                __m256i t[4];
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) t[k] = _mm256_set1_epi32(tab[2 * (4 * h + k) + half]);
#pragma GCC unroll 4
                for (int g4 = 0; g4 < 4; g4++) {
                    const int g = 4 * half + g4;
                    __m256i c[4];
                    q6_triplet(b, h, g, c);
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++)
                        t[k] = _mm256_add_epi16(t[k], _mm256_maddubs_epi16(c[k], bcast4(aq + 32 * (4 * h + k) + 4 * g)));
                }
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const int sb = 2 * (4 * h + k) + half;
                    const __m256i sq = _mm256_loadu_si256((const __m256i *)(su + 32 * (sb / 4)));
                    si = _mm256_add_epi32(si, _mm256_madd_epi16(t[k], q6_scale_of(sq, sb)));
                }
            }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b));
        const __m256 dav = _mm256_set1_ps(kr->da[i]);
        const __m256 tt = _mm256_mul_ps(_mm256_mul_ps(d, dav), _mm256_cvtepi32_ps(si));
        const __m256 m = _mm256_mul_ps(_mm256_mul_ps(zero, dav), zero); /* the oracle's (0 * da) * 0 */
        acc = _mm256_add_ps(acc, _mm256_sub_ps(tt, m));
    }
    _mm256_storeu_ps(y, acc);
}

/* The row tiles of rows [c0, c1) over the panel of columns n .. n + 7. */
XI_INLINE void panel_rows(const int T, float *y, int64_t ldy, const uint8_t *act, size_t as,
                          int64_t c0, int64_t c1, const lc_rows *lr, const __m256i *panel,
                          int64_t nb, int64_t n) {
    for (int64_t r = c0; r < c1; r += RT) {
        const lc_rows lt = {lr->da + r * nb, lr->tab + r * nb * panel_per(T), nb};
        float *yt = y + r * ldy + n;
        const uint8_t *at = act + (size_t)r * as;
        switch (XI_MIN((int64_t)RT, c1 - r)) {
        case 4: panel_tile4(T, yt, ldy, at, as, &lt, panel, nb); break;
        case 3: panel_tile(T, 3, yt, ldy, at, as, &lt, panel, nb); break;
        case 2: panel_tile(T, 2, yt, ldy, at, as, &lt, panel, nb); break;
        default: panel_tile(T, 1, yt, ldy, at, as, &lt, panel, nb); break;
        }
    }
}

/* One row of a packed Q8_0 weight, Q8_GROUPS groups of 8 columns in step. gq_tile_lc's
 * one-row tile reads one group (8 rows) at a time, a single sequential stream, which one core
 * reads well below its bandwidth (machine_limits.h): that made packed Q8_0 slower than the
 * stored rows from memory. Here every block step reads the same block of 8 groups, 8 streams
 * 8 rows apart, with gq_tile_lc's integer and float steps per group (vpsignb / vpabsb,
 * vpmaddubsw, vpmaddwd, then acc += (d * da) * (float)sumi in block order: the oracle's for a
 * finite da). Groups past ng repeat the last one and are not stored. */
enum { Q8_GROUPS = 8 };

XI_INLINE void q8_pk_row(float *y, const uint8_t *a0, const lc_rows *lr, const uint8_t *w0, size_t rb, int ng,
                         int64_t nb) {
    const uint8_t *g[Q8_GROUPS];
    for (int j = 0; j < Q8_GROUPS; j++) g[j] = w0 + (size_t)XI_MIN(j, ng - 1) * 8 * rb;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[Q8_GROUPS];
    for (int j = 0; j < Q8_GROUPS; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *aq = a0 + (size_t)i * 34 + 2;
        const __m256 dav = _mm256_set1_ps(lr->da[i]);
#pragma GCC unroll 8
        for (int j = 0; j < Q8_GROUPS; j++) {
            const uint8_t *b = g[j] + (size_t)i * 272;
            __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * u));
                const __m256i p = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(bcast4(aq + 4 * u), v)), ones);
                s = u ? _mm256_add_epi32(s, p) : p;
            }
            const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b)), dav);
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)));
        }
    }
    for (int j = 0; j < ng; j++) _mm256_storeu_ps(y + 8 * j, acc[j]);
}

/* Rows [0, rows) x columns [n0, n1) of a packed weight (the panel types only, gq_pack.h):
 * whole column tiles here, one row from the packed blocks, more through a panel filled from
 * them; the columns of a tile that n0 or n1 cut (never xi_matmul's splits, multiples of 16)
 * and rows whose activation scale is not finite (the Q4_0 / Q5_0 / Q8_0 tiles leave out the
 * oracle's minterm, finite only then) through the oracle. */
XI_INLINE void gq_run_pk(const int T, float *y, int64_t ldy, const uint8_t *act, size_t as,
                         int64_t rows, const xi_weight *w, int64_t n0, int64_t n1) {
    const size_t rb = (size_t)(w->n_in / t_values(T)) * (size_t)t_block_bytes(T);
    const int64_t nb = w->n_in / t_values(T), t0 = (n0 + 7) / 8 * 8, t1 = n1 / 8 * 8;
    if (t0 >= t1) {
        xi_matmul_gq_ref(y, ldy, act, as, rows, w, n0, n1);
        return;
    }
    if (n0 < t0) xi_matmul_gq_ref(y, ldy, act, as, rows, w, n0, t0);
    if (t1 < n1) xi_matmul_gq_ref(y, ldy, act, as, rows, w, t1, n1);
    lc_rows lr = {0};
    __m256i *panel = NULL;
    if (!panel_prepare(T, act, as, rows, nb, &lr) ||
        (rows > 1 && !(panel = xi_kernel_scratch(11, (size_t)(nb * panel_vecs(T)) * 32)))) {
        xi_matmul_gq_ref(y, ldy, act, as, rows, w, t0, t1);
        return;
    }
    if (T == T_Q8_0 && rows == 1) {
        for (int64_t n = t0; n < t1; n += 8 * Q8_GROUPS)
            q8_pk_row(y + n, act, &lr, (const uint8_t *)w->data + (size_t)n * rb, rb,
                      (int)XI_MIN((int64_t)Q8_GROUPS, (t1 - n) / 8), nb);
        return;
    }
    for (int64_t c0 = 0; c0 < rows; c0 += ROW_CHUNK) {
        const int64_t c1 = XI_MIN(rows, c0 + ROW_CHUNK);
        for (int64_t n = t0; n < t1; n += 8) {
            const uint8_t *w0 = (const uint8_t *)w->data + (size_t)n * rb;
            const uint8_t *pf = n + 8 < t1 ? w0 + 8 * rb : NULL;
            if (rows > 1) {
                panel_fill(T, 1, w0, rb, nb, pf, panel);
                panel_rows(T, y, ldy, act, as, c0, c1, &lr, panel, nb, n);
            } else if (T == T_Q4_K) {
                pk_tile1_k4(y + n, act, &lr, w0, nb, pf);
            } else if (T == T_Q6_K) {
                pk_tile1_q6(y + n, act, &lr, w0, nb, pf);
            } else {
                gq_tile_lc(T, 1, 1, y + n, ldy, act, as, &lr, w0, rb, nb, pf);
            }
        }
    }
}

/* Rows [0, rows) x columns [n0, n1): from 2 rows the panel types transpose each whole column
 * tile once per row chunk; one row of Q4_0 / Q5_0 takes the direct lanes-as-columns tile;
 * everything else (and every tail of fewer than 8 columns) the reduction tile. */
XI_INLINE void gq_run(const int T, float *y, int64_t ldy, const uint8_t *act, size_t as,
                      int64_t rows, const xi_weight *w, int64_t n0, int64_t n1) {
    if (w->block) {
        if (t_panel(T)) gq_run_pk(T, y, ldy, act, as, rows, w, n0, n1);
        else xi_matmul_gq_ref(y, ldy, act, as, rows, w, n0, n1); /* packed, no packed path */
        return;
    }
    const size_t rb = (size_t)(w->n_in / t_values(T)) * (size_t)t_block_bytes(T);
    const int64_t nb = w->n_in / t_values(T);
    lc_rows lr = {0};
    __m256i *panel = t_panel(T) && rows > 1 && panel_prepare(T, act, as, rows, nb, &lr)
                         ? xi_kernel_scratch(11, (size_t)(nb * panel_vecs(T)) * 32) : NULL;
    const int lc = (T == T_Q4_0 || T == T_Q5_0) && rows == 1 && lc_prepare(T, act, as, rows, nb, &lr);
    for (int64_t c0 = 0; c0 < rows; c0 += ROW_CHUNK) {
        const int64_t c1 = XI_MIN(rows, c0 + ROW_CHUNK);
        for (int64_t n = n0; n < n1; n += 8) {
            const int cols = (int)XI_MIN((int64_t)8, n1 - n);
            const uint8_t *w0 = (const uint8_t *)w->data + (size_t)n * rb;
            /* the columns stream from memory once per chunk: prefetch the next 8 (a hint,
             * which never faults, so the last tile may ask past n1) */
            const uint8_t *pf = n + 8 < n1 ? w0 + 8 * rb : NULL;
            if (panel && cols == 8) {
                panel_fill(T, 0, w0, rb, nb, pf, panel);
                panel_rows(T, y, ldy, act, as, c0, c1, &lr, panel, nb, n);
                continue;
            }
            if (lc && cols == 8) { /* one row */
                gq_tile_lc(T, 0, 1, y + n, ldy, act, as, &lr, w0, rb, nb, pf);
                continue;
            }
            for (int64_t r = c0; r < c1; r += RT) {
                float *yt = y + r * ldy + n;
                const uint8_t *at = act + (size_t)r * as, *pt = r == c0 ? pf : NULL;
                switch (XI_MIN((int64_t)RT, c1 - r)) {
                case 4: gq_tile(T, 4, yt, ldy, at, as, w0, rb, cols, nb, pt); break;
                case 3: gq_tile(T, 3, yt, ldy, at, as, w0, rb, cols, nb, pt); break;
                case 2: gq_tile(T, 2, yt, ldy, at, as, w0, rb, cols, nb, pt); break;
                default: gq_tile1(T, yt, ldy, at, as, w0, rb, cols, nb, pt); break;
                }
            }
        }
    }
}

#define GQ_RUN(T)                                                                              \
    static void run_##T(float *y, int64_t ldy, const uint8_t *act, size_t as, int64_t rows,     \
                        const xi_weight *w, int64_t n0, int64_t n1) {                          \
        gq_run(T, y, ldy, act, as, rows, w, n0, n1);                                           \
    }
GQ_RUN(T_Q8_0)
GQ_RUN(T_Q4_0)
GQ_RUN(T_Q4_1)
GQ_RUN(T_Q5_0)
GQ_RUN(T_Q5_1)
GQ_RUN(T_IQ4_NL)
GQ_RUN(T_Q4_K)
GQ_RUN(T_Q5_K)
GQ_RUN(T_Q6_K)
GQ_RUN(T_Q3_K)
GQ_RUN(T_Q2_K)

typedef void (*gq_fn)(float *, int64_t, const uint8_t *, size_t, int64_t, const xi_weight *,
                      int64_t, int64_t);

static gq_fn fast_path(int id) {
    switch (id) {
    case XI_GGML_Q8_0: return run_T_Q8_0;
    case XI_GGML_Q4_0: return run_T_Q4_0;
    case XI_GGML_Q4_1: return run_T_Q4_1;
    case XI_GGML_Q5_0: return run_T_Q5_0;
    case XI_GGML_Q5_1: return run_T_Q5_1;
    case XI_GGML_IQ4_NL: return run_T_IQ4_NL;
    case XI_GGML_Q4_K: return run_T_Q4_K;
    case XI_GGML_Q5_K: return run_T_Q5_K;
    case XI_GGML_Q6_K: return run_T_Q6_K;
    case XI_GGML_Q3_K: return run_T_Q3_K;
    case XI_GGML_Q2_K: return run_T_Q2_K;
    default: return NULL;
    }
}

void xi_matmul_gq_avx2(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                       const xi_weight *w, int64_t n0, int64_t n1) {
    const gq_fn f = fast_path(w->qtype->id);
    if (!f || n0 >= n1) {
        xi_matmul_gq_ref(y, ldy, act, act_stride, rows, w, n0, n1);
        return;
    }
    f(y, ldy, act, act_stride, rows, w, n0, n1);
}
