/* Kernel test helpers: random weights of every format and random inputs (kernel_util.c). */
#ifndef XI_TEST_KERNEL_UTIL_H
#define XI_TEST_KERNEL_UTIL_H

#include <stdint.h>

#include "kernels/kernels.h"

uint32_t rnd(void);  /* xorshift, one fixed seed per test process */
float frand(void);   /* [-1, 1] */

/* A random weight of the given format with its buffers (freed by weight_free). */
typedef struct {
    xi_weight w;
    void *data;
    float *scale;
    uint8_t *zero;
} test_weight;

void weight_make(test_weight *t, xi_dtype dt, int64_t n_out, int64_t n_in, int gs);
void weight_free(test_weight *t);
float *rand_vec(int64_t n);

/* A weight format and layout: dtype, AWQ group size, xi_weight_block's block. */
typedef struct {
    xi_dtype dt;
    int gs;
    int block; /* 0: row-major */
} wfmt;
/* A random weight in format f; blocked formats round n_out up to a multiple of the block.
 * Returns whether the weight has the layout f asks for. */
int weight_make_f(test_weight *t, const wfmt *f, int64_t n_out, int64_t n_in);

#endif
