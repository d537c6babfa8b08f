/* The packed GGML layout (kernels/gq_pack.h): packing loses nothing (every row reads back as
 * the file's bytes and floats), every variant computes a packed weight with the oracle's bits
 * of the stored one (llama256's real tensors of every type, rows 1-70, cut column ranges,
 * the integer extremes, activations that are not finite, threads and both precisions), and
 * the loader asks for it only where a table's kernel reads it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernel_util.h"
#include "kernels/gq_pack.h"
#include "kernels/wformat.h"
#include "model/gguf.h"
#include "test.h"

/* A packed copy of w (its data malloc'd into *buf). */
static xi_weight packed_copy(const xi_weight *w, uint8_t **buf) {
    const size_t bytes = xi_qtype_row_bytes(w->qtype, w->n_in) * (size_t)w->n_out;
    *buf = malloc(bytes);
    memcpy(*buf, w->data, bytes);
    xi_weight p = *w;
    p.data = *buf;
    char err[256];
    if (xi_gq_pack(&p, err, sizeof err)) p.block = -1;
    return p;
}

/* The rows of a packed weight read back as the file's bytes and as its floats. */
static int reads_back(const xi_weight *w, const xi_weight *p) {
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    uint8_t *buf = malloc(rb);
    float *a = malloc((size_t)w->n_in * 4), *b = malloc((size_t)w->n_in * 4);
    int ok = 1;
    for (int64_t n = 0; n < w->n_out && ok; n++) {
        ok = !memcmp(xi_gq_row(p, n, buf), (const uint8_t *)w->data + (size_t)n * rb, rb);
        xi_weight_row(w, n, a);
        xi_weight_row(p, n, b);
        ok = ok && !memcmp(a, b, (size_t)w->n_in * 4);
    }
    free(buf);
    free(a);
    free(b);
    return ok;
}

TEST(test_kernels_gq_pack_every_variant_matches_ref_on_llama256_tensors) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    const xi_ops *ref = xi_ops_precision(xi_ops_ref(), "int8", NULL, 0);
    char err[512] = "";
    const char *tensors[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"};
    const int64_t rows_list[] = {1, 2, 3, 5, 9, 70}; /* 70: past a 64-row chunk */
    int checks = 0;
    for (size_t f = 0; f < XI_ARRAY_LEN(GQ_LLAMA256); f++) {
        xi_gguf *g = gq_llama256_open(f, err, sizeof err);
        CHECKF(g, "%s", err);
        for (size_t ti = 0; ti < XI_ARRAY_LEN(tensors); ti++) {
            const xi_gguf_tensor *t = xi_gguf_find_tensor(g, tensors[ti]);
            CHECK(t && t->n_dims == 2 && t->type->unpack);
            const int64_t N = XI_MIN((int64_t)40, t->ne[1] / 8 * 8), K = t->ne[0];
            const xi_weight w = {.dtype = XI_GGML, .n_out = N, .n_in = K, .data = t->data, .qtype = t->type};
            uint8_t *buf;
            const xi_weight p = packed_copy(&w, &buf);
            CHECKF(p.block == 8, "%s %s: not packed", GQ_LLAMA256[f], tensors[ti]);
            CHECKF(reads_back(&w, &p), "%s %s: a packed row reads back differently", GQ_LLAMA256[f], tensors[ti]);
            for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                const int64_t R = rows_list[ri];
                float *x = rand_vec(R * K), *want = calloc((size_t)(R * N), 4), *got = calloc((size_t)(R * N), 4);
                gq_run(ref, want, x, R, &w, 0, N);
                for (int v = 0; v <= nv; v++) { /* every variant, and the oracle itself on p */
                    const xi_ops *o = v < nv ? ops[v] : ref;
                    const int64_t cuts[][2] = {{0, 7}, {7, 30}, {30, N}};
                    memset(got, 0xff, (size_t)(R * N) * 4);
                    for (size_t c = 0; c < XI_ARRAY_LEN(cuts); c++) gq_run(o, got, x, R, &p, cuts[c][0], cuts[c][1]);
                    int64_t at = 0;
                    CHECKF(same_bits(want, got, R * N, &at), "%s packed %s %s rows %lld: y[%lld] %a vs ref %a",
                           o->name, GQ_LLAMA256[f], tensors[ti], (long long)R, (long long)at, got[at], want[at]);
                    memset(got, 0xff, (size_t)(R * N) * 4);
                    gq_run(o, got, x, R, &p, 0, N);
                    CHECKF(same_bits(want, got, R * N, &at), "%s packed %s whole, rows %lld: y[%lld]", o->name,
                           GQ_LLAMA256[f], (long long)R, (long long)at);
                    checks += 2;
                }
                free(x);
                free(want);
                free(got);
            }
            free(buf);
        }
        xi_gguf_close(g);
    }
    printf("  %d packed runs bitwise the oracle on the stored tensors\n", checks);
}

