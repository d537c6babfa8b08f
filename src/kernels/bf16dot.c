/* kernels/bf16dot: BF16 activations for BF16 weights, the scalar definition. The int8
 * tables of a variant with a bf16 dot product (AVX-512 BF16's vdpbf16ps: x86/avx512_bf16.c)
 * compute a BF16 weight from its input rows rounded to bf16 once per matmul, as llama.cpp
 * (its BF16 vec_dot) and a bf16 torch model (vLLM) do; the exact tables keep fp32 inputs.
 *
 * The arithmetic is the instructions', which tests/test_kernels_bf16dot.c checks bit for
 * bit (vcvtneps2bf16 and vdpbf16ps read no MXCSR: round to nearest even, denormal inputs
 * read as zero, denormal results flushed to a zero of their sign):
 *   x -> bf16: a zero or denormal x is a zero of its sign, a NaN stays a NaN (quieted), else
 *              rounded to nearest even (xi_bf16_round_ref)
 *   y[r, n]:   acc = 0; per input pair p = 0, 1, ... (an odd last input paired with a zero
 *              weight and a zero input): acc = ftz(fma(W[n, 2p+1], x[2p+1], acc)), then
 *              acc = ftz(fma(W[n, 2p], x[2p], acc)), a denormal bf16 read as zero; y = acc.
 * The products of two bf16 are exact in f32, so each step rounds once, like an FMA. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

uint16_t xi_bf16_round1(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if (!(u & 0x7f800000u)) return (uint16_t)((u >> 16) & 0x8000u); /* zero, denormal */
    return xi_f32_to_bf16(x);
}

void xi_bf16_round_ref(uint16_t *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = xi_bf16_round1(x[i]);
}

/* A bf16 as vdpbf16ps reads it: a denormal is a zero of its sign. */
static float bf16_daz(uint16_t h) { return xi_bf16_to_f32(h & 0x7f80u ? h : (uint16_t)(h & 0x8000u)); }

static float ftz(float r) { return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r; }

/* W[n, k] of a BF16 weight in any of its layouts, 0 past n_in (the pad of an odd last pair). */
static uint16_t w_at(const xi_weight *w, int64_t n, int64_t k) {
    return k < w->n_in ? ((const uint16_t *)w->data)[xi_weight_index(w, n, k)] : 0;
}

void xi_matmul_bf16_ref(float *y, int64_t ldy, const uint16_t *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in;
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *xr = x + r * ldx;
        for (int64_t n = n0; n < n1; n++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k += 2) {
                const uint16_t x1 = k + 1 < K ? xr[k + 1] : 0;
                acc = ftz(fmaf(bf16_daz(w_at(w, n, k + 1)), bf16_daz(x1), acc));
                acc = ftz(fmaf(bf16_daz(w_at(w, n, k)), bf16_daz(xr[k]), acc));
            }
            y[r * ldy + n] = acc;
        }
    }
}

/* Even, so every row's input pairs are 4-byte aligned dwords; an odd n_in's pad is a zero. */
int64_t xi_bf16_row_len(int64_t n_in) { return (n_in + 1) & ~(int64_t)1; }

void xi_bf16_rows_into(const xi_ops *ops, const float *x, int64_t ldx, int64_t r0, int64_t r1,
                       int64_t n_in, uint16_t *out) {
    const int64_t L = xi_bf16_row_len(n_in);
    void (*round)(uint16_t *, const float *, int64_t) =
        ops && ops->round_bf16 ? ops->round_bf16 : xi_bf16_round_ref;
    for (int64_t r = r0; r < r1; r++) {
        round(out + r * L, x + r * ldx, n_in);
        if (L > n_in) out[r * L + n_in] = 0;
    }
}

const uint16_t *xi_bf16_rows(const xi_ops *ops, const float *x, int64_t ldx, int64_t rows,
                             int64_t n_in) {
    uint16_t *out = xi_kernel_scratch(12, (size_t)(rows * xi_bf16_row_len(n_in)) * 2);
    if (out) xi_bf16_rows_into(ops, x, ldx, 0, rows, n_in, out);
    return out;
}
