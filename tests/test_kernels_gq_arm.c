/* GGML block-format integer matmul at the edges of the fast kernels' tiling (arm/neon_gq.c
 * works in row blocks of 64, tiles of up to 4 rows and groups of 4 columns): row counts past
 * one and two row blocks, column ranges that start and end inside a column group, and a single
 * column. Every int8 variant must give xi_matmul_gq_ref's bits; on real llama256 tensors of
 * the 32-value and the K block families. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernel_util.h"
#include "kernels/qtypes.h"
#include "model/gguf.h"
#include "test.h"

TEST(test_kernels_gq_row_blocks_and_column_groups_match_ref) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    int fast = 0;
    for (int i = 0; i < nv; i++) {
        ops[i] = xi_ops_precision(ops[i], "int8", NULL, 0);
        fast += ops[i]->matmul_gq != xi_matmul_gq_ref;
    }
    if (!fast) SKIP("no variant here has its own matmul_gq (only the reference)");
    const xi_ops *ref = xi_ops_precision(xi_ops_ref(), "int8", NULL, 0);
    const char *files[] = {"q8_0", "q4_0", "q4_k_m", "q6_k", "q5_k_m", "q2_k"};
    const int64_t rows_list[] = {63, 64, 65, 130};
    const int64_t cuts[][2] = {{0, 1}, {1, 6}, {6, 7}, {7, 22}, {22, 23}};
    char err[512] = "";
    for (size_t f = 0; f < XI_ARRAY_LEN(files); f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "gguf/llama256-random-%s.gguf", files[f]);
        xi_gguf *g = xi_gguf_open(xi_test_data(rel), err, sizeof err);
        CHECKF(g, "%s", err);
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "blk.1.ffn_down.weight");
        CHECK(t && t->n_dims == 2 && t->type->unpack);
        const int64_t N = 23, K = t->ne[0];
        const xi_weight w = {.dtype = XI_GGML, .n_out = N, .n_in = K, .data = t->data, .qtype = t->type};
        for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
            const int64_t R = rows_list[ri];
            float *x = rand_vec(R * K), *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
            size_t stride;
            const void *a = xi_gq_quantize(NULL, &w, x, K, R, &stride);
            CHECK(a);
            ref->matmul_gq(want, N, a, stride, R, &w, 0, N);
            for (int v = 0; v < nv; v++) {
                memset(got, 0xff, (size_t)(R * N) * 4);
                for (size_t c = 0; c < XI_ARRAY_LEN(cuts); c++)
                    ops[v]->matmul_gq(got, N, a, stride, R, &w, cuts[c][0], cuts[c][1]);
                int64_t at = -1;
                for (int64_t i = 0; i < R * N && at < 0; i++)
                    if (memcmp(&got[i], &want[i], 4)) at = i;
                CHECKF(at < 0, "%s %s rows %lld: y[%lld][%lld] %a vs ref %a", ops[v]->name, files[f],
                       (long long)R, (long long)(at / N), (long long)(at % N), got[at], want[at]);
            }
            free(x);
            free(want);
            free(got);
        }
        xi_gguf_close(g);
    }
}
