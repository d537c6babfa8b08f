/* GGML block-format weights in the kernels (dtype GGML): every variant's integer matmul is
 * bitwise the scalar oracle (xi_qtype_dot_ref per output) for every supported type, on the
 * real llama.cpp-quantized llama256 tensors and on synthetic blocks at the integer extremes;
 * the threaded matmul gives the same bits for any thread count and column split; the exact
 * tables' fp32 path is dequantize + dot; and the integer path stays within 8-bit activation
 * error of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernel_util.h"
#include "kernels/qtypes.h"
#include "model/gguf.h"
#include "test.h"

static xi_weight gguf_weight(const xi_gguf_tensor *t, int64_t n_out) {
    return (xi_weight){.dtype = XI_GGML, .n_out = n_out, .n_in = t->ne[0], .data = t->data,
                       .qtype = t->type};
}

TEST(test_kernels_gq_every_variant_matches_ref_on_llama256_tensors) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    char err[512] = "";
    const char *tensors[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"};
    const int64_t rows_list[] = {1, 2, 3, 4, 5, 9, 17, 70}; /* 70: past a 64-row chunk */
    for (size_t f = 0; f < XI_ARRAY_LEN(GQ_LLAMA256); f++) {
        xi_gguf *g = gq_llama256_open(f, err, sizeof err);
        CHECKF(g, "%s", err);
        for (size_t ti = 0; ti < XI_ARRAY_LEN(tensors); ti++) {
            const xi_gguf_tensor *t = xi_gguf_find_tensor(g, tensors[ti]);
            CHECK(t && t->n_dims == 2 && t->type->unpack);
            const int64_t N = XI_MIN((int64_t)45, t->ne[1]), K = t->ne[0];
            const xi_weight w = gguf_weight(t, N);
            for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                const int64_t R = rows_list[ri];
                float *x = rand_vec(R * K), *want = calloc((size_t)(R * N), 4),
                      *got = calloc((size_t)(R * N), 4);
                gq_run(xi_ops_precision(xi_ops_ref(), "int8", NULL, 0), want, x, R, &w, 0, N);
                for (int v = 0; v < nv; v++) {
                    /* whole, and a split at odd columns */
                    const int64_t cuts[][2] = {{0, N}, {0, 7}, {7, 30}, {30, N}};
                    memset(got, 0xff, (size_t)(R * N) * 4);
                    for (size_t c = 1; c < XI_ARRAY_LEN(cuts); c++)
                        gq_run(ops[v], got, x, R, &w, cuts[c][0], cuts[c][1]);
                    int64_t at = 0;
                    CHECKF(same_bits(want, got, R * N, &at), "%s %s %s rows %lld: y[%lld] %a vs ref %a",
                           ops[v]->name, GQ_LLAMA256[f], tensors[ti], (long long)R, (long long)at,
                           got[at], want[at]);
                    gq_run(ops[v], got, x, R, &w, 0, N);
                    CHECKF(same_bits(want, got, R * N, &at), "%s %s whole: y[%lld]", ops[v]->name,
                           GQ_LLAMA256[f], (long long)at);
                }
                free(x);
                free(want);
                free(got);
            }
        }
        xi_gguf_close(g);
    }
}

/* Random blocks with sane scales, at the extremes: every byte random (Q8_0 codes include
 * -128, nibbles 0 and 15), activations all +-max, so int16 pair sums and int32 block sums
 * sit at their largest. */
