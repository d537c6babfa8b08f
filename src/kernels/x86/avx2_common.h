/* kernels/x86: inline helpers shared by the AVX2 files (compiled with -mavx2 -mfma -mf16c). */
#ifndef XI_AVX2_COMMON_H
#define XI_AVX2_COMMON_H

#include <immintrin.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/matmul_tile.h"

#define XI_INLINE static inline __attribute__((always_inline))

/* The one horizontal-sum order every AVX2 path uses, per vector:
 * ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)). avx2_hsum4 sums four vectors at once into the four
 * lanes of the result with exactly that order per vector; avx2_hsum is the one-vector form. */
XI_INLINE __m128 avx2_hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

XI_INLINE float avx2_hsum(__m256 v) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(v, v), v);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* a * b + c rounded once, as an explicit instruction so no inlined copy is contracted
 * differently from another. */
XI_INLINE float avx2_fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

/* Eight KV / weight elements of type t starting at element i, as f32. */
XI_INLINE __m256 avx2_load8(xi_dtype t, const void *p, int64_t i) {
    switch (t) {
    case XI_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    case XI_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i))),
            16));
    case XI_Q8:
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)p + i))));
    default: return _mm256_loadu_ps((const float *)p + i);
    }
}

/* exp(x) for 8 lanes: Cephes-style range reduction x = n ln2 + r and a degree-6 polynomial;
 * inputs are clamped to [-87.3, 88.3] so 2^n stays a normal float (relative error ~2e-7). */
XI_INLINE __m256 avx2_exp(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* One lane of avx2_exp: the same bits as the 8-lane form for the same input. */
XI_INLINE float avx2_exp1(float x) { return _mm256_cvtss_f32(avx2_exp(_mm256_set1_ps(x))); }

/* Store columns [lo, hi) (relative to the tile's first column) of block b, scaled for Q8. */
XI_INLINE void bstore(float *y, __m256 v, const float *sc, int b, int64_t lo, int64_t hi) {
    if (sc) v = _mm256_mul_ps(v, _mm256_loadu_ps(sc + b * 8));
    if (lo <= b * 8 && hi >= b * 8 + 8) {
        _mm256_storeu_ps(y, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    for (int64_t c = XI_MAX(lo - b * 8, 0); c < XI_MIN(hi - b * 8, 8); c++) y[c] = tmp[c];
}

/* Scales and zero points of 8 columns of a Q4_AWQ weight in the dot layout (rows of s and z, G apart) for 8 consecutive groups,
 * as one vector of the 8 columns per group: two 8 x 8 transposes instead of 16 scalar loads
 * and inserts per group and column block (what a batch-1 tile would otherwise pay). */
XI_INLINE void group_params8(__m256 sv[8], __m256i zv[8], const float *s, const uint8_t *z,
                             int64_t G) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + i * G);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]); /* c_i g0, c_i+1 g0, c_i g1, c_i+1 g1 | g4, g5 */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); /* g2, g3 | g6, g7 */
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; j++) {
            r[i + 2 * j] = _mm256_shuffle_ps(t[i + j], t[i + 2 + j], 0x44);     /* c_i..i+3 g(2j) */
            r[i + 2 * j + 1] = _mm256_shuffle_ps(t[i + j], t[i + 2 + j], 0xEE); /* g(2j+1) */
        }
    for (int j = 0; j < 4; j++) {
        sv[j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x20);
        sv[4 + j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x31);
    }
    __m128i b[8], u[4];
    for (int i = 0; i < 8; i++) b[i] = _mm_loadl_epi64((const __m128i *)(z + i * G));
    for (int i = 0; i < 4; i++) u[i] = _mm_unpacklo_epi8(b[2 * i], b[2 * i + 1]); /* c pairs */
    const __m128i v0 = _mm_unpacklo_epi16(u[0], u[1]), v1 = _mm_unpackhi_epi16(u[0], u[1]),
                  v2 = _mm_unpacklo_epi16(u[2], u[3]), v3 = _mm_unpackhi_epi16(u[2], u[3]);
    const __m128i q[4] = {_mm_unpacklo_epi32(v0, v2), _mm_unpackhi_epi32(v0, v2),
                          _mm_unpacklo_epi32(v1, v3), _mm_unpackhi_epi32(v1, v3)};
    for (int j = 0; j < 4; j++) { /* q[j]: columns 0..7 of group 2j, then of group 2j + 1 */
        zv[2 * j] = _mm256_cvtepu8_epi32(q[j]);
        zv[2 * j + 1] = _mm256_cvtepu8_epi32(_mm_srli_si128(q[j], 8));
    }
}

