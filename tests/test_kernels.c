/* Kernel variants against the scalar reference, and the determinism contract: bitwise equal
 * results whatever the batch size, tile position, thread count or attention batching. */
#include <stdlib.h>

#include "base/base.h"
#include "base/pool.h"
#include "kernels/kernels.h"
#include "kernel_util.h"
#include "test.h"

/* |y - ref| <= 1e-5 * sum_k |x w| + 1e-6: fp32 reordering error only. */
static int close_to_ref(const float *y, const float *x, int64_t rows, const xi_weight *w,
                        char *msg, size_t msglen) {
    const int64_t K = w->n_in, N = w->n_out;
    float *yr = malloc((size_t)(rows * N) * 4), *row = malloc((size_t)K * 4);
    xi_ops_ref()->matmul(yr, N, x, K, rows, w, 0, N);
    int ok = 1;
    for (int64_t n = 0; n < N && ok; n++) {
        xi_weight_row(w, n, row);
        for (int64_t r = 0; r < rows && ok; r++) {
            double mag = 0;
            for (int64_t k = 0; k < K; k++) mag += fabs((double)x[r * K + k] * row[k]);
            const double d = fabs((double)y[r * N + n] - yr[r * N + n]);
            if (!(d <= 1e-5 * mag + 1e-6)) {
                snprintf(msg, msglen, "row %lld col %lld: %.9g vs ref %.9g", (long long)r,
                         (long long)n, y[r * N + n], yr[r * N + n]);
                ok = 0;
            }
        }
    }
    free(yr);
    free(row);
    return ok;
}

static const wfmt FORMATS[] = {{XI_F32, 0, 0},     {XI_F16, 0, 0},     {XI_BF16, 0, 0},
                               {XI_Q8, 0, 0},      {XI_Q4_AWQ, 32, 0}, {XI_Q4_AWQ, 64, 0},
                               {XI_Q4_AWQ, 128, 0}, {XI_F32, 0, 8},    {XI_F16, 0, 8},
                               {XI_BF16, 0, 8},    {XI_Q8, 0, 8},      {XI_Q4_AWQ, 32, 16},
                               {XI_Q4_AWQ, 128, 16}};

/* Input sizes with tails past 8/16/32 for the dense formats; multiples of the group for Q4. */
static int k_sizes(const wfmt *f, int64_t *ks) {
    if (f->dt == XI_Q4_AWQ) {
        ks[0] = f->gs;
        ks[1] = 3 * f->gs;
        return 2;
    }
    const int64_t d[] = {1, 7, 9, 31, 40, 77, 258};
    memcpy(ks, d, sizeof d);
    return 7;
}

TEST(test_kernels_matmul_every_variant_matches_ref_on_odd_shapes) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    const int64_t outs[] = {1, 5, 19, 37};
    char msg[200];
    for (int v = 1; v < nv; v++)
        for (size_t f = 0; f < XI_ARRAY_LEN(FORMATS); f++) {
            int64_t ks[8];
            const int nk = k_sizes(&FORMATS[f], ks);
            for (int ki = 0; ki < nk; ki++)
                for (size_t oi = 0; oi < XI_ARRAY_LEN(outs); oi++) {
                    test_weight tw;
                    CHECK(weight_make_f(&tw, &FORMATS[f], outs[oi], ks[ki]));
                    const int64_t rows_list[] = {1, 2, 3, 4, 5, 8, 9, 17};
                    for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                        const int64_t rows = rows_list[ri], N = tw.w.n_out, K = ks[ki];
                        float *x = rand_vec(rows * K), *y = malloc((size_t)(rows * N) * 4);
                        ops[v]->matmul(y, N, x, K, rows, &tw.w, 0, N);
                        const int ok = close_to_ref(y, x, rows, &tw.w, msg, sizeof msg);
                        free(x);
                        free(y);
                        if (!ok) weight_free(&tw);
                        CHECKF(ok, "%s %s gs=%d block=%d K=%lld N=%lld rows=%lld: %s",
                               ops[v]->name, xi_dtype_name(FORMATS[f].dt), FORMATS[f].gs,
                               FORMATS[f].block, (long long)K,
                               (long long)N, (long long)rows, msg);
                    }
                    weight_free(&tw);
                }
        }
}

/* Every format and variant: one row at a time, 3 rows, 9 rows from an odd offset and all 17
 * rows (small-batch tiles and the GEMM panel) give identical bits. */
