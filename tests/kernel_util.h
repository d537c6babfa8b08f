/* Kernel test helpers: random weights of every format and random inputs (kernel_util.c). */
#ifndef XI_TEST_KERNEL_UTIL_H
#define XI_TEST_KERNEL_UTIL_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/qtypes.h"

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

/* GGML block types: the llama256 GGUF files of every type the kernels compute
 * ($XINFER_TEST_DATA/gguf/llama256-random-NAME.gguf; their 2-D tensors are all of it), */
extern const char *const GQ_LLAMA256[11];
/* file f of them opened (NULL and err when it cannot be), */
struct xi_gguf *gq_llama256_open(size_t f, char *err, size_t errlen);
/* and a block of random bytes given sane f16 scales for its type, for the extremes tests. */
void gq_fix_scales(const xi_qtype *t, uint8_t *blk);

/* The int8 table of every variant this CPU runs (out[8]) and, where the test binary has
 * it, the AVX-512 matmul_q and matmul_gq through SIMDe (avx512-emulated); their count. */
int int8_variants(const xi_ops **out);
/* y of `rows` rows through ops's matmul_gq, columns [n0, n1), x quantized as kernels.c does. */
void gq_run(const xi_ops *ops, float *y, const float *x, int64_t rows, const xi_weight *w,
            int64_t n0, int64_t n1);
/* Whether a and b hold the same bits; else *at is the first index that differs. */
int same_bits(const float *a, const float *b, int64_t n, int64_t *at);

#endif
