/* The AVX-512 VNNI GGML integer matmul (src/kernels/x86/avx512_gq.c) is bitwise the scalar
 * oracle xi_matmul_gq_ref: on the llama.cpp-quantized llama256 tensors of every type (its
 * fast paths Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and the types it hands to the avx2 kernel) for
 * 1 .. 70 rows and odd column ranges, and on synthetic blocks at the integer extremes.
 * Machines without AVX-512 run the same source built through SIMDe (the Makefile's emulated
 * object, tests/avx512_emulated.h); the native table is tested where the CPU has it. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/qtypes.h"
#include "model/gguf.h"
#include "test.h"
#ifdef XI_TEST_AVX512_EMULATED
#include "avx512_emulated.h"
#endif

typedef void (*gq_fn)(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1);

/* y = rows of x (quantized as kernels.c does) times w's columns [n0, n1) through f; NULL f:
 * the oracle. */
static void run(gq_fn f, float *y, const float *x, int64_t rows, const xi_weight *w, int64_t n0,
                int64_t n1) {
    size_t stride;
    const void *a = xi_gq_quantize(NULL, w, x, w->n_in, rows, &stride);
    (f ? f : xi_matmul_gq_ref)(y, w->n_out, a, stride, rows, w, n0, n1);
}

/* Whether f gives the oracle's bits for all of [0, N) and, over a poisoned y, for [3, N - 5)
 * (outside it y stays untouched); *what says where it did not. */
static int matches_ref(gq_fn f, const xi_weight *w, const float *x, int64_t R, char *what, size_t wl) {
    const int64_t N = w->n_out;
    float *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
    run(NULL, want, x, R, w, 0, N);
    int ok = 1;
    for (int pass = 0; pass < 2 && ok; pass++) {
        const int64_t n0 = pass ? 3 : 0, n1 = pass ? N - 5 : N;
        memset(got, 0xff, (size_t)(R * N) * 4);
        run(f, got, x, R, w, n0, n1);
        for (int64_t i = 0; i < R * N && ok; i++) {
            const int64_t n = i % N;
            const int inside = n >= n0 && n < n1;
            uint32_t g;
            memcpy(&g, &got[i], 4);
            if (inside ? memcmp(&got[i], &want[i], 4) : g != 0xffffffffu) {
                snprintf(what, wl, "%s rows %lld, columns [%lld, %lld): y[%lld][%lld] %a, the oracle's %a",
                         w->qtype->name, (long long)R, (long long)n0, (long long)n1, (long long)(i / N),
                         (long long)n, got[i], want[i]);
                ok = 0;
            }
        }
    }
    free(want);
    free(got);
    return ok;
}

/* Every llama256 file's attn_q and ffn_down (45 columns: two 16-column tiles and a tail). */
static void check_llama256(gq_fn f) {
    char err[512] = "", what[256] = "";
    const char *tensors[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"};
    const int64_t rows_list[] = {1, 2, 3, 4, 5, 9, 17, 70}; /* 70: past a 64-row chunk */
    int cases = 0;
    for (size_t fi = 0; fi < XI_ARRAY_LEN(GQ_LLAMA256); fi++) {
        xi_gguf *g = gq_llama256_open(fi, err, sizeof err);
        CHECKF(g, "%s", err);
        for (size_t ti = 0; ti < XI_ARRAY_LEN(tensors); ti++) {
            const xi_gguf_tensor *t = xi_gguf_find_tensor(g, tensors[ti]);
            CHECK(t && t->n_dims == 2 && t->type->unpack);
            const xi_weight w = {.dtype = XI_GGML, .n_out = XI_MIN((int64_t)45, t->ne[1]), .n_in = t->ne[0],
                                 .data = t->data, .qtype = t->type};
            for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                float *x = rand_vec(rows_list[ri] * w.n_in);
                const int ok = matches_ref(f, &w, x, rows_list[ri], what, sizeof what);
                free(x);
                CHECKF(ok, "%s %s: %s", GQ_LLAMA256[fi], tensors[ti], what);
                cases++;
            }
        }
        xi_gguf_close(g);
    }
    printf("  %d tensor / row-count cases bitwise the oracle (whole and [3, n - 5))\n", cases);
}

/* Random bytes with sane block scales; column 0 every code at its largest (Q8_0: -128 and
 * its other lanes 127; K types' 6-bit scales and mins 63 as well), column 1 every code 0;
 * activation rows of +-1 (codes +-127, every sum at its bound), alternating +-2, random. */
