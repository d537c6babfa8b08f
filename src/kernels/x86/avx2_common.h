/* kernels/x86: inline helpers shared by the AVX2 files (compiled with -mavx2 -mfma -mf16c). */
#ifndef XI_AVX2_COMMON_H
#define XI_AVX2_COMMON_H

#include <immintrin.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"

#define XI_INLINE static inline __attribute__((always_inline))

/* The one horizontal-sum order every AVX2 path uses: (lo128 + hi128), then lanes 0+2 / 1+3,
 * then the two halves. Changing it changes results, never one copy of it alone. */
XI_INLINE float avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
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

/* One element of type t, as f32 (the tails). */
XI_INLINE float avx2_load1(xi_dtype t, const void *p, int64_t i) {
    switch (t) {
    case XI_F16: return xi_f16_to_f32(((const uint16_t *)p)[i]);
    case XI_BF16: return xi_bf16_to_f32(((const uint16_t *)p)[i]);
    case XI_Q8: return (float)((const int8_t *)p)[i];
    default: return ((const float *)p)[i];
    }
}

#endif