TEST(test_kernels_matmul_bits_independent_of_rows_and_tiles) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    for (int v = 0; v < nv; v++)
        for (size_t f = 0; f < XI_ARRAY_LEN(FORMATS); f++) {
            const int64_t K = FORMATS[f].dt == XI_Q4_AWQ ? 2 * FORMATS[f].gs : 203, R = 17;
            test_weight tw;
            CHECK(weight_make_f(&tw, &FORMATS[f], 23, K));
            const int64_t N = tw.w.n_out;
            float *x = rand_vec(R * K), *all = malloc((size_t)(R * N) * 4),
                  *part = malloc((size_t)(R * N) * 4);
            ops[v]->matmul(all, N, x, K, R, &tw.w, 0, N);
            int bad = -1;
            const int64_t starts[] = {0, 3, 5}, counts[] = {1, 3, 9};
            for (size_t s = 0; s < XI_ARRAY_LEN(starts) && bad < 0; s++)
                for (int64_t r0 = starts[s]; r0 + counts[s] <= R && bad < 0; r0 += counts[s]) {
                    ops[v]->matmul(part, N, x + r0 * K, K, counts[s], &tw.w, 0, N);
                    if (memcmp(part, all + r0 * N, (size_t)(counts[s] * N) * 4)) bad = (int)r0;
                }
            /* Columns computed in pieces (as threads do) equal columns computed together. */
            for (int64_t n0 = 0; n0 < N && bad < 0; n0 += 7) {
                const int64_t n1 = XI_MIN(N, n0 + 7);
                ops[v]->matmul(part, N, x, K, R, &tw.w, n0, n1);
                for (int64_t r = 0; r < R; r++)
                    if (memcmp(part + r * N + n0, all + r * N + n0, (size_t)(n1 - n0) * 4))
                        bad = 100 + (int)n0;
            }
            free(x);
            free(all);
            free(part);
            weight_free(&tw);
            CHECKF(bad < 0, "%s %s gs=%d block=%d: rows/cols from %d differ", ops[v]->name,
                   xi_dtype_name(FORMATS[f].dt), FORMATS[f].gs, FORMATS[f].block, bad);
        }
}

TEST(test_kernels_matmul_bits_same_for_1_2_3_threads) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    xi_pool *pools[3] = {xi_pool_new(1), xi_pool_new(2), xi_pool_new(3)};
    for (int v = 0; v < nv; v++)
        for (size_t f = 0; f < XI_ARRAY_LEN(FORMATS); f++) {
            const int64_t K = FORMATS[f].dt == XI_Q4_AWQ ? 2 * FORMATS[f].gs : 131;
            test_weight tw;
            CHECK(weight_make_f(&tw, &FORMATS[f], 77, K));
            const int64_t N = tw.w.n_out;
            float *bias = rand_vec(N);
            int same = 1;
            for (int64_t rows = 1; rows <= 13; rows += 12) {
                float *x = rand_vec(rows * K), *y[3];
                for (int p = 0; p < 3; p++) {
                    y[p] = malloc((size_t)(rows * N) * 4);
                    xi_matmul(pools[p], ops[v], y[p], x, rows, &tw.w, bias);
                }
                same = same && !memcmp(y[0], y[1], (size_t)(rows * N) * 4) &&
                       !memcmp(y[0], y[2], (size_t)(rows * N) * 4);
                for (int p = 0; p < 3; p++) free(y[p]);
                free(x);
            }
            free(bias);
            weight_free(&tw);
            CHECKF(same, "%s %s block=%d: thread counts disagree", ops[v]->name,
                   xi_dtype_name(FORMATS[f].dt), FORMATS[f].block);
        }
    for (int p = 0; p < 3; p++) xi_pool_free(pools[p]);
}

/* Repacking into a blocked layout changes where elements live: xi_weight_row reads the same
 * rows, a column range cutting blocks gives the bits of the whole range, and for 1, 3 and 17
 * rows (GEMV, small-batch and GEMM paths) a variant gives the row-major weight's bits, except
 * on the dense layout it reads fastest (xi_ops.weight_block), where it has its own summation
 * order and is checked against ref. */
