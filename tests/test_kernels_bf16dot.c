/* BF16 activations for BF16 weights (src/kernels/bf16dot.c, x86/avx512_bf16.c): the scalar
 * definition rounds and sums as it says, and the avx512bf16 int8 table's vdpbf16ps matmul
 * gives its bits for every row count, column range, odd n_in and thread split, natively
 * where the CPU has AVX-512 BF16 (there is no emulation of the instruction to run elsewhere). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernel_util.h"
#include "test.h"

static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TEST(test_bf16_round_ref_rounds_as_vcvtneps2bf16) {
    static const struct {
        uint32_t in;
        uint16_t out;
    } cases[] = {
        {0x3f800000u, 0x3f80}, /* 1 */
        {0x3f808000u, 0x3f80}, /* a tie to even, down */
        {0x3f818000u, 0x3f82}, /* a tie to even, up */
        {0x3f808001u, 0x3f81}, /* above the tie */
        {0x00400000u, 0x0000}, /* a denormal: zero */
        {0x80000001u, 0x8000}, /* a negative denormal: minus zero */
        {0x00800000u, 0x0080}, /* the smallest normal stays */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to infinity */
        {0xff800000u, 0xff80}, /* -inf */
        {0x7f800001u, 0x7fc0}, /* a signalling NaN comes out quiet */
        {0xffc00000u, 0xffc0},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(cases); i++) {
        const uint16_t got = xi_bf16_round1(f32_of(cases[i].in));
        CHECKF(got == cases[i].out, "%08x -> %04x, want %04x", cases[i].in, got, cases[i].out);
    }
}

/* A random bf16 weight of n_out x n_in in layout block (0 or 8), a few of its values
 * denormal (read as zero) and zero; returns whether the layout is as asked. */
static int bf16_weight(test_weight *tw, int64_t n_out, int64_t n_in, int block) {
    const wfmt fmt = {XI_BF16, 0, block};
    if (!weight_make_f(tw, &fmt, n_out, n_in)) return 0;
    uint16_t *d = tw->data;
    for (int64_t n = 0; n < tw->w.n_out; n += 3) {
        const int64_t k = (int64_t)(rnd() % (uint32_t)n_in);
        d[xi_weight_index(&tw->w, n, k)] = (uint16_t)((rnd() & 0x8000u) | (1 + rnd() % 0x7f));
    }
    return 1;
}

/* Rows of random inputs rounded to bf16 (row length xi_bf16_row_len), a few denormal. */
static uint16_t *bf16_rows(int64_t rows, int64_t K, float **xf) {
    float *x = rand_vec(rows * K);
    for (int64_t i = 0; i < rows * K; i += 97) x[i] = f32_of((rnd() & 0x80000000u) | (rnd() & 0x7fffffu));
    const int64_t L = xi_bf16_row_len(K);
    uint16_t *xb = malloc((size_t)(rows * L) * 2);
    xi_bf16_rows_into(NULL, x, K, 0, rows, K, xb);
    if (xf) *xf = x;
    else free(x);
    return xb;
}

/* The definition is a dot product (within the f32 rounding of n_in steps of the values it
 * reads), the same bits from either layout, and far from the fp32 result only as far as the
 * inputs' rounding takes it. */
