/* kernels/x86: the f16 widening shared by the AVX-512 files, included after their intrinsics
 * (immintrin.h, or SIMDe's avx512.h with native aliases under XI_AVX512_EMULATED, whose
 * build converts each half with F16C: SIMDe has no vcvtph2ps of 16 lanes). */
#ifndef XI_AVX512_F16_H
#define XI_AVX512_F16_H

/* the 8 f16 at a, then the 8 at b, as 16 f32 (exact) */
static inline __attribute__((always_inline)) __m512 f16x8x2(const void *a, const void *b) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)a), hi = _mm_loadu_si128((const __m128i *)b);
#ifdef XI_AVX512_EMULATED
    float f[16];
    _mm256_storeu_ps(f, _mm256_cvtph_ps(lo));
    _mm256_storeu_ps(f + 8, _mm256_cvtph_ps(hi));
    return _mm512_loadu_ps(f);
#else
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
#endif
}

#endif