TEST(test_kernels_blocked_layouts_move_elements_not_results) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16, XI_Q8, XI_Q4_AWQ};
    for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++) {
        const int q4 = dts[d] == XI_Q4_AWQ, block = q4 ? 16 : 8;
        const int64_t N = 40, K = q4 ? 5 * 32 : 901;
        test_weight tw;
        weight_make(&tw, dts[d], N, K, 32);
        xi_weight bw = tw.w;
        void *copy = malloc((size_t)(N * K) * 4);
        const size_t bytes = q4 ? (size_t)(N * K / 2)
                                : (size_t)(N * K) * (dts[d] == XI_Q8 ? 1 : xi_dtype_size(dts[d]));
        memcpy(copy, tw.data, bytes);
        bw.data = copy;
        CHECK(xi_weight_block(&bw, block, NULL, 0) == 0 && bw.block == block);
        CHECK(memcmp(copy, tw.data, bytes) != 0); /* really moved */
        float *r0 = malloc((size_t)K * 4), *r1 = malloc((size_t)K * 4);
        int rows_same = 1;
        for (int64_t n = 0; n < N; n++) {
            xi_weight_row(&tw.w, n, r0);
            xi_weight_row(&bw, n, r1);
            rows_same = rows_same && !memcmp(r0, r1, (size_t)K * 4);
        }
        CHECKF(rows_same, "%s: xi_weight_row differs on the blocked layout", xi_dtype_name(dts[d]));
        const int64_t R = 17;
        float *x = rand_vec(R * K), *a = malloc((size_t)(R * N) * 4), *b = malloc((size_t)(R * N) * 4);
        float *c = malloc((size_t)(R * N) * 4);
        for (int v = 0; v < nv; v++) {
            const int64_t rows_list[] = {1, 3, 17};
            for (size_t ri = 0; ri < XI_ARRAY_LEN(rows_list); ri++) {
                const int64_t rows = rows_list[ri];
                ops[v]->matmul(a, N, x, K, rows, &tw.w, 0, N);
                ops[v]->matmul(b, N, x, K, rows, &bw, 0, N);
                memcpy(c, b, (size_t)(rows * N) * 4);
                ops[v]->matmul(c, N, x, K, rows, &bw, 5, 21); /* partial blocks */
                CHECKF(!memcmp(b, c, (size_t)(rows * N) * 4), "%s %s rows=%lld: a range cutting "
                       "blocks changes bits", ops[v]->name, xi_dtype_name(dts[d]), (long long)rows);
                if (q4 || ops[v]->weight_block != block) {
                    CHECKF(!memcmp(a, b, (size_t)(rows * N) * 4), "%s %s rows=%lld: blocked bits differ",
                           ops[v]->name, xi_dtype_name(dts[d]), (long long)rows);
                } else { /* the variant's own order for its blocked layout */
                    char msg[200];
                    CHECKF(close_to_ref(b, x, rows, &tw.w, msg, sizeof msg), "%s %s rows=%lld: %s",
                           ops[v]->name, xi_dtype_name(dts[d]), (long long)rows, msg);
                }
            }
        }
        free(x);
        free(a);
        free(b);
        free(c);
        free(r0);
        free(r1);
        free(copy);
        weight_free(&tw);
    }
}

/* ---- attention ---- */

typedef struct {
    xi_kv_view kv;
    int32_t table[16];
    int n_blocks;
} test_kv;

/* A paged KV store of n_ctx random tokens, blocks placed in a shuffled order. */
static void kv_make(test_kv *t, xi_dtype dt, int n_kv_heads, int head_dim, int block_size,
                    int n_ctx) {
    memset(t, 0, sizeof *t);
    t->n_blocks = (n_ctx + block_size - 1) / block_size;
    const int total_blocks = t->n_blocks + 3;
    xi_kv_view *kv = &t->kv;
    kv->dtype = dt;
    kv->block_size = block_size;
    kv->n_kv_heads = n_kv_heads;
    kv->head_dim = head_dim;
    kv->head_stride = (int64_t)block_size * head_dim;
    kv->block_stride = kv->head_stride * n_kv_heads;
    const size_t bytes = (size_t)(kv->block_stride * total_blocks) * xi_dtype_size(dt);
    kv->k = calloc(1, bytes);
    kv->v = calloc(1, bytes);
    for (int i = 0; i < t->n_blocks; i++) t->table[i] = (i * 5 + 2) % total_blocks;
    float *k = rand_vec(n_kv_heads * head_dim), *v = rand_vec(n_kv_heads * head_dim);
    for (int tok = 0; tok < n_ctx; tok++) {
        for (int i = 0; i < n_kv_heads * head_dim; i++) {
            k[i] = 2.0f * frand();
            v[i] = frand();
        }
        const int64_t slot = (int64_t)t->table[tok / block_size] * block_size + tok % block_size;
        xi_kv_write(kv, slot, k, v);
    }
    free(k);
    free(v);
}

