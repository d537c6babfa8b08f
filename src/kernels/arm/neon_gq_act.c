/* kernels/arm/neon_gq_act: the activation rows of GGML block-format weights quantized to
 * Q8_0, Q8_1 and Q8_K with NEON, byte for byte xi_qtype_quantize_act (qtypes.c):
 *   - |x| maxima are exact in any order; vmaxnm returns the number when the other operand is
 *     NaN, so a NaN is skipped as fmaxf and the scalar `>` skip it;
 *   - x * id is one IEEE product either way; vrnda rounds half away from zero as roundf does,
 *     vcvtn to nearest even as lrintf does in the default mode;
 *   - scales, f16 conversions and Q8_K's choice of its signed maximum (the first of largest
 *     magnitude) are the scalar code's, on the scalar values; integer sums are exact. */
#include "kernels/arm/neon_common.h"
#include "kernels/gq_act_driver.h"
#include "tensor/dtype.h"

static float amax_of(const float *x, int n) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int i = 0; i < n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
    return vmaxvq_f32(m); /* the lanes are numbers >= 0: any order gives the maximum */
}

/* 8 int32 in [-128, 127] to 8 int8 at q. */
static void store8(int8_t *q, int32x4_t a, int32x4_t b) {
    vst1_s8(q, vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
}

static void put_f16(uint8_t *p, float v) {
    const uint16_t h = xi_f32_to_f16(v);
    memcpy(p, &h, 2);
}

/* One block of 32 (qtypes.c quantize_q8_32 with act set). */
static void q8_32(const float *x, uint8_t *out, int with_sum) {
    const float amax = amax_of(x, 32), d = amax / 127.0f, id = amax ? 127.0f / amax : 0.0f;
    int8_t *q = (int8_t *)(out + (with_sum ? 4 : 2));
    int32x4_t acc = vdupq_n_s32(0);
    for (int i = 0; i < 32; i += 8) {
        const int32x4_t a = vcvtq_s32_f32(vrndaq_f32(vmulq_n_f32(vld1q_f32(x + i), id)));
        const int32x4_t b = vcvtq_s32_f32(vrndaq_f32(vmulq_n_f32(vld1q_f32(x + i + 4), id)));
        acc = vaddq_s32(acc, vaddq_s32(a, b));
        store8(q + i, a, b);
    }
    put_f16(out, d);
    if (with_sum) put_f16(out + 2, (float)vaddvq_s32(acc) * d);
}

/* Q8_K's 16 groups of 16 (gq_act_driver.h frames them). */
static void k_groups(const float *x, float iscale, int8_t *q, int16_t *bs) {
    const int32x4_t cap = vdupq_n_s32(127);
    for (int j = 0; j < 16; j++) {
        int32x4_t v[4];
        for (int h = 0; h < 4; h++)
            v[h] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * j + 4 * h), iscale)), cap);
        store8(q + 16 * j, v[0], v[1]);
        store8(q + 16 * j + 8, v[2], v[3]);
        bs[j] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(v[0], v[1]), vaddq_s32(v[2], v[3])));
    }
}

static const gq_act_fns NEON = {q8_32, amax_of, k_groups};

void xi_gq_quantize_act_neon(int act, const float *x, void *out, int64_t n) { gq_act_rows(&NEON, act, x, out, n); }
