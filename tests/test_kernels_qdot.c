/* The integer path (int8 activations, integer dot products): the quantizer's definition,
 * every variant bitwise equal to the scalar oracle on every layout and shape, the
 * determinism contract, no int16 saturation at the extremes, and the error against fp32
 * activations within the bound quantization allows. */
#include <stdlib.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernel_util.h"
#include "test.h"

static const wfmt QFORMATS[] = {{XI_Q8, 0, 0},         {XI_Q8, 0, 8},         {XI_Q8, 0, XI_BLOCK_DOT},
                                {XI_Q4_AWQ, 32, 0},    {XI_Q4_AWQ, 32, 16},   {XI_Q4_AWQ, 32, XI_BLOCK_DOT},
                                {XI_Q4_AWQ, 64, XI_BLOCK_DOT}, {XI_Q4_AWQ, 128, XI_BLOCK_DOT},
                                {XI_Q4_AWQ, 8, XI_BLOCK_DOT},  {XI_Q4_AWQ, 24, XI_BLOCK_DOT}};

/* Input lengths: tails past 4 and 32 for Q8 (the dot layout needs n_in % 4 == 0), group
 * multiples for Q4 (1 to 19 groups). */
static int qk_sizes(const wfmt *f, int64_t *ks) {
    if (f->dt == XI_Q4_AWQ) {
        ks[0] = f->gs;
        ks[1] = 3 * f->gs;
        ks[2] = 7 * f->gs;
        ks[3] = 19 * f->gs; /* two whole runs of 8 groups (the AVX2 tile's scale transpose) and a tail */
        return 4;
    }
    const int64_t dot[] = {4, 28, 36, 100, 260, 896}, any[] = {1, 7, 33, 77, 258, 901};
    memcpy(ks, f->block == XI_BLOCK_DOT ? dot : any, sizeof dot);
    return 6;
}

TEST(test_kernels_qdot_quantizer_rounds_each_block_to_nearest) {
    const int64_t K = 77;
    float *x = rand_vec(2 * K);
    x[5] = 0.0f;
    for (int64_t k = 64; k < K; k++) x[K + k] = 0.0f; /* an all-zero tail block */
    x[K + 3] = -3.5f;                                  /* a block's max is negative */
    const xi_qx *q = xi_qx_quantize(NULL, x, K, 2, K, 32);
    CHECK(q);
    CHECK_EQ(q->nb, 3);
    for (int64_t r = 0; r < 2; r++)
        for (int64_t b = 0; b < 3; b++) {
            const int64_t k0 = b * 32, k1 = XI_MIN(K, k0 + 32);
            float amax = 0;
            int32_t s = 0;
            for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(x[r * K + k]));
            const float d = q->d[r * 3 + b];
            CHECKF(d == amax / 127.0f, "row %lld block %lld: d %g, max %g", (long long)r, (long long)b, d, amax);
            int hit127 = amax == 0.0f;
            for (int64_t k = k0; k < k1; k++) {
                const int v = q->q[r * K + k];
                s += v;
                CHECK(v >= -127 && v <= 127);
                hit127 |= v == 127 || v == -127;
                CHECKF(fabsf((float)v * d - x[r * K + k]) <= 0.5f * d * 1.0001f,
                       "x %g -> q %d, d %g", x[r * K + k], v, d);
            }
            CHECK(hit127); /* the largest magnitude takes the whole range */
            CHECK_EQ(q->s[r * 3 + b], s);
        }
    CHECK(q->d[1 * 3 + 2] == 0.0f && q->q[K + 70] == 0);
    free(x);
}

/* Every variant's quantize_block gives the scalar definition's bytes and bits, on block
 * lengths with vector tails, zeros, ties at .5 and a NaN. */
TEST(test_kernels_qdot_every_variant_quantizes_as_ref) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    const int64_t lens[] = {1, 5, 8, 12, 32, 37, 128};
    for (int v = 0; v < nv; v++)
        for (size_t li = 0; li < XI_ARRAY_LEN(lens); li++)
            for (int kind = 0; kind < 4; kind++) {
                const int64_t n = lens[li];
                float *x = rand_vec(n);
                if (kind == 1) memset(x, 0, (size_t)n * 4);
                if (kind == 2) /* max 127 exactly: every k + 0.5 is a tie */
                    for (int64_t k = 0; k < n; k++) x[k] = k == 0 ? 127.0f : (float)(k % 50) + 0.5f - 25.0f;
                if (kind == 3) x[n / 2] = NAN;
                int8_t q1[128], q2[128];
                float d1, d2;
                int32_t s1, s2;
                xi_qx_quantize_block_ref(q1, &d1, &s1, x, n);
                (ops[v]->quantize_block ? ops[v]->quantize_block : xi_qx_quantize_block_ref)(q2, &d2, &s2, x, n);
                const int same = !memcmp(q1, q2, (size_t)n) && !memcmp(&d1, &d2, 4) && s1 == s2;
                free(x);
                CHECKF(same, "%s: block of %lld, kind %d differs", ops[v]->name, (long long)n, kind);
            }
}

