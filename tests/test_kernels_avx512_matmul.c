/* The avx512 tables' fp32 matmul (src/kernels/x86/avx512_matmul.c) gives the avx2 table's
 * bits on the blocked dense layouts for every row count (its GEMM tiles from 8 rows, F32 64;
 * avx2's below, so decode and prefill agree), column range and thread split: natively where
 * the CPU has AVX-512 F, and through SIMDe (the same source built with XI_AVX512_EMULATED)
 * everywhere the test binary has it. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernel_util.h"
#include "test.h"
#ifdef XI_TEST_AVX512_EMULATED
#include "avx512_emulated.h"
#endif

#if defined(__x86_64__)
typedef void (*matmul_fn)(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                          const xi_weight *w, int64_t n0, int64_t n1);

/* f against avx2 on blocked F32 / F16 / BF16 / Q8 weights: odd and even n_in (BF16's
 * unpaired last input), n_in past 2048 (2 zmm blocks per group), odd block counts (half a
 * zmm block), rows around the tiles' switch and past a 64-row block, cut column ranges.
 * *cases: the number compared. */
static void check_against_avx2(matmul_fn f, int *cases) {
    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16, XI_Q8};
    const int64_t ks[] = {1, 7, 258, 2101}, ns[] = {8, 40, 136};
    const int64_t rows_list[] = {1, 7, 8, 9, 13, 63, 64, 70};
    *cases = 0;
    for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++)
        for (size_t ki = 0; ki < XI_ARRAY_LEN(ks); ki++)
            for (size_t ni = 0; ni < XI_ARRAY_LEN(ns); ni++) {
                const int64_t K = ks[ki], N = ns[ni], R = 70;
                const wfmt fmt = {dts[d], 0, 8};
                test_weight tw;
                CHECK(weight_make_f(&tw, &fmt, N, K) && tw.w.block == 8);
                float *x = rand_vec(R * K), *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
                for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                    const int64_t rows = rows_list[ri];
                    const int64_t ranges[][2] = {{0, N}, {5, 21}, {16, N - 3}};
                    for (size_t g = 0; g < XI_ARRAY_LEN(ranges); g++) {
                        const int64_t n0 = ranges[g][0], n1 = XI_MIN(ranges[g][1], N);
                        if (n0 >= n1) continue;
                        for (int64_t i = 0; i < rows * N; i++) want[i] = got[i] = (float)i; /* untouched outside */
                        xi_avx2_matmul(want, N, x, K, rows, &tw.w, n0, n1);
                        f(got, N, x, K, rows, &tw.w, n0, n1);
                        int64_t at = 0;
                        while (at < rows * N && !memcmp(&want[at], &got[at], 4)) at++;
                        ++*cases;
                        CHECKF(at == rows * N, "%s K=%lld N=%lld rows=%lld columns [%lld, %lld): y[%lld] %a, avx2's %a",
                               xi_dtype_name(dts[d]), (long long)K, (long long)N, (long long)rows, (long long)n0,
                               (long long)n1, (long long)at, got[at], want[at]);
                    }
                }
                free(x);
                free(want);
                free(got);
                weight_free(&tw);
            }
}

#endif

#if defined(__x86_64__) && defined(XI_TEST_AVX512_EMULATED)
TEST(test_kernels_avx512_matmul_emulated_gives_avx2_bits) {
    int cases;
    check_against_avx2(xi_avx512_matmul_emulated, &cases);
    printf("  %d cases bitwise avx2's\n", cases);
}
#else
TEST(test_kernels_avx512_matmul_emulated_gives_avx2_bits) {
    SKIP("no emulated AVX-512 kernel in this build (x86-64 with SIMDe, libsimde-dev, only)");
}
#endif

/* The real tables where the CPU has them, also split over threads (xi_matmul), both
 * precisions (the exact and int8 tables share this matmul). */
TEST(test_kernels_avx512_matmul_native_gives_avx2_bits) {
#if defined(__x86_64__)
    const xi_ops *ops[8];
    const int n = xi_ops_available(ops, 8);
    const xi_ops *v = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i]->name, "avx512")) v = ops[i];
    if (!v) SKIP("no avx512 (F/BW/VL/VNNI) on this CPU: the avx512 table is not available");
    CHECK(v->matmul == xi_avx512_matmul && xi_ops_precision(v, "int8", NULL, 0)->matmul == xi_avx512_matmul);
    int cases;
    check_against_avx2(v->matmul, &cases);
    xi_pool *pool = xi_pool_new(3), *one = xi_pool_new(1);
    const xi_ops *avx2 = xi_ops_avx2();
    const xi_dtype dts[] = {XI_F16, XI_BF16};
    for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++) {
        const int64_t K = 901, N = 200, R = 33;
        const wfmt fmt = {dts[d], 0, 8};
        test_weight tw;
        CHECK(weight_make_f(&tw, &fmt, N, K));
        float *x = rand_vec(R * K), *a = malloc((size_t)(R * N) * 4), *b = malloc((size_t)(R * N) * 4);
        xi_matmul(one, avx2, a, x, R, &tw.w, NULL);
        xi_matmul(pool, v, b, x, R, &tw.w, NULL);
        CHECKF(!memcmp(a, b, (size_t)(R * N) * 4), "%s: 3 threads of avx512 differ from avx2", xi_dtype_name(dts[d]));
        free(x);
        free(a);
        free(b);
        weight_free(&tw);
    }
    xi_pool_free(pool);
    xi_pool_free(one);
    printf("  %d cases bitwise avx2's, and 3 threads\n", cases);
#else
    SKIP("not x86-64");
#endif
}