/* Blocks at the integer extremes (as test_kernels_gq's), and rows whose activations are not
 * finite (an inf: the 8-bit scale is inf, the oracle's minterm NaN). */
TEST(test_kernels_gq_pack_extremes_and_non_finite_rows) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    const xi_ops *ref = xi_ops_precision(xi_ops_ref(), "int8", NULL, 0);
    const int ids[] = {XI_GGML_Q8_0, XI_GGML_Q4_0, XI_GGML_Q5_0, XI_GGML_Q4_K, XI_GGML_Q6_K, XI_GGML_Q5_K};
    for (size_t i = 0; i < XI_ARRAY_LEN(ids); i++) {
        const xi_qtype *t = xi_qtype_get(ids[i]);
        const int64_t K = t->block == 256 ? 3 * 256 : 13 * 32, N = 24, R = 6;
        const size_t rb = xi_qtype_row_bytes(t, K), bb = (size_t)t->block_bytes;
        uint8_t *data = malloc(rb * (size_t)N);
        for (size_t b = 0; b < rb * (size_t)N; b++) data[b] = (uint8_t)rnd();
        for (int64_t k = 0; k < K / t->block; k++) { /* row 0 every code at its top, row 1 at 0 */
            const size_t at = ids[i] == XI_GGML_Q6_K ? 0 : (size_t)(2 * t->f16_n);
            const size_t len = ids[i] == XI_GGML_Q6_K ? 192 : ids[i] == XI_GGML_Q4_K ? 140 : bb - at;
            memset(data + (size_t)k * bb + at, ids[i] == XI_GGML_Q8_0 ? 0x7f : 0xff, len);
            memset(data + rb + (size_t)k * bb + at, ids[i] == XI_GGML_Q8_0 ? 0x80 : 0x00, len);
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t b = 0; b < K / t->block; b++) gq_fix_scales(t, data + (size_t)n * rb + (size_t)b * bb);
        const xi_weight w = {.dtype = XI_GGML, .n_out = N, .n_in = K, .data = data, .qtype = t};
        uint8_t *buf;
        const xi_weight p = packed_copy(&w, &buf);
        CHECK(p.block == 8 && reads_back(&w, &p));
        float *x = malloc((size_t)(R * K) * 4), *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
        for (int64_t k = 0; k < R * K; k++) {
            const int64_t r = k / K;
            x[k] = r == 0 ? 1.0f : r == 1 ? -1.0f : r == 2 ? (k % 2 ? 2.0f : -2.0f) : frand();
        }
        x[4 * K + 3] = INFINITY; /* row 4's first block */
        for (int c = 0; c < 3; c++) { /* one row (decode) at the extremes, one with the inf, all six */
            const int64_t rows = c < 2 ? 1 : R;
            const float *xr = c == 1 ? x + 4 * K : x;
            gq_run(ref, want, xr, rows, &w, 0, N);
            for (int v = 0; v < nv; v++) {
                memset(got, 0xff, (size_t)(R * N) * 4);
                gq_run(ops[v], got, xr, rows, &p, 0, N);
                int64_t at = 0;
                CHECKF(same_bits(want, got, rows * N, &at), "%s packed %s, %lld rows: y[%lld] %a vs ref %a",
                       ops[v]->name, t->name, (long long)rows, (long long)at, got[at], want[at]);
            }
        }
        free(buf);
        free(data);
        free(x);
        free(want);
        free(got);
    }
}

