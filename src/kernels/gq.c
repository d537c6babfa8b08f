/* kernels/gq: GGML block-format weights (kernels.h, dtype GGML): the activation rows quantized
 * to the type's format once per matmul job and thread, the scalar oracle of the integer path
 * (xi_qtype_dot_ref per output) and the fp32 path of the exact tables. The fast variants
 * (x86/avx2_gq.c, arm/neon_gq.c) reproduce xi_matmul_gq_ref bit for bit. */
#include "base/base.h"
#include "kernels/gq_pack.h"
#include "kernels/kernels.h"
#include "kernels/qtypes.h"
#include "kernels/wformat.h"

static void quantize_act_ref(int act, const float *x, void *out, int64_t n) {
    xi_qtype_quantize_act((xi_act_fmt)act, x, out, n);
}

size_t xi_gq_act_row_bytes(const xi_weight *w) {
    const xi_act_fmt f = w->qtype->act;
    return (size_t)(w->n_in / xi_act_block(f)) * (size_t)xi_act_block_bytes(f);
}

void xi_gq_quantize_rows(const xi_ops *ops, const xi_weight *w, const float *x, int64_t ldx,
                         int64_t r0, int64_t r1, void *act) {
    void (*qa)(int, const float *, void *, int64_t) = ops && ops->quantize_act ? ops->quantize_act : quantize_act_ref;
    const size_t rb = xi_gq_act_row_bytes(w);
    for (int64_t r = r0; r < r1; r++) qa((int)w->qtype->act, x + r * ldx, (uint8_t *)act + (size_t)r * rb, w->n_in);
}

const void *xi_gq_quantize(const xi_ops *ops, const xi_weight *w, const float *x, int64_t ldx,
                           int64_t rows, size_t *stride) {
    const size_t rb = xi_gq_act_row_bytes(w);
    uint8_t *a = xi_kernel_scratch(5, (size_t)rows * rb + 64);
    if (!a) return NULL;
    xi_gq_quantize_rows(ops, w, x, ldx, 0, rows, a);
    *stride = rb;
    return a;
}

/* A packed weight (gq_pack.h) a block at a time: y = sum of the blocks' one-block dots in
 * block order, which is the row's dot bit for bit (the row dot adds each block's term to an
 * accumulator that starts at +0, and +0 + term is the term). */
static float dot_packed(const xi_weight *w, int64_t n, const uint8_t *a) {
    const xi_qtype *t = w->qtype;
    const size_t ab = (size_t)xi_act_block_bytes(t->act) * (size_t)(t->block / xi_act_block(t->act));
    uint8_t blk[XI_QK_MAX + 64];
    float acc = 0.0f;
    for (int64_t i = 0; i < w->n_in / t->block; i++) {
        xi_gq_block_bytes(w, n, i, blk);
        acc += xi_qtype_dot_ref(t, blk, a + (size_t)i * ab, t->block);
    }
    return acc;
}

void xi_matmul_gq_ref(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1) {
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *a = (const uint8_t *)act + (size_t)r * act_stride;
            y[r * ldy + n] = w->block ? dot_packed(w, n, a)
                                      : xi_qtype_dot_ref(w->qtype, (const uint8_t *)w->data + (size_t)n * rb, a, w->n_in);
        }
}

void xi_matmul_gq_exact(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1) {
    const xi_wformat *f = xi_wformat_of(w); /* its row reader knows both layouts */
    const int64_t K = w->n_in;
    const int B = w->qtype->block;
    float *row = xi_kernel_scratch(6, (size_t)K * sizeof(float));
    for (int64_t n = n0; n < n1; n++) {
        if (row) f->dequant(w, n, 0, K, row);
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0.0f;
            if (row) {
                for (int64_t k = 0; k < K; k++) acc += x[r * ldx + k] * row[k];
            } else { /* out of memory for one row: a block at a time, the same sums */
                float blk[XI_QK_MAX];
                for (int64_t k0 = 0; k0 < K; k0 += B) {
                    f->dequant(w, n, k0, k0 + B, blk);
                    for (int k = 0; k < B; k++) acc += x[r * ldx + k0 + k] * blk[k];
                }
            }
            y[r * ldy + n] = acc;
        }
    }
}