TEST(test_kernels_gq_every_variant_matches_ref_at_integer_extremes) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    const int ids[] = {XI_GGML_Q8_0, XI_GGML_Q4_0, XI_GGML_Q4_1,   XI_GGML_Q5_0, XI_GGML_Q5_1,
                       XI_GGML_Q2_K, XI_GGML_Q3_K, XI_GGML_Q4_K,   XI_GGML_Q5_K, XI_GGML_Q6_K,
                       XI_GGML_IQ4_NL};
    for (size_t i = 0; i < XI_ARRAY_LEN(ids); i++) {
        const xi_qtype *t = xi_qtype_get(ids[i]);
        /* three blocks of 256 or 13 of 32: odd block counts per row */
        const int64_t K = t->block == 256 ? 3 * 256 : 13 * 32, N = 19, R = 6;
        const size_t rb = xi_qtype_row_bytes(t, K);
        uint8_t *data = malloc(rb * (size_t)N);
        for (size_t b = 0; b < rb * (size_t)N; b++) data[b] = (uint8_t)rnd();
        if (ids[i] == XI_GGML_Q8_0) /* every code -128 in row 0, 127 in row 1 */
            for (int64_t k = 0; k < K / 32; k++) {
                memset(data + (size_t)k * 34 + 2, 0x80, 32);
                memset(data + rb + (size_t)k * 34 + 2, 0x7f, 32);
            }
        if (ids[i] == XI_GGML_Q4_0) /* every code 15 in row 0, 0 in row 1: with x of +-1 the
                                     * int16 sums of the lanes-as-columns tile at their bound */
            for (int64_t k = 0; k < K / 32; k++) {
                memset(data + (size_t)k * 18 + 2, 0xff, 16);
                memset(data + rb + (size_t)k * 18 + 2, 0x00, 16);
            }
        if (ids[i] == XI_GGML_Q5_0) /* likewise every code 31 in row 0 (qh and qs all ones), 0 in row 1 */
            for (int64_t k = 0; k < K / 32; k++) {
                memset(data + (size_t)k * 22 + 2, 0xff, 20);
                memset(data + rb + (size_t)k * 22 + 2, 0x00, 20);
            }
        if (ids[i] == XI_GGML_Q6_K) /* every code 63 in row 0 (ql and qh all ones), 0 in row 1 */
            for (int64_t k = 0; k < K / 256; k++) {
                memset(data + (size_t)k * 210, 0xff, 192);
                memset(data + rb + (size_t)k * 210, 0x00, 192);
            }
        for (int64_t n = 0; n < N; n++)
            for (int64_t b = 0; b < K / t->block; b++)
                gq_fix_scales(t, data + (size_t)n * rb + (size_t)b * (size_t)t->block_bytes);
        const xi_weight w = {.dtype = XI_GGML, .n_out = N, .n_in = K, .data = data, .qtype = t};
        float *x = malloc((size_t)(R * K) * 4), *want = malloc((size_t)(R * N) * 4),
              *got = malloc((size_t)(R * N) * 4);
        for (int64_t k = 0; k < R * K; k++) {
            const int64_t r = k / K;
            x[k] = r == 0 ? 1.0f : r == 1 ? -1.0f : r == 2 ? (k % 2 ? 2.0f : -2.0f) : frand();
        }
        gq_run(xi_ops_precision(xi_ops_ref(), "int8", NULL, 0), want, x, R, &w, 0, N);
        for (int v = 0; v < nv; v++) {
            gq_run(ops[v], got, x, R, &w, 0, N);
            int64_t at = 0;
            CHECKF(same_bits(want, got, R * N, &at), "%s %s: y[%lld] %a vs ref %a", ops[v]->name,
                   t->name, (long long)at, got[at], want[at]);
        }
        free(data);
        free(x);
        free(want);
        free(got);
    }
}

/* Through xi_matmul (the pool splits columns), 1 and 2 threads, int8 and exact tables: the
 * same bits as one call of the table's kernel over every column; and the integer path within
 * the 8-bit activation error of the exact (dequantize + fp32) path. */