static void kv_free(test_kv *t) {
    free(t->kv.k);
    free(t->kv.v);
}

TEST(test_kernels_attention_matches_ref_for_every_kv_dtype) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16};
    const int hds[] = {8, 20, 64};
    float scratch[XI_ATTN_SCRATCH(16, 64)];
    for (int v = 1; v < nv; v++)
        for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++)
            for (size_t hi = 0; hi < XI_ARRAY_LEN(hds); hi++) {
                const int hd = hds[hi], n_heads = 6, n_kv = 2, bs = 16, n_ctx = 45;
                test_kv t;
                kv_make(&t, dts[d], n_kv, hd, bs, n_ctx);
                float *q = rand_vec(n_heads * hd), *o = malloc((size_t)(n_heads * hd) * 4),
                      *oref = malloc((size_t)(n_heads * hd) * 4);
                double worst = 0;
                for (int ctx = 1; ctx <= n_ctx; ctx += 11) {
                    ops[v]->attn(o, q, &t.kv, t.table, ctx, n_heads, 0, n_heads,
                                 1.0f / sqrtf((float)hd), scratch);
                    xi_ops_ref()->attn(oref, q, &t.kv, t.table, ctx, n_heads, 0, n_heads,
                                       1.0f / sqrtf((float)hd), scratch);
                    for (int i = 0; i < n_heads * hd; i++)
                        worst = fmax(worst, fabs((double)o[i] - oref[i]));
                }
                free(q);
                free(o);
                free(oref);
                kv_free(&t);
                CHECKF(worst < 2e-5, "%s kv %s hd %d: max diff %g", ops[v]->name,
                       xi_dtype_name(dts[d]), hd, worst);
            }
}

/* A prefill computes every token of a chunk, split by heads across calls; decode computes
 * one token with all heads at once. The same token must give the same bits either way. */
TEST(test_kernels_attention_decode_equals_prefill_bitwise) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16};
    float scratch[XI_ATTN_SCRATCH(8, 32)];
    for (int v = 0; v < nv; v++)
        for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++) {
            const int hd = 32, n_heads = 4, n_kv = 2, bs = 8, n_ctx = 29;
            test_kv t;
            kv_make(&t, dts[d], n_kv, hd, bs, n_ctx);
            float *q = rand_vec(n_ctx * n_heads * hd);
            float *pre = malloc((size_t)(n_ctx * n_heads * hd) * 4),
                  *dec = malloc((size_t)(n_heads * hd) * 4);
            for (int h = 0; h < n_heads; h += 2) /* prefill: head pairs, all tokens */
                for (int tok = 0; tok < n_ctx; tok++)
                    ops[v]->attn(pre + tok * n_heads * hd, q + tok * n_heads * hd, &t.kv,
                                 t.table, tok + 1, n_heads, h, h + 2, 0.17f, scratch);
            int same = 1;
            for (int tok = 0; tok < n_ctx; tok++) {
                ops[v]->attn(dec, q + tok * n_heads * hd, &t.kv, t.table, tok + 1, n_heads, 0,
                             n_heads, 0.17f, scratch);
                same = same && !memcmp(dec, pre + tok * n_heads * hd, (size_t)(n_heads * hd) * 4);
            }
            free(q);
            free(pre);
            free(dec);
            kv_free(&t);
            CHECKF(same, "%s kv %s", ops[v]->name, xi_dtype_name(dts[d]));
        }
}

/* The avx2 table's attention reorders independent work (four keys' dots at once, blocks
 * outer and the heads of a KV head inner, keys widened once per block) but must compute
 * exactly what the per-key loop computes: same bits for every KV dtype, head dim, block size
 * (partial groups of four keys), context length (partial blocks) and head range (runs that
 * start or end inside a GQA group). */
