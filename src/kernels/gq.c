/* kernels/gq: GGML block-format weights (kernels.h, dtype GGML): the activation rows quantized
 * to the type's format once per matmul job and thread, the scalar oracle of the integer path
 * (xi_qtype_dot_ref per output) and the fp32 path of the exact tables. The fast variants
 * (x86/avx2_gq.c, arm/neon_gq.c) reproduce xi_matmul_gq_ref bit for bit. */
#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/qtypes.h"

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

void xi_matmul_gq_ref(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1) {
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = n0; n < n1; n++)
            y[r * ldy + n] = xi_qtype_dot_ref(w->qtype, (const uint8_t *)w->data + (size_t)n * rb,
                                              (const uint8_t *)act + (size_t)r * act_stride, w->n_in);
}

void xi_matmul_gq_exact(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1) {
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    const int64_t K = w->n_in;
    float *row = xi_kernel_scratch(6, (size_t)K * sizeof(float));
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)n * rb;
        if (row) xi_qtype_dequant_row(w->qtype, src, row, K);
        for (int64_t r = 0; r < rows; r++) {
            float acc = 0.0f;
            if (row) {
                for (int64_t k = 0; k < K; k++) acc += x[r * ldx + k] * row[k];
            } else { /* out of memory for one row: a block at a time, the same sums */
                float blk[XI_QK_MAX];
                const int B = w->qtype->block, bb = w->qtype->block_bytes;
                for (int64_t k0 = 0; k0 < K; k0 += B) {
                    xi_qtype_dequant_row(w->qtype, src + (size_t)(k0 / B) * (size_t)bb, blk, B);
                    for (int k = 0; k < B; k++) acc += x[r * ldx + k0 + k] * blk[k];
                }
            }
            y[r * ldy + n] = acc;
        }
    }
}