TEST(test_kernels_gq_threads_do_not_change_bits_and_int8_tracks_exact) {
    char err[512] = "";
    xi_gguf *g = xi_gguf_open(xi_test_data("gguf/llama256-random-q4_k_m.gguf"), err, sizeof err);
    CHECKF(g, "%s", err);
    const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "blk.0.ffn_up.weight");
    CHECK(t && t->type->id == XI_GGML_Q4_K);
    const int64_t N = t->ne[1], K = t->ne[0], R = 3;
    const xi_weight w = gguf_weight(t, N);
    float *x = rand_vec(R * K), *y1 = malloc((size_t)(R * N) * 4), *y2 = malloc((size_t)(R * N) * 4),
          *ex = malloc((size_t)(R * N) * 4);
    xi_pool *p1 = xi_pool_new(1), *p2 = xi_pool_new(2);
    const xi_ops *all[8];
    const int nv = xi_ops_available(all, 8);
    for (int v = 0; v < nv; v++)
        for (int prec = 0; prec < 2; prec++) {
            const xi_ops *o = xi_ops_precision(all[v], prec ? "exact" : "int8", NULL, 0);
            xi_matmul(p1, o, y1, x, R, &w, NULL);
            xi_matmul(p2, o, y2, x, R, &w, NULL);
            int64_t at = 0;
            CHECKF(same_bits(y1, y2, R * N, &at), "%s %s: 1 vs 2 threads differ at %lld", o->name,
                   o->precision, (long long)at);
            if (prec) {
                /* exact: dequantize + fp32 dot in index order */
                float *row = malloc((size_t)K * 4);
                for (int64_t n = 0; n < N; n += 37) {
                    xi_weight_row(&w, n, row);
                    for (int64_t r = 0; r < R; r++) {
                        float acc = 0;
                        for (int64_t k = 0; k < K; k++) acc += x[r * K + k] * row[k];
                        CHECKF(!memcmp(&acc, &y1[r * N + n], 4), "%s exact y[%lld,%lld] %g vs %g",
                               o->name, (long long)r, (long long)n, y1[r * N + n], acc);
                    }
                }
                free(row);
                memcpy(ex, y1, (size_t)(R * N) * 4);
            }
        }
    /* the last variant's int8 y (y2 of prec 0 was overwritten: recompute) against exact */
    xi_matmul(p2, xi_ops_precision(all[nv - 1], "int8", NULL, 0), y2, x, R, &w, NULL);
    double err2 = 0, mag = 0;
    for (int64_t i = 0; i < R * N; i++) err2 += (double)(y2[i] - ex[i]) * (y2[i] - ex[i]), mag += (double)ex[i] * ex[i];
    printf("  q4_K %lldx%lld, 3 rows: int8 vs exact relative RMS %.2e\n", (long long)N, (long long)K,
           sqrt(err2 / mag));
    CHECKF(sqrt(err2 / mag) < 1e-2, "int8 path off by %.2e", sqrt(err2 / mag));
    CHECK(sqrt(err2 / mag) > 0); /* it is the integer path */
    xi_pool_free(p1);
    xi_pool_free(p2);
    free(x);
    free(y1);
    free(y2);
    free(ex);
    xi_gguf_close(g);
}

/* Every variant's activation quantizer gives the scalar one's bytes (Q8_0, Q8_1, Q8_K): on
 * random rows of several scales, rows whose products land exactly on halves (roundf's ties go
 * away from zero, lrintf's to even), Q8_K blocks whose largest magnitude appears with both
 * signs (the first one sets the scale's sign), a block of zeros and one lone value. */
