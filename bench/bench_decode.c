/* bench_decode: batch-1 decode and 512-token prefill of a real-shaped model, reported as
 * fractions of this machine's limits measured in the same run:
 *   decode:  (weight bytes read per token x tok/s) / measured read bandwidth, where a
 *            token reads every weight but an untied embedding table (one row of it)
 *   prefill: achieved FLOP/s / measured fp32 FMA peak
 * Measurements alternate (bandwidth, decode, bandwidth, decode, ...) so drift from the other
 * tenants of a shared machine hits both; medians and min-max spread are printed.
 *
 *   batch:   --batch B > 1 adds decode steps of B sequences at once (aggregate tok/s, and
 *            the ratio to batch-1 decode measured in the same repetition)
 *
 *   bench_decode --model DIR [--dtype auto|float32|bfloat16|float16] [--quantization ...]
 *                [--load-format auto|mmap] [--threads N] [--reps 10] [--decode-tokens 16]
 *                [--prefill 512] [--batch 16] [--kernel-precision int8|exact] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "model/model.h"
#include "machine_limits.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(double *v, int n, double *med, double *lo, double *hi) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *lo = v[0];
    *hi = v[n - 1];
}

/* ---- model runs ---- */

typedef struct {
    xi_model *m;
    xi_kv_store *kv;
    int32_t table[512];
    int table_off; /* run() uses the blocks from table + table_off */
    float *logits;
} runner;

static int forward(runner *r, const xi_batch *b) {
    char err[256];
    if (xi_model_forward(r->m, r->kv, b, r->logits, err, sizeof err)) {
        fprintf(stderr, "forward: %s\n", err);
        return -1;
    }
    return 0;
}

static int run(runner *r, const int32_t *ids, int n, int start) {
    int32_t pos[1024];
    int64_t slots[1024];
    const int bs = xi_kv_store_block_size(r->kv);
    const int32_t *t = r->table + r->table_off;
    for (int i = 0; i < n; i++) {
        pos[i] = start + i;
        slots[i] = (int64_t)t[pos[i] / bs] * bs + pos[i] % bs;
    }
    xi_batch_seq s = {0, n, t, 512 - r->table_off};
    int32_t row = n - 1;
    xi_batch b = {.n_tokens = n, .tokens = ids, .positions = pos, .slots = slots,
                  .n_seqs = 1, .seqs = &s, .n_logits = 1, .logits_rows = &row};
    return forward(r, &b);
}

/* B sequences of one token each at position start (sequence s owns blocks s*BLK_PER_SEQ..),
 * logits of every row. */
#define BLK_PER_SEQ 8
static int run_batch(runner *r, const int32_t *ids, int B, int start) {
    int32_t pos[64], rows[64];
    int64_t slots[64];
    xi_batch_seq s[64];
    const int bs = xi_kv_store_block_size(r->kv);
    for (int i = 0; i < B; i++) {
        const int32_t *t = r->table + i * BLK_PER_SEQ;
        pos[i] = start;
        rows[i] = i;
        slots[i] = (int64_t)t[start / bs] * bs + start % bs;
        s[i] = (xi_batch_seq){i, 1, t, BLK_PER_SEQ};
    }
    xi_batch b = {.n_tokens = B, .tokens = ids, .positions = pos, .slots = slots,
                  .n_seqs = B, .seqs = s, .n_logits = B, .logits_rows = rows};
    return forward(r, &b);
}

