/* The weight-format table (kernels/wformat.h): every row is found again by its name and from
 * a weight of its format, every ggml type with kernels has a row that states its xi_qtype's
 * numbers, and every row's dequantize (the format's scalar reference) is what the exact
 * matmul of every variant computes for a one-hot input (a column of W), in every layout the
 * loader can give the weight (exactly: one product is 1 * W[n, k], the others add zeros). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernel_util.h"
#include "kernels/wformat.h"
#include "model/gguf.h"
#include "test.h"

TEST(test_wformat_names_and_weights_find_their_row) {
    const int n = xi_wformat_count();
    CHECK(n >= 5 + 11); /* f32 f16 bf16 int8 awq-int4, and the ggml types with kernels */
    for (int i = 0; i < n; i++) {
        const xi_wformat *f = xi_wformat_at(i);
        CHECKF(xi_wformat_by_name(f->name) == f, "%s: the name does not find its row", f->name);
        char up[32];
        size_t j = 0;
        for (; f->name[j] && j < sizeof up - 1; j++) up[j] = (char)toupper((unsigned char)f->name[j]);
        up[j] = 0;
        CHECKF(xi_wformat_by_name(up) == f, "%s: %s does not find it", f->name, up);
        const xi_weight w = {.dtype = f->dtype, .qtype = f->qtype, .n_out = 8, .n_in = 256};
        CHECKF(xi_wformat_of(&w) == f, "%s: a weight of the format finds another row", f->name);
        for (int k = 0; k < i; k++) CHECKF(strcasecmp(xi_wformat_at(k)->name, f->name), "%s twice", f->name);
    }
    CHECK(xi_wformat_by_name("q4_k_m") == NULL && xi_wformat_by_name("") == NULL &&
          xi_wformat_by_name(NULL) == NULL);
    /* ggml: a row per type with kernels, its numbers from the xi_qtype row */
    int ggml_rows = 0;
    for (int id = 0; id < XI_GGML_TYPE_MAX; id++) {
        const xi_qtype *t = xi_qtype_get(id);
        if (!t) continue;
        const xi_wformat *f = xi_wformat_for(XI_GGML, t);
        if (!xi_qtype_supported(t)) {
            CHECKF(!f, "%s: a row for a type without kernels", t->name);
            continue;
        }
        CHECKF(f && !strcasecmp(f->name, t->name) && f->block_bytes == t->block_bytes,
               "%s: no row, or another name or size", t->name);
        if (!t->unpack) { /* f32 / f16 / bf16 tensors compute as the float rows */
            CHECKF(f && f->dtype != XI_GGML && f->act == (f->dtype == XI_BF16 ? XI_WACT_BF16 : XI_WACT_F32), "%s",
                   t->name);
            continue;
        }
        ggml_rows++;
        CHECKF(f->qtype == t && f->block == t->block && f->act == XI_WACT_GGML && f->ggml_act == t->act,
               "%s: the row does not state its qtype's block or activation format", t->name);
    }
    CHECK_EQ(ggml_rows, n - 5);
}