TEST(test_kernels_gq_every_variant_quantizes_activations_as_ref) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    enum { N = 1024 };
    float *x = malloc(N * sizeof *x);
    uint8_t *want = malloc(N * 2), *got = malloc(N * 2);
    const xi_act_fmt fmts[] = {XI_ACT_Q8_0, XI_ACT_Q8_1, XI_ACT_Q8_K};
    int checked = 0;
    uint32_t seed = 7;
    for (int kase = 0; kase < 6; kase++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 1664525u + 1013904223u;
            const float u = (float)(seed >> 8) / 16777216.0f - 0.5f; /* [-0.5, 0.5) */
            switch (kase) {
            case 0: x[i] = u; break;
            case 1: x[i] = u * 1e-3f * (float)(1 + i % 7); break;
            case 2: x[i] = u * 3e4f; break;
            /* blocks with 127 (or -127) at their start: id = 1, every k + 0.5 is a tie */
            case 3: x[i] = i % 32 == 0 ? (i % 64 ? -127.0f : 127.0f) : (float)((int)(seed >> 25) - 64) + 0.5f; break;
            /* Q8_K: +m and -m both largest; which comes first alternates by block */
            case 4: x[i] = i % 256 == 5 ? ((i / 256) % 2 ? -2.0f : 2.0f) : i % 256 == 9 ? ((i / 256) % 2 ? 2.0f : -2.0f) : u; break;
            default: x[i] = i < 256 ? 0.0f : i == 300 ? -0.75f : i < 512 ? 0.0f : u * 254.0f; break;
            }
        }
        for (size_t f = 0; f < XI_ARRAY_LEN(fmts); f++) {
            const size_t bytes = (size_t)(N / xi_act_block(fmts[f]) * xi_act_block_bytes(fmts[f]));
            xi_qtype_quantize_act(fmts[f], x, want, N);
            for (int v = 0; v < nv; v++) {
                if (!ops[v]->quantize_act) continue;
                memset(got, 0xa5, bytes);
                ops[v]->quantize_act((int)fmts[f], x, got, N);
                size_t at = 0;
                while (at < bytes && got[at] == want[at]) at++;
                CHECKF(at == bytes, "%s: format %d, case %d: byte %zu is %u, the scalar's %u", ops[v]->name,
                       (int)fmts[f], kase, at, got[at], want[at]);
                checked++;
            }
        }
    }
    printf("  %d variant/format/case checks against the scalar quantizer\n", checked);
    free(x);
    free(want);
    free(got);
}

/* From 16 rows a threaded matmul quantizes its rows once, split across the pool, for all its
 * threads: the bits stay those of one thread quantizing everything (xi_matmul_part), for
 * GGML and Q8 weights, alone and beside a second linear of another format, on 1-3 threads. */
TEST(test_kernels_shared_row_quantization_keeps_the_bits) {
    char err[512] = "";
    xi_gguf *g = xi_gguf_open(xi_test_data("gguf/llama256-random-q4_k_m.gguf"), err, sizeof err);
    CHECKF(g, "%s", err);
    const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "blk.0.ffn_up.weight");
    CHECK(t && t->type->id == XI_GGML_Q4_K);
    const int64_t N = t->ne[1], K = t->ne[0], R = 40;
    const xi_weight wg = gguf_weight(t, N);
    float *wf = rand_vec(N * K);
    xi_weight wq;
    void *owned;
    size_t ob;
    CHECK(!xi_weight_quantize_q8(&wq, wf, XI_F32, N, K, &owned, &ob, err, sizeof err));
    float *x = rand_vec(R * K), *want = malloc((size_t)(R * N) * 8), *got = malloc((size_t)(R * N) * 8);
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    const xi_weight *pairs[3][2] = {{&wg, NULL}, {&wq, NULL}, {&wq, &wg}};
    int runs = 0;
    for (int v = 0; v < nv; v++)
        for (int p = 0; p < 3; p++) {
            const int n = pairs[p][1] ? 2 : 1;
            xi_linear lw[2], lg[2];
            for (int i = 0; i < n; i++) {
                lw[i] = (xi_linear){want + (size_t)i * R * N, pairs[p][i], NULL};
                lg[i] = (xi_linear){got + (size_t)i * R * N, pairs[p][i], NULL};
            }
            xi_matmul_part_n(ops[v], x, K, R, lw, n, N, 0, N);
            for (int th = 1; th <= 3; th++) {
                xi_pool *pool = xi_pool_new(th);
                memset(got, 0xff, (size_t)(R * N) * 8);
                xi_matmul_n(pool, ops[v], x, R, lg, n);
                xi_pool_free(pool);
                int64_t at = 0;
                CHECKF(same_bits(want, got, (int64_t)n * R * N, &at), "%s, case %d, %d threads: differs at %lld",
                       ops[v]->name, p, th, (long long)at);
                runs++;
            }
        }
    printf("  %d threaded runs of %lld rows bitwise one thread's\n", runs, (long long)R);
    xi_free_big(owned, ob);
    free(wf);
    free(x);
    free(want);
    free(got);
    xi_gguf_close(g);
}