int main(int argc, char **argv) {
    xi_model_params p = {.n_threads = 0};
    int reps = 10, decode_tokens = 16, prefill = 512, batch = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) p.dir = argv[i + 1];
        else if (!strcmp(argv[i], "--dtype")) p.dtype = argv[i + 1];
        else if (!strcmp(argv[i], "--quantization")) p.quantization = argv[i + 1];
        else if (!strcmp(argv[i], "--lm-head-quantization")) p.lm_head_quantization = argv[i + 1];
        else if (!strcmp(argv[i], "--load-format")) p.load_format = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) p.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode-tokens")) decode_tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefill")) prefill = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kernel-precision")) p.kernel_precision = argv[i + 1];
        else {
            fprintf(stderr, "bench_decode: unknown flag %s\n", argv[i]);
            return 1;
        }
    }
    if (!p.dir || reps < 1 || reps > 100 || prefill > 1024 || batch < 1 || batch > 64 ||
        batch * BLK_PER_SEQ > 512 || (batch > 1 && 16 + decode_tokens > BLK_PER_SEQ * 16)) {
        fprintf(stderr, "usage: bench_decode --model DIR [--dtype D] [--quantization Q] [--threads N] "
                        "[--reps R] [--decode-tokens N] [--prefill N<=1024] [--batch B<=64] "
                        "[--kernel-precision int8|exact] [--lm-head-quantization none|int8]\n");
        return 1;
    }
    char err[512];
    runner r = {0};
    r.m = xi_model_load(&p, err, sizeof err);
    if (!r.m) {
        fprintf(stderr, "bench_decode: %s\n", err);
        return 1;
    }
    const xi_config *c = xi_model_config(r.m);
    r.kv = xi_kv_store_new(c, 513, 16, XI_F32, err, sizeof err);
    if (!r.kv) {
        fprintf(stderr, "bench_decode: %s\n", err);
        return 1;
    }
    for (int i = 0; i < 512; i++) r.table[i] = i + 1;
    r.logits = malloc(sizeof(float) * c->vocab_size * (size_t)batch);
    const int threads = xi_model_n_threads(r.m);
    xi_pool *pool = xi_pool_new(threads);
    const size_t nbw = (size_t)1 << 28; /* 1 GiB of floats, far beyond any cache */
    float *bw_buf = xi_alloc_big(nbw * sizeof(float));
    for (size_t i = 0; i < nbw; i += 1024) bw_buf[i] = 1.0f;
    int32_t *ids = malloc(sizeof(int32_t) * 1024);
    for (int i = 0; i < 1024; i++) ids[i] = (i * 7919) % c->vocab_size;
    if (xi_model_reserve(r.m, XI_MAX(prefill, batch), batch, err, sizeof err)) return 1;

    double *bw = calloc((size_t)reps, sizeof(double)), *dec = calloc((size_t)reps, sizeof(double));
    double *frac = calloc((size_t)reps, sizeof(double)), *pre = calloc((size_t)reps, sizeof(double));
    double *peak = calloc((size_t)reps, sizeof(double)), *pfrac = calloc((size_t)reps, sizeof(double));
    double *bdec = calloc((size_t)reps, sizeof(double)), *bx = calloc((size_t)reps, sizeof(double));
    const double wbytes = (double)xi_model_step_bytes(r.m);
    /* matmul FLOPs per prompt token: every linear layer except the embedding lookup (the
     * lm_head runs for one row only and is left out); attention adds 4 * ctx * q_dim per
     * layer, averaged over the causal prompt */
    const double embed = (double)c->vocab_size * c->hidden_size;
    const double lin = (double)xi_model_n_params(r.m) - embed * (c->tie_word_embeddings ? 1 : 2);
    const double attn = 4.0 * (prefill / 2.0) * c->n_heads * c->head_dim * c->n_layers;
    const double flop_per_tok = 2.0 * lin + attn;
    limits_read_bandwidth(pool, bw_buf, nbw); /* warm the pages */
    for (int rep = 0; rep < reps; rep++) {
        bw[rep] = limits_read_bandwidth(pool, bw_buf, nbw);
        /* decode: a 16-token prompt, then decode_tokens single-token steps */
        if (run(&r, ids, 16, 0)) return 1;
        double t0 = xi_now();
        for (int t = 0; t < decode_tokens; t++)
            if (run(&r, ids + 16 + t, 1, 16 + t)) return 1;
        double dt = xi_now() - t0;
        dec[rep] = decode_tokens / dt;
        frac[rep] = dec[rep] * wbytes / bw[rep];
        if (batch > 1) { /* B sequences: a 16-token prompt each, then B-row decode steps */
            for (int s = 0; s < batch; s++) {
                r.table_off = s * BLK_PER_SEQ;
                if (run(&r, ids + s, 16, 0)) return 1;
            }
            r.table_off = 0;
            t0 = xi_now();
            for (int t = 0; t < decode_tokens; t++)
                if (run_batch(&r, ids + 16 + t, batch, 16 + t)) return 1;
            bdec[rep] = batch * decode_tokens / (xi_now() - t0);
            bx[rep] = bdec[rep] / dec[rep];
        }
        peak[rep] = limits_fma_peak(pool, 4000000L);
        if (prefill > 0) {
            t0 = xi_now();
            if (run(&r, ids, prefill, 0)) return 1;
            dt = xi_now() - t0;
            pre[rep] = prefill / dt;
            pfrac[rep] = pre[rep] * flop_per_tok / peak[rep];
        }
    }
    double m1, l1, h1;
    printf("model %s  load %s  dtype %s  quantization %s  lm_head %s  kernels %s (%s)  threads %d  read per token %.1f MiB  reps %d\n",
           p.dir, p.load_format ? p.load_format : "auto", xi_dtype_name(xi_model_dtype(r.m)), xi_model_quantization(r.m),
           xi_model_lm_head_quantization(r.m),
           xi_model_ops(r.m)->name, xi_model_ops(r.m)->precision, threads, wbytes / (1 << 20), reps);
    stats(bw, reps, &m1, &l1, &h1);
    printf("read bandwidth        %8.2f GB/s   (min %.2f, max %.2f)\n", m1 / 1e9, l1 / 1e9, h1 / 1e9);
    stats(dec, reps, &m1, &l1, &h1);
    printf("decode batch 1        %8.2f tok/s  (min %.2f, max %.2f)\n", m1, l1, h1);
    stats(frac, reps, &m1, &l1, &h1);
    printf("decode / bandwidth    %8.3f        (min %.3f, max %.3f)  <- fraction of the limit\n", m1, l1, h1);
    if (batch > 1) {
        stats(bdec, reps, &m1, &l1, &h1);
        printf("decode batch %-2d       %8.2f tok/s  (min %.2f, max %.2f)\n", batch, m1, l1, h1);
        stats(bx, reps, &m1, &l1, &h1);
        printf("batch %d / batch 1     %8.2f x      (min %.2f, max %.2f)\n", batch, m1, l1, h1);
    }
    if (prefill > 0) {
        stats(peak, reps, &m1, &l1, &h1);
        printf("fp32 FMA peak         %8.1f GFLOP/s (min %.1f, max %.1f)\n", m1 / 1e9, l1 / 1e9, h1 / 1e9);
        stats(pre, reps, &m1, &l1, &h1);
        printf("prefill %d tokens    %8.1f tok/s  (min %.1f, max %.1f)\n", prefill, m1, l1, h1);
        stats(pfrac, reps, &m1, &l1, &h1);
        printf("prefill / FMA peak    %8.3f        (min %.3f, max %.3f)\n", m1, l1, h1);
    }
    xi_free_big(bw_buf, nbw * sizeof(float));
    xi_pool_free(pool);
    xi_kv_store_free(r.kv);
    xi_model_free(r.m);
    free(r.logits);
    free(ids);
    free(bw);
    free(dec);
    free(frac);
    free(pre);
    free(peak);
    free(pfrac);
    free(bdec);
    free(bx);
    return 0;
}
