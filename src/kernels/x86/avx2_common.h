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

#endif