/* Every variant's matmul_q gives xi_matmul_q_ref's bits, for every layout, odd shapes,
 * 1..9 rows and column ranges that cut blocks. */
TEST(test_kernels_qdot_every_variant_matches_ref_bitwise) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    for (int v = 0; v < nv; v++) {
        CHECKF(ops[v]->matmul_q, "%s has no int8 table", ops[v]->name);
        for (size_t f = 0; f < XI_ARRAY_LEN(QFORMATS); f++) {
            int64_t ks[8];
            const int nk = qk_sizes(&QFORMATS[f], ks);
            for (int ki = 0; ki < nk; ki++)
                for (int64_t rows = 1; rows <= 9; rows += 4) {
                    const int64_t K = ks[ki];
                    test_weight tw;
                    CHECKF(weight_make_f(&tw, &QFORMATS[f], 40, K), "layout %d", QFORMATS[f].block);
                    const int64_t N = tw.w.n_out;
                    float *x = rand_vec(rows * K), *y = malloc((size_t)(rows * N) * 4),
                          *yr = malloc((size_t)(rows * N) * 4);
                    const xi_qx *q = xi_qx_quantize(NULL, x, K, rows, K, xi_qdot_block(&tw.w));
                    CHECK(q);
                    memset(y, 0, (size_t)(rows * N) * 4);
                    memset(yr, 0, (size_t)(rows * N) * 4);
                    xi_matmul_q_ref(yr, N, q, rows, &tw.w, 0, N);
                    ops[v]->matmul_q(y, N, q, rows, &tw.w, 0, 16);
                    ops[v]->matmul_q(y, N, q, rows, &tw.w, 16, 19);
                    ops[v]->matmul_q(y, N, q, rows, &tw.w, 19, N);
                    const int same = !memcmp(y, yr, (size_t)(rows * N) * 4);
                    free(x);
                    free(y);
                    free(yr);
                    weight_free(&tw);
                    CHECKF(same, "%s %s gs=%d block=%d K=%lld rows=%lld differs from ref",
                           ops[v]->name, xi_dtype_name(QFORMATS[f].dt), QFORMATS[f].gs,
                           QFORMATS[f].block, (long long)K, (long long)rows);
                }
        }
    }
}

/* Through xi_matmul (quantized once per job): a row alone or in a batch of 37, on 1, 2
 * or 3 threads, gives the same bits, and the int8 tables of all variants agree. */
TEST(test_kernels_qdot_bits_same_for_rows_threads_and_variants) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    xi_pool *pools[3] = {xi_pool_new(1), xi_pool_new(2), xi_pool_new(3)};
    for (size_t f = 0; f < XI_ARRAY_LEN(QFORMATS); f++) {
        const int64_t K = QFORMATS[f].dt == XI_Q4_AWQ ? 4 * QFORMATS[f].gs : 292, R = 37;
        test_weight tw;
        CHECK(weight_make_f(&tw, &QFORMATS[f], 104, K));
        const int64_t N = tw.w.n_out;
        float *x = rand_vec(R * K), *first = malloc((size_t)(R * N) * 4),
              *y = malloc((size_t)(R * N) * 4);
        int bad = 0;
        for (int v = 0; v < nv; v++)
            for (int p = 0; p < 3; p++) {
                xi_matmul(pools[p], ops[v], y, x, R, &tw.w, NULL);
                if (v == 0 && p == 0) memcpy(first, y, (size_t)(R * N) * 4);
                bad |= memcmp(first, y, (size_t)(R * N) * 4) != 0;
                for (int64_t r = 0; r < R; r += 9) { /* alone */
                    xi_matmul(pools[p], ops[v], y, x + r * K, 1, &tw.w, NULL);
                    bad |= (memcmp(first + r * N, y, (size_t)N * 4) != 0) << 1;
                }
            }
        free(x);
        free(first);
        free(y);
        weight_free(&tw);
        CHECKF(!bad, "%s gs=%d block=%d: %s differ", xi_dtype_name(QFORMATS[f].dt),
               QFORMATS[f].gs, QFORMATS[f].block, bad & 1 ? "variants/threads" : "rows alone");
    }
    for (int p = 0; p < 3; p++) xi_pool_free(pools[p]);
}

/* One thread's share through xi_matmul_part (what MoE experts run) takes the same path as a
 * pool job through xi_matmul: int8 tables give the integer path's bits on any column range,
 * which differ from the fp32 path of the exact tables. */