TEST(test_kernels_avx2_attention_equals_per_key_loop_bitwise) {
#if defined(__x86_64__)
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    int have = 0;
    for (int v = 0; v < nv; v++) have = have || ops[v]->attn == xi_avx2_attn;
    if (!have) SKIP("this CPU has no AVX2 + FMA + F16C");
    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16};
    const int hds[] = {8, 24, 64, 72, 128, 20}; /* 20: not a multiple of 8, the loop itself */
    const int bss[] = {16, 5};
    const int ranges[][2] = {{0, 8}, {1, 7}, {3, 5}, {2, 3}};
    float *scratch = malloc(XI_ATTN_SCRATCH(16, 128) * sizeof(float));
    for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++)
        for (size_t hi = 0; hi < XI_ARRAY_LEN(hds); hi++)
            for (size_t bi = 0; bi < XI_ARRAY_LEN(bss); bi++) {
                const int hd = hds[hi], n_heads = 8, n_kv = 2, bs = bss[bi], n_ctx = 61;
                test_kv t;
                kv_make(&t, dts[d], n_kv, hd, bs, n_ctx);
                float *q = rand_vec(n_heads * hd), *o = malloc((size_t)(n_heads * hd) * 4),
                      *ok = malloc((size_t)(n_heads * hd) * 4);
                int same = 1;
                for (int ctx = 1; ctx <= n_ctx; ctx += 6)
                    for (size_t r = 0; r < XI_ARRAY_LEN(ranges); r++) {
                        const int h0 = ranges[r][0], h1 = ranges[r][1];
                        xi_avx2_attn(o, q, &t.kv, t.table, ctx, n_heads, h0, h1, 0.2f, scratch);
                        xi_avx2_attn_keys(ok, q, &t.kv, t.table, ctx, n_heads, h0, h1, 0.2f, scratch);
                        same = same && !memcmp(o + h0 * hd, ok + h0 * hd, (size_t)((h1 - h0) * hd) * 4);
                    }
                free(q);
                free(o);
                free(ok);
                kv_free(&t);
                CHECKF(same, "kv %s hd %d block %d", xi_dtype_name(dts[d]), hd, bs);
            }
    free(scratch);
#else
    SKIP("x86-64 only: the avx2 table's attention");
#endif
}

TEST(test_kernels_rmsnorm_and_silu_mul_match_ref) {
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    for (int v = 1; v < nv; v++)
        for (int64_t n = 1; n <= 70; n += 3) {
            float *x = rand_vec(n), *w = rand_vec(n), *y = malloc((size_t)n * 4),
                  *yr = malloc((size_t)n * 4);
            for (int64_t i = 0; i < n; i++) x[i] *= 9.0f; /* silu over [-9, 9] */
            x[0] = -100.0f;                              /* exp clamps without inf/NaN */
            ops[v]->rmsnorm(y, x, w, n, 1e-5f);
            xi_ops_ref()->rmsnorm(yr, x, w, n, 1e-5f);
            double worst = 0;
            for (int64_t i = 0; i < n; i++)
                worst = fmax(worst, fabs((double)y[i] - yr[i]) / (fabs((double)yr[i]) + 1e-6));
            ops[v]->silu_mul(y, x, w, n);
            xi_ops_ref()->silu_mul(yr, x, w, n);
            for (int64_t i = 0; i < n; i++)
                worst = fmax(worst, fabs((double)y[i] - yr[i]) / (fabs((double)yr[i]) + 1e-6));
            free(x);
            free(w);
            free(y);
            free(yr);
            CHECKF(worst < 1e-5, "%s n=%lld: relative diff %g", ops[v]->name, (long long)n, worst);
        }
}

TEST(test_kernels_select_honours_names_and_rejects_unknown) {
    char err[200] = "";
    const xi_ops *ops[8];
    const int nv = xi_ops_available(ops, 8);
    CHECK(nv >= 1);
    CHECK_STR(ops[0]->name, "ref");
    for (int v = 0; v < nv; v++) CHECK(xi_ops_select(ops[v]->name, err, sizeof err) == ops[v]);
    CHECK(xi_ops_select("auto", err, sizeof err) == ops[nv - 1]);
    CHECK(xi_ops_select("no-such-isa", err, sizeof err) == NULL);
    CHECK(strstr(err, "no-such-isa") != NULL);
#if defined(__x86_64__)
    CHECK(xi_ops_select("neon", err, sizeof err) == NULL);
#endif
#if defined(__aarch64__)
    CHECK(xi_ops_select("avx2", err, sizeof err) == NULL);
#endif
}

/* CI names the variants a machine must have (XINFER_EXPECT_KERNELS=neon under qemu), so a
 * broken CPU-feature probe cannot silently leave only ref under test. */
TEST(test_kernels_expected_variants_are_available) {
    const char *want = getenv("XINFER_EXPECT_KERNELS");
    if (!want || !*want) return; /* nothing is expected on this machine */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", want);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        char err[200] = "";
        CHECKF(xi_ops_select(name, err, sizeof err) != NULL, "%s", err);
    }
}