/* Through xi_matmul on 1-3 threads, int8 and exact: a packed weight gives the stored one's
 * bits in every table (the exact tables dequantize it back). */
TEST(test_kernels_gq_pack_threads_and_both_precisions) {
    char err[512] = "";
    xi_gguf *g = xi_gguf_open(xi_test_data("gguf/llama256-random-q4_k_m.gguf"), err, sizeof err);
    CHECKF(g, "%s", err);
    const char *names[] = {"blk.0.ffn_up.weight", "output.weight"};
    const xi_ops *all[8];
    const int nv = xi_ops_available(all, 8);
    int runs = 0;
    for (size_t ni = 0; ni < XI_ARRAY_LEN(names); ni++) {
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, names[ni]);
        CHECK(t);
        const int64_t N = t->ne[1] / 8 * 8, K = t->ne[0], R = 20;
        const xi_weight w = {.dtype = XI_GGML, .n_out = N, .n_in = K, .data = t->data, .qtype = t->type};
        uint8_t *buf;
        const xi_weight p = packed_copy(&w, &buf);
        CHECK(p.block == 8);
        float *x = rand_vec(R * K), *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
        for (int v = 0; v < nv; v++)
            for (int prec = 0; prec < 2; prec++) {
                const xi_ops *o = xi_ops_precision(all[v], prec ? "exact" : "int8", NULL, 0);
                for (int64_t rows = 1; rows <= R; rows += R - 1) {
                    xi_pool *one = xi_pool_new(1);
                    xi_matmul(one, o, want, x, rows, &w, NULL);
                    xi_pool_free(one);
                    for (int th = 1; th <= 3; th++) {
                        xi_pool *pool = xi_pool_new(th);
                        memset(got, 0xff, (size_t)(R * N) * 4);
                        xi_matmul(pool, o, got, x, rows, &p, NULL);
                        xi_pool_free(pool);
                        int64_t at = 0;
                        CHECKF(same_bits(want, got, rows * N, &at), "%s %s %s %lld rows, %d threads: differs at %lld",
                               o->name, o->precision, t->type->name, (long long)rows, th, (long long)at);
                        runs++;
                    }
                }
            }
        free(buf);
        free(x);
        free(want);
        free(got);
    }
    printf("  %d threaded runs of packed weights bitwise the stored ones\n", runs);
    xi_gguf_close(g);
}

/* The loader's choice (xi_weight_block_for): packed only for an int8 table whose matmul_gq
 * reads it, for the types with a packed path and n_out a multiple of 8. */
TEST(test_kernels_gq_pack_is_asked_for_where_a_kernel_reads_it) {
    const xi_ops *all[8];
    const int nv = xi_ops_available(all, 8);
    int asked = 0;
    for (int v = 0; v < nv; v++)
        for (int prec = 0; prec < 2; prec++) {
            const xi_ops *o = xi_ops_precision(all[v], prec ? "exact" : "int8", NULL, 0);
            const int ids[] = {XI_GGML_Q4_0, XI_GGML_Q5_0, XI_GGML_Q4_K, XI_GGML_Q6_K,
                               XI_GGML_Q8_0, XI_GGML_Q5_K, XI_GGML_Q4_1, XI_GGML_Q3_K};
            for (size_t i = 0; i < XI_ARRAY_LEN(ids); i++) {
                const xi_qtype *t = xi_qtype_get(ids[i]);
                const int has = i < 5; /* wformat.c's packed types */
                for (int64_t n_out = 16; n_out <= 20; n_out += 4) {
                    const xi_weight w = {.dtype = XI_GGML, .n_out = n_out, .n_in = 256, .qtype = t};
                    const int want = !prec && o->gq_block == 8 && has && n_out % 8 == 0 ? 8 : 0;
                    const int got = xi_weight_block_for(o, &w);
                    CHECKF(got == want, "%s %s %s n_out %lld: block %d, expected %d", o->name, o->precision,
                           t->name, (long long)n_out, got, want);
                    asked += got == 8;
                }
            }
        }
    if (!asked)
        printf("  no table here reads the packed layout (no avx2): the checks above are that it is never asked for\n");
    else
        printf("  %d type/table pairs packed\n", asked);
}