TEST(test_kernels_qdot_part_runs_the_integer_path_of_xi_matmul) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    xi_pool *pool = xi_pool_new(1);
    for (size_t f = 0; f < XI_ARRAY_LEN(QFORMATS); f++) {
        const int64_t K = QFORMATS[f].dt == XI_Q4_AWQ ? 4 * QFORMATS[f].gs : 292, R = 5;
        test_weight tw;
        CHECK(weight_make_f(&tw, &QFORMATS[f], 104, K));
        const int64_t N = tw.w.n_out;
        float *x = rand_vec(R * K), *full = malloc((size_t)(R * N) * 4),
              *part = calloc((size_t)(R * N), 4);
        int bad = 0, differ = 0;
        for (int v = 0; v < nv; v++) {
            xi_matmul(pool, ops[v], full, x, R, &tw.w, NULL);
            xi_matmul_part(ops[v], part, N, x, K, R, &tw.w, 0, 40);
            xi_matmul_part(ops[v], part, N, x, K, R, &tw.w, 40, N);
            bad |= memcmp(full, part, (size_t)(R * N) * 4) != 0;
            const xi_ops *exact = xi_ops_precision(ops[v], "exact", NULL, 0);
            xi_matmul_part(exact, part, N, x, K, R, &tw.w, 0, N);
            differ |= memcmp(full, part, (size_t)(R * N) * 4) != 0;
        }
        free(x);
        free(full);
        free(part);
        weight_free(&tw);
        CHECKF(!bad && differ, "%s gs=%d block=%d: %s", xi_dtype_name(QFORMATS[f].dt), QFORMATS[f].gs,
               QFORMATS[f].block, bad ? "part differs from xi_matmul" : "int8 part equals the fp32 path");
    }
    xi_pool_free(pool);
}

/* The largest products (|q| = 127 against weights of +-127, codes 15) in every pair that
 * vpmaddubsw adds: no int16 saturation, so the variants still equal the int32 oracle. */
TEST(test_kernels_qdot_extreme_values_do_not_saturate) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    for (int q4 = 0; q4 < 2; q4++) {
        const int64_t N = 16, K = 256;
        test_weight tw;
        weight_make(&tw, q4 ? XI_Q4_AWQ : XI_Q8, N, K, 128);
        if (q4) {
            memset(tw.data, 0xff, (size_t)(N * K / 2)); /* every code 15 */
            memset(tw.zero, 0, (size_t)(N * 2));
        } else {
            for (int64_t i = 0; i < N * K; i++) /* +-127, signs by column and input */
                ((int8_t *)tw.data)[i] = (int8_t)((i / K) % 2 ? ((i % K) % 3 ? -127 : 127) : -127);
        }
        CHECK(xi_weight_block(&tw.w, XI_BLOCK_DOT, NULL, 0) == 0);
        float *x = malloc((size_t)(2 * K) * 4);
        for (int64_t k = 0; k < 2 * K; k++) x[k] = k < K ? -1.0f : (k % 2 ? 1.0f : -1.0f);
        const xi_qx *q = xi_qx_quantize(NULL, x, K, 2, K, xi_qdot_block(&tw.w));
        CHECK(q);
        float y[32], yr[32];
        xi_matmul_q_ref(yr, N, q, 2, &tw.w, 0, N);
        /* the oracle's exact value: all-negative x against codes 15 (zero point 0) */
        if (q4) {
            const float want = -15.0f * 128 * (tw.scale[0] + tw.scale[1]); /* 2 groups of 128 */
            CHECKF(fabsf(yr[0] - want) <= 1e-4f * fabsf(want), "ref %g, want %g", yr[0], want);
        }
        for (int v = 0; v < nv; v++) {
            ops[v]->matmul_q(y, N, q, 2, &tw.w, 0, N);
            CHECKF(!memcmp(y, yr, sizeof y), "%s %s: %g vs ref %g", ops[v]->name, q4 ? "q4" : "q8",
                   y[0], yr[0]);
        }
        free(x);
        weight_free(&tw);
    }
}

/* Against fp32 activations: each x moves by at most d/2, so |y_int8 - y_exact| <=
 * sum_k |W[n,k]| d_block(k) / 2 (plus fp32 rounding); a wrong zero point, scale or block
 * would break the bound by far. */
