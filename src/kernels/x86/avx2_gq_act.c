/* kernels/x86/avx2_gq_act: the activation rows of GGML block-format weights quantized to
 * Q8_0, Q8_1 and Q8_K with AVX2, byte for byte xi_qtype_quantize_act (qtypes.c):
 *   - |x| maxima are exact in any order; max_ps returns its second operand when the first is
 *     NaN, so with the running maximum second a NaN is skipped, as fmaxf and the scalar `>`
 *     skip it;
 *   - x * id is one IEEE product either way; roundf (half away from zero) is trunc(v) plus
 *     sign(v) where |v - trunc(v)| >= 0.5 (v - trunc(v) is exact below 2^23), lrintf is
 *     cvtps (round to nearest even, the default mode);
 *   - scales, f16 conversions and Q8_K's choice of its signed maximum (the first of largest
 *     magnitude) are the scalar code's, on the scalar values; integer sums are exact. */
#include <math.h>

#include "kernels/gq_act_driver.h"
#include "kernels/x86/avx2_common.h"
#include "tensor/dtype.h"

static float hmax(__m256 m) {
    float t[8], r = 0.0f;
    _mm256_storeu_ps(t, m);
    for (int j = 0; j < 8; j++) r = t[j] > r ? t[j] : r;
    return r;
}

static int32_t hsum_i32(__m256i v) {
    int32_t t[8], s = 0;
    _mm256_storeu_si256((__m256i *)t, v);
    for (int j = 0; j < 8; j++) s += t[j];
    return s;
}

/* 8 int32 in [-128, 127] to 8 int8 at q. */
static void store8(int8_t *q, __m256i v) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)q, _mm_packs_epi16(w, w));
}

static float amax_of(const float *x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
    return hmax(m);
}

static void put_f16(uint8_t *p, float v) {
    const uint16_t h = xi_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* One block of 32 (qtypes.c quantize_q8_32 with act set). */
static void q8_32(const float *x, uint8_t *out, int with_sum) {
    const float amax = amax_of(x, 32), d = amax / 127.0f, id = amax ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id), sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f),
                 one = _mm256_set1_ps(1.0f);
    int8_t *q = (int8_t *)(out + (with_sum ? 4 : 2));
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < 32; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vid);
        const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m256 r = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(_mm256_and_ps(v, sign), one)));
        const __m256i iv = _mm256_cvttps_epi32(r);
        acc = _mm256_add_epi32(acc, iv);
        store8(q + i, iv);
    }
    put_f16(out, d);
    if (with_sum) put_f16(out + 2, (float)hsum_i32(acc) * d);
}

/* Q8_K's 16 groups of 16 (gq_act_driver.h frames them). */
static void k_groups(const float *x, float iscale, int8_t *q, int16_t *bs) {
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    for (int j = 0; j < 16; j++) {
        const __m256i a = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 16 * j))), cap);
        const __m256i b = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 16 * j + 8))), cap);
        store8(q + 16 * j, a);
        store8(q + 16 * j + 8, b);
        bs[j] = (int16_t)hsum_i32(_mm256_add_epi32(a, b));
    }
}

static const gq_act_fns AVX2 = {q8_32, amax_of, k_groups};

void xi_gq_quantize_act_avx2(int act, const float *x, void *out, int64_t n) { gq_act_rows(&AVX2, act, x, out, n); }
