/* The AVX-512 matmuls (src/kernels/x86/avx512_gq.c, avx512_qdot.c, avx512_matmul.c) built a
 * second time for the test binary only, through SIMDe's portable AVX-512 on AVX2 (Makefile:
 * XI_AVX512_EMULATED), so their bits can be checked on machines without AVX-512. Same
 * contracts as xi_matmul_gq_avx512, xi_matmul_q_avx512 and xi_avx512_matmul. x86-64 builds
 * with SIMDe only (XI_TEST_AVX512_EMULATED). */
#ifndef XI_TEST_AVX512_EMULATED_H
#define XI_TEST_AVX512_EMULATED_H

#include "kernels/kernels.h"

void xi_matmul_gq_avx512_emulated(float *y, int64_t ldy, const void *act, size_t act_stride,
                                  int64_t rows, const xi_weight *w, int64_t n0, int64_t n1);
void xi_matmul_q_avx512_emulated(float *y, int64_t ldy, const xi_qx *x, int64_t rows,
                                 const xi_weight *w, int64_t n0, int64_t n1);
void xi_avx512_matmul_emulated(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                               const xi_weight *w, int64_t n0, int64_t n1);

#endif