static void check_extremes(gq_fn f) {
    const int ids[] = {XI_GGML_Q8_0, XI_GGML_Q4_0, XI_GGML_Q4_K, XI_GGML_Q5_K, XI_GGML_Q6_K,
                       XI_GGML_Q4_1, XI_GGML_Q5_0, XI_GGML_Q2_K, XI_GGML_Q3_K, XI_GGML_IQ4_NL};
    char what[256] = "";
    for (size_t ii = 0; ii < XI_ARRAY_LEN(ids); ii++) {
        const xi_qtype *t = xi_qtype_get(ids[ii]);
        const int64_t K = t->block == 256 ? 3 * 256 : 13 * 32, N = 37, R = 7, nb = K / t->block;
        const size_t rb = xi_qtype_row_bytes(t, K);
        const int bb = t->block_bytes;
        uint8_t *data = malloc(rb * (size_t)N);
        for (size_t b = 0; b < rb * (size_t)N; b++) data[b] = (uint8_t)rnd();
        for (int64_t k = 0; k < nb; k++) {
            uint8_t *b0 = data + (size_t)k * (size_t)bb, *b1 = data + rb + (size_t)k * (size_t)bb,
                    *b2 = data + 2 * rb + (size_t)k * (size_t)bb;
            switch (t->id) {
            case XI_GGML_Q8_0:
                memset(b0 + 2, 0x80, 32), memset(b1 + 2, 0, 32), memset(b2 + 2, 0x7f, 32);
                break;
            case XI_GGML_Q6_K: memset(b0, 0xff, 192), memset(b1, 0, 192), memset(b0 + 192, 0x80, 16); break;
            case XI_GGML_Q4_K:
            case XI_GGML_Q5_K: memset(b0 + 4, 0xff, (size_t)bb - 4), memset(b1 + 16, 0, (size_t)bb - 16); break;
            case XI_GGML_Q2_K: case XI_GGML_Q3_K: break; /* the avx2 kernel's own extremes test covers them */
            default: memset(b0 + 2, 0xff, (size_t)bb - 2), memset(b1 + 2, 0, (size_t)bb - 2); break;
            }
        }
        for (int64_t n = 0; n < N; n++)
            for (int64_t b = 0; b < nb; b++) gq_fix_scales(t, data + (size_t)n * rb + (size_t)b * (size_t)bb);
        const xi_weight w = {.dtype = XI_GGML, .n_out = N, .n_in = K, .data = data, .qtype = t};
        float *x = malloc((size_t)(R * K) * 4);
        for (int64_t k = 0; k < R * K; k++) {
            const int64_t r = k / K;
            x[k] = r == 0 ? 1.0f : r == 1 ? -1.0f : r == 2 ? (k % 2 ? 2.0f : -2.0f) : frand();
        }
        int ok = 1;
        for (int64_t rows = 1; rows <= R && ok; rows += 3) /* 1, 4, 7 rows */
            ok = matches_ref(f, &w, x, rows, what, sizeof what);
        free(data);
        free(x);
        CHECKF(ok, "%s", what);
    }
}

/* Quantized rows with a non-finite scale over nonzero codes (the quantizer never gives one: a
 * row with an inf gets codes 0), which the tiles of the types without mins must not take as
 * they take a finite one: block 1 of row 1 with scale inf, block 0 of row 2 NaN, rows 0 and 3
 * as quantized; each row alone and the 4 as one call; every llama256 file's attn_q, bitwise
 * the oracle. */
static void check_nonfinite_scales(gq_fn f) {
    char err[512] = "";
    int cases = 0;
    for (size_t fi = 0; fi < XI_ARRAY_LEN(GQ_LLAMA256); fi++) {
        xi_gguf *g = gq_llama256_open(fi, err, sizeof err);
        CHECKF(g, "%s", err);
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "blk.0.attn_q.weight");
        CHECK(t && t->n_dims == 2 && t->type->unpack);
        const xi_weight w = {.dtype = XI_GGML, .n_out = XI_MIN((int64_t)45, t->ne[1]), .n_in = t->ne[0],
                             .data = t->data, .qtype = t->type};
        const int64_t K = w.n_in, R = 4, N = w.n_out;
        float *x = rand_vec(R * K);
        size_t as;
        const void *q = xi_gq_quantize(NULL, &w, x, K, R, &as);
        uint8_t *act = malloc(as * R);
        memcpy(act, q, as * R);
        const int f32d = t->type->act == XI_ACT_Q8_K; /* f32 d, else f16 */
        const size_t bb = (size_t)xi_act_block_bytes(t->type->act);
        const float vals[2] = {INFINITY, NAN};
        for (int j = 0; j < 2; j++) {
            uint8_t *d = act + (size_t)(j + 1) * as + (size_t)(1 - j) * bb;
            if (f32d) {
                memcpy(d, &vals[j], 4);
            } else {
                const uint16_t h = j ? 0x7e00 : 0x7c00;
                memcpy(d, &h, 2);
            }
        }
        float *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
        for (int64_t r0 = 0; r0 <= R; r0++) { /* r0 < R: row r0 alone; R: all rows */
            const int64_t rows = r0 < R ? 1 : R, off = r0 < R ? r0 : 0;
            xi_matmul_gq_ref(want, N, act + (size_t)off * as, as, rows, &w, 0, N);
            memset(got, 0xff, (size_t)(R * N) * 4);
            f(got, N, act + (size_t)off * as, as, rows, &w, 0, N);
            int64_t at = 0;
            while (at < rows * N && !memcmp(&got[at], &want[at], 4)) at++;
            CHECKF(at == rows * N, "%s, rows from %lld (%lld): y[%lld] %a, the oracle's %a", GQ_LLAMA256[fi],
                   (long long)off, (long long)rows, (long long)at, got[at], want[at]);
            cases++;
        }
        free(want);
        free(got);
        free(act);
        free(x);
        xi_gguf_close(g);
    }
    printf("  %d calls with inf / NaN activation scales bitwise the oracle\n", cases);
}

