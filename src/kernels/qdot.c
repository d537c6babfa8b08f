/* kernels/qdot: the integer path's shared parts: per-block 8-bit quantization of activation
 * rows (once per matmul job, on each thread or, from 16 rows on, split across them; kernels.c), the scalar oracle of the integer matmul
 * (xi_matmul_q_ref, every variant's twin) and the repack into the dot layout (kernels.h).
 *
 * The activation block is the format's (its wformat row: 32 inputs for int8, the group for
 * awq-int4, whose zero point then costs one integer multiply per group: sum (q_w - z) q_x =
 * S - z s). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/wformat.h"

int xi_qdot_block(const xi_weight *w) {
    const xi_wformat *f = xi_wformat_of(w);
    if (f->act != XI_WACT_QX) return 0;
    if (f->act_block) return f->act_block;
    return w->group_size > 0 && w->n_in % w->group_size == 0 ? w->group_size : 0;
}

/* ---- activation quantization ---------------------------------------------------------- */

/* One block: the scalar definition every variant's quantize_block reproduces. */
void xi_qx_quantize_block_ref(int8_t *q, float *d, int32_t *s, const float *x, int64_t n) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        /* |x * id| <= 127 up to rounding; the clamp also maps a NaN to 127 instead of UB */
        const float v = fmaxf(-127.0f, fminf(127.0f, nearbyintf(x[i] * id)));
        q[i] = (int8_t)v;
        sum += q[i];
    }
    *d = amax / 127.0f;
    *s = sum;
}

void xi_qx_quantize_rows(const xi_ops *ops, const float *x, int64_t ldx, int64_t r0, int64_t r1,
                         const xi_qx *qx) {
    void (*qb)(int8_t *, float *, int32_t *, const float *, int64_t) =
        ops && ops->quantize_block ? ops->quantize_block : xi_qx_quantize_block_ref;
    const int64_t n_in = qx->n_in, nb = qx->nb, bs = qx->bs;
    int8_t *q = (int8_t *)qx->q;
    float *d = (float *)qx->d;
    int32_t *sm = (int32_t *)qx->s;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t b = 0; b < nb; b++) {
            const int64_t k0 = b * bs, n = XI_MIN(bs, n_in - k0);
            qb(q + r * n_in + k0, d + r * nb + b, sm + r * nb + b, x + r * ldx + k0, n);
        }
}

int xi_qx_alloc(xi_qx *qx, int slot, int64_t rows, int64_t n_in, int bs) {
    const int64_t nb = (n_in + bs - 1) / bs;
    /* 64 bytes past the last row: a variant's 8-byte load of a row's last 4 inputs stays in */
    int8_t *q = xi_kernel_scratch(slot, (size_t)(rows * n_in) + 64);
    float *d = xi_kernel_scratch(slot + 1, (size_t)(rows * nb) * 4);
    int32_t *sm = xi_kernel_scratch(slot + 2, (size_t)(rows * nb) * 4);
    if (!q || !d || !sm) return -1;
    *qx = (xi_qx){.q = q, .d = d, .s = sm, .n_in = n_in, .nb = nb, .bs = bs};
    return 0;
}

const xi_qx *xi_qx_quantize(const xi_ops *ops, const float *x, int64_t ldx, int64_t rows,
                            int64_t n_in, int bs) {
    static __thread xi_qx qx;
    if (xi_qx_alloc(&qx, 2, rows, n_in, bs)) return NULL;
    xi_qx_quantize_rows(ops, x, ldx, 0, rows, &qx);
    return &qx;
}

/* ---- the oracle ----------------------------------------------------------------------- */

void xi_matmul_q_ref(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                     int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, nb = x->nb, bs = x->bs;
    const int8_t *w8 = w->data;
    const int grouped = !xi_wformat_of(w)->block; /* awq-int4: scale and zero per group; int8:
                                                     one scale per output row */
    for (int64_t r = 0; r < rows; r++) {
        const int8_t *q = x->q + r * K;
        const float *d = x->d + r * nb;
        const int32_t *s = x->s + r * nb;
        for (int64_t n = n0; n < n1; n++) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const int64_t k1 = XI_MIN(K, (b + 1) * bs);
                int32_t S = 0;
                if (!grouped) {
                    for (int64_t k = b * bs; k < k1; k++) S += q[k] * w8[xi_weight_index(w, n, k)];
                    acc = fmaf((float)S, d[b], acc);
                } else {
                    for (int64_t k = b * bs; k < k1; k++) S += q[k] * xi_q4_at(w, n, k);
                    const int64_t g = n * nb + b;
                    acc = fmaf((float)(S - (int32_t)w->zero[g] * s[b]) * d[b], w->scale[g], acc);
                }
            }
            y[r * ldy + n] = grouped ? acc : acc * w->scale[n];
        }
    }
}

/* ---- the dot layout -------------------------------------------------------------------- */

/* 8 columns, whole lanes of dot_k inputs, and (a group-sized block) groups of whole lanes. */
int xi_weight_dot_fits(const xi_weight *w) {
    const xi_wformat *f = xi_wformat_of(w);
    if (!(f->layouts & XI_LAYOUT_DOT) || w->n_out % 8 || w->n_in % f->dot_k) return 0;
    if (f->block) return 1;
    return w->group_size > 0 && w->group_size % f->dot_k == 0 && w->n_in % w->group_size == 0;
}

/* Row-major int8 / awq-int4 to the dot layout, one block of 8 columns at a time through tmp. */
int xi_weight_block_dot(xi_weight *w, char *err, size_t errlen) {
    if (w->block || !xi_weight_dot_fits(w)) return 0;
    const int q8 = xi_wformat_of(w)->dot_k == 4; /* a byte per input; else two nibbles */
    const size_t K = (size_t)w->n_in, bytes = q8 ? 8 * K : 4 * K;
    uint8_t *tmp = malloc(bytes), *d = (uint8_t *)w->data; /* the caller owns it writable */
    if (!tmp) return xi_errf(err, errlen, "weight repack: out of memory for %zu bytes", bytes);
    for (int64_t b = 0; b < w->n_out / 8; b++) {
        uint8_t *blk = d + (size_t)b * bytes;
        memcpy(tmp, blk, bytes);
        for (size_t c = 0; c < 8; c++) /* every byte of the block written once */
            if (q8) {
                for (size_t k4 = 0; k4 < K / 4; k4++) memcpy(blk + k4 * 32 + c * 4, tmp + c * K + 4 * k4, 4);
            } else {
                /* row bytes x[m] hold inputs 8k8 + 2m (low) and 8k8 + 2m + 1; byte kk of the
                 * dot block holds inputs 8k8 + kk (low) and 8k8 + kk + 4 */
                for (size_t k8 = 0; k8 < K / 8; k8++) {
                    const uint8_t *x = tmp + c * K / 2 + 4 * k8;
                    uint8_t *o = blk + k8 * 32 + c * 4;
                    o[0] = (uint8_t)((x[0] & 15) | x[2] << 4);
                    o[1] = (uint8_t)((x[0] >> 4) | (x[2] & 0xF0));
                    o[2] = (uint8_t)((x[1] & 15) | x[3] << 4);
                    o[3] = (uint8_t)((x[1] >> 4) | (x[3] & 0xF0));
                }
            }
    }
    free(tmp);
    w->block = XI_BLOCK_DOT;
    return 0;
}