TEST(test_bf16_ref_is_the_dot_of_the_rounded_values) {
    const int64_t K = 301, N = 24, R = 3, L = xi_bf16_row_len(K);
    test_weight rm, bl;
    CHECK(bf16_weight(&bl, N, K, 8));
    CHECK(bf16_weight(&rm, N, K, 0));
    for (int64_t n = 0; n < N; n++) /* the same values in both layouts */
        for (int64_t k = 0; k < K; k++)
            ((uint16_t *)rm.data)[xi_weight_index(&rm.w, n, k)] = ((const uint16_t *)bl.data)[xi_weight_index(&bl.w, n, k)];
    float *xf;
    uint16_t *xb = bf16_rows(R, K, &xf);
    CHECK(xb[L - 1] == 0); /* the pad of the odd last input */
    float a[R * N], b[R * N], e[R * N];
    xi_matmul_bf16_ref(a, N, xb, L, R, &bl.w, 0, N);
    xi_matmul_bf16_ref(b, N, xb, L, R, &rm.w, 0, N);
    CHECK(!memcmp(a, b, sizeof a));
    xi_ops_ref()->matmul(e, N, xf, K, R, &rm.w, 0, N);
    double worst = 0, worst_f32 = 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t n = 0; n < N; n++) {
            double dot = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const uint16_t wv = ((const uint16_t *)bl.data)[xi_weight_index(&bl.w, n, k)], xv = xb[r * L + k];
                const double wd = wv & 0x7f80 ? xi_bf16_to_f32(wv) : 0, xd = xv & 0x7f80 ? xi_bf16_to_f32(xv) : 0;
                dot += wd * xd;
                mag += fabs(wd * xd);
            }
            worst = fmax(worst, fabs(a[r * N + n] - dot) / (mag * K * FLT_EPSILON));
            worst_f32 = fmax(worst_f32, fabs(a[r * N + n] - e[r * N + n]) / mag);
        }
    CHECKF(worst <= 1.0, "bf16 sum off the exact dot by %.3g x n_in ulps of its magnitude", worst);
    CHECKF(worst_f32 > 0 && worst_f32 < 0.02, "bf16 vs fp32 inputs: %.3g of the magnitude", worst_f32);
    printf("  vs the exact dot %.3g n_in-ulps, vs fp32 inputs %.3g of |w||x|\n", worst, worst_f32);
    free(xf);
    free(xb);
    weight_free(&rm);
    weight_free(&bl);
}

static const xi_ops *bf16_table(void) {
    const xi_ops *ops[8];
    const int n = xi_ops_available(ops, 8);
    for (int i = 0; i < n; i++)
        if (ops[i]->name && !strcmp(ops[i]->name, "avx512bf16")) return xi_ops_precision(ops[i], "int8", NULL, 0);
    return NULL;
}

TEST(test_kernels_bf16dot_round_gives_ref_bits) {
    const xi_ops *v = bf16_table();
    if (!v) SKIP("no avx512_bf16 on this CPU: the avx512bf16 table is not available");
    CHECK(v->round_bf16 && v->matmul_bf16);
    for (int64_t n = 1; n <= 70; n++) {
        float *x = rand_vec(n);
        for (int64_t i = 0; i < n; i++) {
            const uint32_t k = rnd() % 8;
            if (k == 0) x[i] = f32_of(rnd()); /* any bits: NaN, inf, denormals, ties */
            if (k == 1) x[i] = f32_of((rnd() & 0xffff8000u) | 0x8000u);
        }
        uint16_t want[70], got[71];
        got[n] = 0x1234;
        xi_bf16_round_ref(want, x, n);
        v->round_bf16(got, x, n);
        CHECKF(!memcmp(want, got, (size_t)n * 2) && got[n] == 0x1234, "n=%lld", (long long)n);
        free(x);
    }
}

/* Every row count around the tiles' switches (4-row ymm tiles, zmm panels from 8, 256-row
 * blocks), odd and even n_in, n_in past 4096 (2 zmm blocks per group), odd block counts, cut
 * column ranges: the vdpbf16ps matmul against the definition, bitwise. */
