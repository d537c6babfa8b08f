/* matmul_once: one weight of a given format and shape, and CALLS matmul calls on it with
 * one thread; nothing else. It exists for instruction counting (bench/arm64_insns.sh runs
 * it under qemu with 1 and 2 calls, so the difference is one call's instructions), where
 * timing means nothing.
 *
 * usage: matmul_once f32|f16|bf16|int8|awq[/row]|GGML-TYPE ROWS N_OUT N_IN CALLS [KERNELS]
 * The weight gets the layout the loader gives the variant (xi_weight_block_for), or stays
 * row-major with /row (as `--load-format mmap` leaves it); AWQ uses group 128. INT8 and AWQ
 * run in the precision XINFER_KERNEL_PRECISION names (default int8: each call quantizes x,
 * as xi_matmul does, and runs the integer matmul); so do GGML block types by ggml name (q4_K,
 * q8_0, ...: random blocks, rows as a GGUF file stores them, through xi_matmul_part). Prints the variant, the precision, the
 * layout and y[0]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/qtypes.h"

/* Uniform in [-1, 1) from a 32-bit LCG: the values only have to be finite and varied. */
static uint32_t lcg = 12345u;
static float frand(void) {
    lcg = lcg * 1664525u + 1013904223u;
    return (float)(lcg >> 8) / 8388608.0f - 1.0f;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s f32|f16|bf16|int8|awq[/row]|q4_K|... ROWS N_OUT N_IN CALLS [KERNELS]\n",
                argv[0]);
        return 2;
    }
    char dn[16];
    snprintf(dn, sizeof dn, "%s", argv[1]);
    char *slash = strchr(dn, '/');
    const int row_major = slash && !strcmp(slash, "/row");
    if (slash) *slash = 0;
    const int64_t rows = atoll(argv[2]), n_out = atoll(argv[3]), n_in = atoll(argv[4]);
    const int calls = atoi(argv[5]), gs = 128;
    const xi_qtype *qt = xi_qtype_by_name(dn);
    const xi_dtype dt = !strcmp(dn, "f32")    ? XI_F32
                        : !strcmp(dn, "f16")  ? XI_F16
                        : !strcmp(dn, "bf16") ? XI_BF16
                        : !strcmp(dn, "int8") ? XI_Q8
                        : !strcmp(dn, "awq")  ? XI_Q4_AWQ
                        : qt && qt->unpack && n_in % qt->block == 0 ? XI_GGML
                                              : XI_DTYPE_COUNT;
    if (dt == XI_DTYPE_COUNT || rows < 1 || n_out < 1 || n_in < 1 || calls < 0 ||
        (dt == XI_Q4_AWQ && n_in % gs)) {
        fprintf(stderr, "matmul_once: bad format or shape (awq needs N_IN %% %d == 0)\n", gs);
        return 2;
    }
    char err[256];
    const xi_ops *ops = xi_ops_select(argc > 6 ? argv[6] : NULL, err, sizeof err);
    if (!ops) {
        fprintf(stderr, "matmul_once: %s\n", err);
        return 1;
    }
    const int64_t n = n_out * n_in, ns = dt == XI_Q4_AWQ ? n / gs : n_out;
    const size_t eb = dt == XI_GGML     ? xi_qtype_row_bytes(qt, n_in) * (size_t)n_out
                      : dt == XI_Q4_AWQ ? (size_t)n / 2
                      : dt == XI_Q8   ? (size_t)n
                                      : (size_t)n * xi_dtype_size(dt);
    void *data = malloc(eb);
    float *scale = malloc((size_t)ns * 4), *x = malloc((size_t)(rows * n_in) * 4),
          *y = malloc((size_t)(rows * n_out) * 4), *tmp = malloc((size_t)n * 4);
    uint8_t *zero = malloc((size_t)ns);
    if (!data || !scale || !x || !y || !tmp || !zero) {
        fprintf(stderr, "matmul_once: out of memory\n");
        return 1;
    }
    if (dt == XI_F32 || dt == XI_F16 || dt == XI_BF16) {
        for (int64_t i = 0; i < n; i++) tmp[i] = frand();
        xi_from_f32(data, dt, tmp, (size_t)n);
    } else if (dt == XI_GGML) { /* every byte random, scales included */
        for (size_t i = 0; i < eb; i++) ((uint8_t *)data)[i] = (uint8_t)(frand() * 127.0f + 128.0f);
    } else {
        for (size_t i = 0; i < eb; i++) ((uint8_t *)data)[i] = (uint8_t)(frand() * 127.0f);
    }
    for (int64_t i = 0; i < ns; i++) scale[i] = 0.01f;
    memset(zero, 8, (size_t)ns);
    xi_weight w = {.dtype = dt, .n_out = n_out, .n_in = n_in, .data = data,
                   .qtype = dt == XI_GGML ? qt : NULL};
    if (dt == XI_Q8 || dt == XI_Q4_AWQ) w.scale = scale;
    if (dt == XI_Q4_AWQ) {
        w.zero = zero;
        w.group_size = gs;
    }
    if (!row_major && xi_weight_block(&w, xi_weight_block_for(ops, &w), err, sizeof err)) {
        fprintf(stderr, "matmul_once: %s\n", err);
        return 1;
    }
    for (int64_t i = 0; i < rows * n_in; i++) x[i] = frand();
    const int bs = ops->matmul_q ? xi_qdot_block(&w) : 0;
    for (int c = 0; c < calls && dt == XI_GGML; c++)
        xi_matmul_part(ops, y, n_out, x, n_in, rows, &w, 0, n_out);
    for (int c = 0; c < calls && dt != XI_GGML; c++) {
        const xi_qx *q = bs ? xi_qx_quantize(ops, x, n_in, rows, n_in, bs) : NULL;
        if (q)
            ops->matmul_q(y, n_out, q, rows, &w, 0, n_out);
        else
            ops->matmul(y, n_out, x, n_in, rows, &w, 0, n_out);
    }
    printf("%s %s %s block %d y0 %g\n", ops->name,
           bs || (dt == XI_GGML && ops->matmul_gq) ? ops->precision : "exact", dn, w.block,
           calls ? (double)y[0] : 0.0);
    free(data);
    free(scale);
    free(x);
    free(y);
    free(tmp);
    free(zero);
    return 0;
}
