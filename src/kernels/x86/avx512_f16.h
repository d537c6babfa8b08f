/* kernels/x86: the f16 widening and the zmm tile store shared by the AVX-512 files, included after their intrinsics
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

/* A zmm tile's store: the lanes of v (the columns [base, base + 16) of its group) that fall in
 * the group's range [lo, hi), column c to y[c], times sc[c] when sc is not NULL. */
static inline __attribute__((always_inline)) void zstore_cols(float *y, __m512 v, int64_t base, int64_t lo,
                                                              int64_t hi, const float *sc) {
    float t[16];
    _mm512_storeu_ps(t, v);
    const int64_t c0 = lo > base ? lo : base, c1 = hi < base + 16 ? hi : base + 16;
    for (int64_t c = c0; c < c1; c++) y[c] = sc ? t[c - base] * sc[c] : t[c - base];
}

#endif