/* A weight of format f, N x K, from a llama256 GGUF tensor for the ggml rows (a copy in tw). */
static int make(test_weight *tw, xi_gguf **g, const xi_wformat *f, int64_t N, int64_t K) {
    memset(tw, 0, sizeof *tw);
    *g = NULL;
    if (f->dtype != XI_GGML) {
        weight_make(tw, f->dtype, N, K, 32);
        return 1;
    }
    char lower[16], rel[128], err[256];
    size_t j = 0;
    for (; f->name[j] && j < sizeof lower - 1; j++) lower[j] = (char)tolower((unsigned char)f->name[j]);
    lower[j] = 0;
    /* quantized --pure: every 2-D tensor of the file has the type (the K-quant mixes too) */
    for (int m = 0; m < 2 && !*g; m++) {
        snprintf(rel, sizeof rel, "gguf/llama256-random-%s%s.gguf", lower, m ? "_m" : "");
        *g = xi_gguf_open(xi_test_data(rel), err, sizeof err);
    }
    if (!*g) return 0;
    const xi_gguf_tensor *t = xi_gguf_find_tensor(*g, "blk.0.attn_q.weight");
    if (!t || t->type != f->qtype) return 0;
    /* our copy, which a repack may rewrite (the file is mapped read-only) */
    const int64_t n_out = XI_MIN(N, t->ne[1]);
    const size_t bytes = xi_qtype_row_bytes(t->type, t->ne[0]) * (size_t)n_out;
    if (!(tw->data = malloc(bytes))) return 0;
    memcpy(tw->data, t->data, bytes);
    tw->w = (xi_weight){.dtype = XI_GGML, .n_out = n_out, .n_in = t->ne[0], .data = tw->data, .qtype = t->type};
    return 1;
}

TEST(test_wformat_every_row_dequantize_is_the_one_hot_matmul) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    for (int i = 0; i < xi_wformat_count(); i++) {
        const xi_wformat *f = xi_wformat_at(i);
        /* each variant's exact table on the layout its exact and its int8 table load */
        for (int v = 0; v < nv; v++)
            for (int p = 0; p < 2; p++) {
                const xi_ops *ex = xi_ops_precision(ops[v], "exact", NULL, 0);
                const xi_ops *lo = xi_ops_precision(ops[v], p ? "int8" : "exact", NULL, 0);
                test_weight tw;
                xi_gguf *g;
                CHECKF(make(&tw, &g, f, 24, 96), "%s: no test weight", f->name);
                if (!tw.w.n_in) continue;
                const int block = xi_weight_block_for(lo, &tw.w);
                CHECK(xi_weight_block(&tw.w, block, NULL, 0) == 0);
                const int64_t N = tw.w.n_out, K = tw.w.n_in, R = 5;
                CHECKF(xi_wformat_of(&tw.w) == f, "%s", f->name);
                /* rows r: one-hot at input k_r (R = 5: the GEMM paths of the variants) */
                float *x = calloc((size_t)(R * K), 4), *y = malloc((size_t)(R * N) * 4),
                      *row = malloc((size_t)K * 4);
                const int64_t ks[5] = {0, 1, K / 2 + 3, K - 2, K - 1};
                for (int64_t r = 0; r < R; r++) x[r * K + ks[r]] = 1.0f;
                ex->matmul(y, N, x, K, R, &tw.w, 0, N);
                int bad = 0;
                for (int64_t n = 0; n < N && !bad; n++) {
                    f->dequant(&tw.w, n, 0, K, row);
                    for (int64_t r = 0; r < R && !bad; r++)
                        if (y[r * N + n] != row[ks[r]]) {
                            bad = 1;
                            CHECKF(0, "%s %s (layout %d): y[%lld, %lld] %g, W[%lld, %lld] %g", ops[v]->name,
                                   f->name, tw.w.block, (long long)r, (long long)n, y[r * N + n],
                                   (long long)n, (long long)ks[r], row[ks[r]]);
                        }
                }
                free(x), free(y), free(row);
                if (g) xi_gguf_close(g);
                weight_free(&tw);
            }
    }
}

/* The integer path of a row: xi_qdot_block is its activation block, 0 for the others. */
TEST(test_wformat_qdot_block_follows_the_row) {
    for (int i = 0; i < xi_wformat_count(); i++) {
        const xi_wformat *f = xi_wformat_at(i);
        const xi_weight w = {.dtype = f->dtype, .qtype = f->qtype, .n_out = 8, .n_in = 256, .group_size = 64};
        const int want = f->act != XI_WACT_QX ? 0 : f->act_block ? f->act_block : 64;
        CHECKF(xi_qdot_block(&w) == want, "%s: %d, expected %d", f->name, xi_qdot_block(&w), want);
    }
}
