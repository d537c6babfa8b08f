/* kernels/arm: inline helpers shared by the NEON files (built with armv8.2-a+fp16+dotprod). */
#ifndef XI_NEON_COMMON_H
#define XI_NEON_COMMON_H

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/matmul_tile.h"

#define XI_INLINE static inline __attribute__((always_inline))

/* The one horizontal-sum order every NEON path uses, per vector: (l0+l1)+(l2+l3).
 * neon_hsum4 sums four vectors at once into the lanes of its result in exactly that order. */
XI_INLINE float32x4_t neon_hsum4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

XI_INLINE float neon_hsum(float32x4_t v) {
    const float32x4_t p = vpaddq_f32(v, v);
    return vgetq_lane_f32(vpaddq_f32(p, p), 0);
}

/* Four elements of type t starting at element i, as f32. */
XI_INLINE float32x4_t neon_load4(xi_dtype t, const void *p, int64_t i) {
    switch (t) {
    case XI_F16: return vcvt_f32_f16(vld1_f16((const float16_t *)p + i));
    case XI_BF16:
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p + i), 16));
    case XI_Q8: {
        int32_t u;
        memcpy(&u, (const int8_t *)p + i, 4);
        const int8x8_t b = vreinterpret_s8_s32(vdup_n_s32(u));
        return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(b))));
    }
    default: return vld1q_f32((const float *)p + i);
    }
}

/* Store columns [lo, hi) (relative to the tile's first column) of block b, scaled for Q8. */
XI_INLINE void bstore(float *y, float32x4_t l, float32x4_t h, const float *sc, int b, int64_t lo,
                      int64_t hi) {
    if (sc) {
        l = vmulq_f32(l, vld1q_f32(sc + b * 8));
        h = vmulq_f32(h, vld1q_f32(sc + b * 8 + 4));
    }
    if (lo <= b * 8 && hi >= b * 8 + 8) {
        vst1q_f32(y, l);
        vst1q_f32(y + 4, h);
        return;
    }
    float tmp[8];
    vst1q_f32(tmp, l);
    vst1q_f32(tmp + 4, h);
    for (int64_t c = XI_MAX(lo - b * 8, 0); c < XI_MIN(hi - b * 8, 8); c++) y[c] = tmp[c];
}

#endif