#if defined(__x86_64__) && defined(XI_TEST_AVX512_EMULATED)
TEST(test_kernels_gq_avx512_emulated_matches_ref_on_llama256_tensors) { check_llama256(xi_matmul_gq_avx512_emulated); }
TEST(test_kernels_gq_avx512_emulated_matches_ref_at_integer_extremes) { check_extremes(xi_matmul_gq_avx512_emulated); }
TEST(test_kernels_gq_avx512_emulated_matches_ref_on_nonfinite_act_scales) { check_nonfinite_scales(xi_matmul_gq_avx512_emulated); }

/* Through xi_matmul in a table like the avx512 one (avx2's with this matmul_gq): 1, 2 and 3
 * threads split the columns and, from 16 rows, share the quantized rows; the bits stay the
 * oracle's (Q4_K, Q5_K, Q6_K ffn_up: 768 columns). */
TEST(test_kernels_gq_avx512_emulated_threads_keep_the_oracle_bits) {
    const xi_ops *all[8], *avx2 = NULL;
    const int nv = xi_ops_available(all, 8);
    for (int i = 0; i < nv; i++)
        if (!strcmp(all[i]->name, "avx2")) avx2 = xi_ops_precision(all[i], "int8", NULL, 0);
    if (!avx2) SKIP("no avx2 table on this CPU: the emulated kernel needs AVX2");
    xi_ops emu = *avx2;
    emu.matmul_gq = xi_matmul_gq_avx512_emulated;
    const size_t files[] = {8, 9, 10}; /* q4_k_m, q5_k_m, q6_k in GQ_LLAMA256 */
    char err[512] = "";
    int runs = 0;
    for (size_t fi = 0; fi < XI_ARRAY_LEN(files); fi++) {
        xi_gguf *g = gq_llama256_open(files[fi], err, sizeof err);
        CHECKF(g, "%s", err);
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "blk.0.ffn_up.weight");
        CHECK(t && t->n_dims == 2 && t->type->unpack);
        const xi_weight w = {.dtype = XI_GGML, .n_out = t->ne[1], .n_in = t->ne[0], .data = t->data, .qtype = t->type};
        for (int64_t R = 3; R <= 40; R += 37) {
            float *x = rand_vec(R * w.n_in), *want = malloc((size_t)(R * w.n_out) * 4),
                  *got = malloc((size_t)(R * w.n_out) * 4);
            run(NULL, want, x, R, &w, 0, w.n_out);
            for (int th = 1; th <= 3; th++) {
                xi_pool *pool = xi_pool_new(th);
                memset(got, 0xff, (size_t)(R * w.n_out) * 4);
                xi_matmul(pool, &emu, got, x, R, &w, NULL);
                xi_pool_free(pool);
                int64_t at = 0;
                while (at < R * w.n_out && !memcmp(&got[at], &want[at], 4)) at++;
                CHECKF(at == R * w.n_out, "%s, %lld rows, %d threads: y[%lld] %a, the oracle's %a", t->type->name,
                       (long long)R, th, (long long)at, got[at], want[at]);
                runs++;
            }
            free(x);
            free(want);
            free(got);
        }
        xi_gguf_close(g);
    }
    printf("  %d threaded runs bitwise the oracle\n", runs);
}
#else
TEST(test_kernels_gq_avx512_emulated_matches_ref) {
    SKIP("no emulated AVX-512 kernel in this build (x86-64 with SIMDe, libsimde-dev, only)");
    check_llama256(NULL); /* not reached: keeps the helpers used */
    check_extremes(NULL);
    check_nonfinite_scales(NULL);
}
#endif

/* The real table, where the CPU has AVX-512 VNNI (dispatch.c's cpuid + XCR0 check). */
TEST(test_kernels_gq_avx512_native_matches_ref) {
    const xi_ops *ops[8];
    const int n = xi_ops_available(ops, 8);
    const xi_ops *v = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i]->name, "avx512")) v = xi_ops_precision(ops[i], "int8", NULL, 0);
    if (!v) SKIP("no avx512_vnni on this CPU (or not x86-64): the avx512 table is not available");
    CHECK(v->matmul_gq && v->twin && !strcmp(v->twin->name, "avx512") && !strcmp(v->twin->precision, "exact"));
    check_llama256(v->matmul_gq);
    check_extremes(v->matmul_gq);
    check_nonfinite_scales(v->matmul_gq);
}