/* The scales and zero points of columns n..n+7 of a Q4_AWQ weight (G groups) for group g, in
 * a tile's group loop: every 8 groups the next 8 groups' come into st / zt by group_params8,
 * and past the last whole 8 by scalar loads. */
XI_INLINE void group_params(__m256 st[8], __m256i zt[8], const xi_weight *w, int64_t n, int64_t g,
                            int64_t G, __m256 *sv, __m256i *zv) {
    const float *s = w->scale + n * G + g;
    const uint8_t *z = w->zero + n * G + g;
    if (g % 8 == 0 && g + 8 <= G) group_params8(st, zt, s, z, G);
    if (g < (G & ~(int64_t)7)) {
        *sv = st[g % 8];
        *zv = zt[g % 8];
        return;
    }
    *sv = _mm256_setr_ps(s[0], s[G], s[2 * G], s[3 * G], s[4 * G], s[5 * G], s[6 * G], s[7 * G]);
    *zv = _mm256_setr_epi32(z[0], z[G], z[2 * G], z[3 * G], z[4 * G], z[5 * G], z[6 * G], z[7 * G]);
}

/* acc + (S - z * sum(x)) * d * s: a group's integer sums S of 8 columns folded in, in
 * xi_matmul_q_ref's order (x's sum xs and scale xd; the columns' zero points zv, scales sv). */
XI_INLINE __m256 group_add(__m256 acc, __m256i S, __m256i zv, __m256 sv, int32_t xs, float xd) {
    const __m256i t = _mm256_sub_epi32(S, _mm256_mullo_epi32(zv, _mm256_set1_epi32(xs)));
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(t), _mm256_set1_ps(xd)), sv, acc);
}

/* A weight prefetch of the integer matmuls (avx2_qdot.c, avx512_qdot.c): their first row tile
 * of a row block prefetches, one cache line per 64 bytes of weights, QDOT_PF_DIST bytes ahead
 * in each column block's stream (off: the offset being read in block c of blocks of bs bytes
 * at blk) and, past a block's end, the same place in the next column group, NB blocks on, as
 * the dot layout keeps them contiguous. A column block is only 4 K (Q4) or 8 K (Q8) bytes,
 * 4 to 8 short streams at once, which the hardware prefetcher follows poorly: one row of AWQ
 * 4864x896 ran at 0.4 of read bandwidth without this, 0.6-0.75 with it (AVX-512, Zen 5; 1 and
 * 4 KB ahead were slower than 2). A prefetch never faults, so the last group's run past the
 * weight is harmless. */
#define QDOT_PF_DIST 2048

/* The Q4_AWQ scales (f32) and zero points (u8) of the next column group, NB blocks of 8
 * columns from column n, a slice per group g of G: their rows are contiguous (w->scale and
 * w->zero are [n_out][G]), 8 * NB * G * 5 bytes in all. Prefetches past the weight's last
 * column never fault. */
XI_INLINE void qdot_prefetch_params(const xi_weight *w, int64_t n, int NB, int64_t g, int64_t G) {
    const size_t span = (size_t)(8 * NB), per = span * 4; /* scale bytes per group of the region */
    const char *s = (const char *)(w->scale + n * G), *z = (const char *)(w->zero + n * G);
    for (size_t o = (size_t)g * per; o < (size_t)(g + 1) * per; o += 64) _mm_prefetch(s + o, _MM_HINT_T0);
    if ((size_t)g * span % 64 < span) _mm_prefetch(z + (size_t)g * span, _MM_HINT_T0);
}
XI_INLINE void qdot_prefetch(const void *blk, int c, int NB, size_t bs, size_t off) {
    size_t o = off + QDOT_PF_DIST;
    if (o >= bs) o += (size_t)(NB - 1) * bs;
    _mm_prefetch((const char *)blk + (size_t)c * bs + o, _MM_HINT_T0);
}

#endif