TEST(test_kernels_bf16dot_matmul_gives_ref_bits) {
    const xi_ops *v = bf16_table();
    if (!v) SKIP("no avx512_bf16 on this CPU: the avx512bf16 table is not available");
    const int64_t ks[] = {1, 2, 7, 258, 901, 4099}, ns[] = {8, 40, 136};
    const int64_t rows_list[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 63, 64, 70, 256, 262};
    int cases = 0;
    for (size_t ki = 0; ki < XI_ARRAY_LEN(ks); ki++)
        for (size_t ni = 0; ni < XI_ARRAY_LEN(ns); ni++) {
            const int64_t K = ks[ki], N = ns[ni], R = K > 1000 ? 70 : 262, L = xi_bf16_row_len(K);
            if (K > 1000 && N > 40) continue; /* the definition's software fma is slow */
            test_weight tw;
            CHECK(bf16_weight(&tw, N, K, 8) && tw.w.block == 8);
            uint16_t *xb = bf16_rows(R, K, NULL);
            float *want = malloc((size_t)(R * N) * 4), *got = malloc((size_t)(R * N) * 4);
            xi_matmul_bf16_ref(want, N, xb, L, R, &tw.w, 0, N);
            for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                const int64_t rows = rows_list[ri];
                if (rows > R) continue;
                const int64_t ranges[][2] = {{0, N}, {5, 21}, {16, N - 3}};
                for (size_t g = 0; g < XI_ARRAY_LEN(ranges); g++) {
                    const int64_t n0 = ranges[g][0], n1 = XI_MIN(ranges[g][1], N);
                    if (n0 >= n1) continue;
                    for (int64_t i = 0; i < R * N; i++) got[i] = (float)i; /* untouched outside */
                    CHECK(v->matmul_bf16(got, N, xb, L, rows, &tw.w, n0, n1) == 0);
                    int64_t bad = -1;
                    for (int64_t r = 0; r < R && bad < 0; r++)
                        for (int64_t c = 0; c < N && bad < 0; c++) {
                            const int64_t i = r * N + c;
                            const float exp = r < rows && c >= n0 && c < n1 ? want[i] : (float)i;
                            if (memcmp(&exp, &got[i], 4)) bad = i;
                        }
                    ++cases;
                    CHECKF(bad < 0, "K=%lld N=%lld rows=%lld columns [%lld, %lld): y[%lld] %a, want %a", (long long)K,
                           (long long)N, (long long)rows, (long long)n0, (long long)n1, (long long)bad,
                           bad < 0 ? 0.0 : got[bad], bad < 0 ? 0.0 : want[bad]);
                }
            }
            free(want);
            free(got);
            free(xb);
            weight_free(&tw);
        }
    /* a row-major weight is not its layout: the caller's fp32 path */
    test_weight rm;
    CHECK(bf16_weight(&rm, 8, 16, 0));
    uint16_t xb[16] = {0};
    float y[8];
    CHECK(v->matmul_bf16(y, 8, xb, 16, 1, &rm.w, 0, 8) == -1);
    weight_free(&rm);
    printf("  %d cases bitwise the definition\n", cases);
}

/* Through xi_matmul: the int8 table rounds x once (on every thread, or from 16 rows once for
 * all of them) and gives the definition's bits on 1 and 3 threads; the exact table keeps fp32
 * inputs (avx512's bits). */
TEST(test_kernels_bf16dot_threads_and_precisions) {
    const xi_ops *v = bf16_table();
    if (!v) SKIP("no avx512_bf16 on this CPU: the avx512bf16 table is not available");
    xi_pool *pool = xi_pool_new(3), *one = xi_pool_new(1);
    const int64_t K = 301, N = 200;
    const int64_t rows_list[] = {1, 5, 17, 33};
    test_weight tw;
    CHECK(bf16_weight(&tw, N, K, 8));
    for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
        const int64_t R = rows_list[ri], L = xi_bf16_row_len(K);
        float *x = rand_vec(R * K), *want = malloc((size_t)(R * N) * 4), *a = malloc((size_t)(R * N) * 4),
              *b = malloc((size_t)(R * N) * 4);
        uint16_t *xb = malloc((size_t)(R * L) * 2);
        xi_bf16_rows_into(NULL, x, K, 0, R, K, xb);
        xi_matmul_bf16_ref(want, N, xb, L, R, &tw.w, 0, N);
        xi_matmul(one, v, a, x, R, &tw.w, NULL);
        xi_matmul(pool, v, b, x, R, &tw.w, NULL);
        CHECKF(!memcmp(want, a, (size_t)(R * N) * 4) && !memcmp(want, b, (size_t)(R * N) * 4),
               "rows=%lld: 1 or 3 threads differ from the definition", (long long)R);
        xi_matmul(pool, v->twin, a, x, R, &tw.w, NULL);
#if defined(__x86_64__)
        xi_matmul(one, xi_ops_precision(xi_ops_avx512(), "exact", NULL, 0), b, x, R, &tw.w, NULL);
#endif
        CHECKF(!memcmp(a, b, (size_t)(R * N) * 4) && memcmp(a, want, (size_t)(R * N) * 4),
               "rows=%lld: the exact table is not avx512's fp32 path", (long long)R);
        free(x);
        free(want);
        free(a);
        free(b);
        free(xb);
    }
    weight_free(&tw);
    xi_pool_free(pool);
    xi_pool_free(one);
}
