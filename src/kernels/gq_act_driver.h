/* kernels/gq_act_driver: the row loop of a variant's quantize_act (kernels.h), included by
 * x86/avx2_gq_act.c and arm/neon_gq_act.c: each block of the activation format through the
 * variant's q8_32 (Q8_0, or Q8_1 with its sum) or, for Q8_K, the scalar code's framing around
 * the variant's |x| maximum and its 16 groups of 16 (values and sums); any other format as
 * the scalar code. */
#ifndef XI_GQ_ACT_DRIVER_H
#define XI_GQ_ACT_DRIVER_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/qtypes.h"

typedef struct gq_act_fns {
    void (*q8_32)(const float *x, uint8_t *out, int with_sum);
    float (*amax)(const float *x, int n); /* max |x|, a NaN skipped */
    /* q[256] = min(127, lrintf(iscale * x)), bs[16] the sums of each 16 */
    void (*k_groups)(const float *x, float iscale, int8_t *q, int16_t *bs);
} gq_act_fns;

/* One Q8_K block (qtypes.c quantize_q8_k): the scale maps the first value of largest
 * magnitude (the scalar `>` keeps the first) to -127. */
static inline void gq_act_q8_k(const gq_act_fns *v, const float *x, uint8_t *out) {
    const float amax = v->amax(x, 256);
    int8_t *q = (int8_t *)(out + 4);
    int16_t bs[16];
    float d = 0.0f;
    if (amax == 0.0f) {
        memset(q, 0, 256);
        memset(bs, 0, sizeof bs);
    } else {
        int k = 0;
        while (!(fabsf(x[k]) == amax)) k++;
        const float iscale = -127.0f / x[k];
        v->k_groups(x, iscale, q, bs);
        d = 1.0f / iscale;
    }
    memcpy(out, &d, 4);
    memcpy(out + 260, bs, sizeof bs);
}

static inline void gq_act_rows(const gq_act_fns *v, int act, const float *x, void *out, int64_t n) {
    const xi_act_fmt f = (xi_act_fmt)act;
    if (f != XI_ACT_Q8_0 && f != XI_ACT_Q8_1 && f != XI_ACT_Q8_K) {
        xi_qtype_quantize_act(f, x, out, n);
        return;
    }
    const int bs = xi_act_block(f), bb = xi_act_block_bytes(f);
    uint8_t *o = out;
    for (int64_t i = 0; i < n / bs; i++, x += bs, o += bb) {
        if (f == XI_ACT_Q8_K)
            gq_act_q8_k(v, x, o);
        else
            v->q8_32(x, o, f == XI_ACT_Q8_1);
    }
}

#endif