TEST(test_kernels_qdot_error_within_quantization_bound) {
    const xi_ops *ops[8];
    const int nv = int8_variants(ops);
    for (size_t f = 0; f < XI_ARRAY_LEN(QFORMATS); f++) {
        const int64_t K = QFORMATS[f].dt == XI_Q4_AWQ ? 3 * QFORMATS[f].gs : 260, R = 3;
        test_weight tw;
        CHECK(weight_make_f(&tw, &QFORMATS[f], 24, K));
        const int64_t N = tw.w.n_out;
        float *x = rand_vec(R * K), *ye = malloc((size_t)(R * N) * 4),
              *yq = malloc((size_t)(R * N) * 4), *row = malloc((size_t)K * 4);
        const xi_qx *q = xi_qx_quantize(NULL, x, K, R, K, xi_qdot_block(&tw.w));
        CHECK(q);
        xi_ops_ref()->matmul(ye, N, x, K, R, &tw.w, 0, N);
        ops[nv - 1]->matmul_q(yq, N, q, R, &tw.w, 0, N);
        double worst = 0;
        for (int64_t n = 0; n < N; n++) {
            xi_weight_row(&tw.w, n, row);
            for (int64_t r = 0; r < R; r++) {
                double bound = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    bound += fabs(row[k]) * q->d[r * q->nb + k / q->bs] / 2;
                    mag += fabs(row[k] * x[r * K + k]);
                }
                const double e = fabs((double)yq[r * N + n] - ye[r * N + n]);
                CHECKF(e <= bound + 1e-5 * mag + 1e-6, "%s gs=%d row %lld col %lld: error %g > bound %g",
                       xi_dtype_name(QFORMATS[f].dt), QFORMATS[f].gs, (long long)r, (long long)n, e, bound);
                if (e / (bound + 1e-30) > worst) worst = e / (bound + 1e-30);
            }
        }
        CHECK(worst > 0); /* it really quantized */
        free(x);
        free(ye);
        free(yq);
        free(row);
        weight_free(&tw);
    }
}

/* The dot layout moves elements, not values: rows read back the same, and the exact
 * (fp32) path gives the row-major weight's ref bits through it. */
TEST(test_kernels_qdot_dot_layout_moves_elements) {
    for (int q4 = 0; q4 < 2; q4++) {
        const int64_t N = 24, K = q4 ? 96 : 100;
        test_weight tw;
        weight_make(&tw, q4 ? XI_Q4_AWQ : XI_Q8, N, K, 32);
        xi_weight rm = tw.w;
        const size_t bytes = (size_t)(q4 ? N * K / 2 : N * K);
        void *copy = malloc(bytes);
        memcpy(copy, tw.data, bytes);
        rm.data = copy;
        CHECK(xi_weight_block(&tw.w, XI_BLOCK_DOT, NULL, 0) == 0);
        CHECK_EQ(tw.w.block, XI_BLOCK_DOT);
        CHECK(memcmp(copy, tw.data, bytes)); /* it moved */
        float *a = malloc((size_t)K * 4), *b = malloc((size_t)K * 4);
        for (int64_t n = 0; n < N; n++) {
            xi_weight_row(&rm, n, a);
            xi_weight_row(&tw.w, n, b);
            CHECKF(!memcmp(a, b, (size_t)K * 4), "row %lld", (long long)n);
        }
        float *x = rand_vec(2 * K), y1[48], y2[48];
        xi_ops_ref()->matmul(y1, N, x, K, 2, &rm, 0, N);
        const xi_ops *ops[8];
        const int nv = xi_ops_available(ops, 8);
        for (int v = 0; v < nv; v++) {
            xi_ops_precision(ops[v], "exact", NULL, 0)->matmul(y2, N, x, K, 2, &tw.w, 0, N);
            CHECKF(!memcmp(y1, y2, sizeof y1), "%s exact path over the dot layout", ops[v]->name);
        }
        free(x);
        free(a);
        free(b);
        free(copy);
        weight_free(&tw);
    }
}

TEST(test_kernels_precision_selects_tables_and_rejects_unknown) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    char err[128] = "";
    for (int v = 0; v < nv; v++) {
        const xi_ops *e = xi_ops_precision(ops[v], "exact", err, sizeof err),
                     *i = xi_ops_precision(ops[v], "int8", err, sizeof err);
        CHECK(e && i && e != i && !e->matmul_q && i->matmul_q);
        CHECK(!strcmp(e->name, i->name) && e->matmul == i->matmul);
        CHECK(xi_ops_precision(e, "int8", NULL, 0) == i && xi_ops_precision(i, "exact", NULL, 0) == e);
    }
    CHECK(!xi_ops_precision(ops[0], "fp8", err, sizeof err));
    CHECK(strstr(err, "fp8") && strstr(err, "exact"));
    unsetenv("XINFER_KERNEL_PRECISION");
    CHECK(!strcmp(xi_ops_select(NULL, err, sizeof err)->precision, "int8")); /* the default */
    setenv("XINFER_KERNEL_PRECISION", "exact", 1);
    CHECK(!strcmp(xi_ops_select("ref", err, sizeof err)->precision, "exact"));
    setenv("XINFER_KERNEL_PRECISION", "int4", 1);
    CHECK(!xi_ops_select(NULL, err, sizeof err));
    unsetenv("XINFER_KERNEL_PRECISION");
}
