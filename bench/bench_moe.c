/* bench_moe: decode of a mixture-of-experts model (a Qwen3-30B-A3B-shaped AWQ folder from
 * genmodel, full width, fewer layers) at batch 1 and at N sequences, as a fraction of this
 * machine's read bandwidth measured in the same run:
 *   fraction = (weight bytes the step actually read x steps/s) / measured read bandwidth
 * where a step reads each layer's attention and router, the experts its tokens were routed to
 * (at N sequences the union of their experts, as recorded by the model's routing hook), the
 * lm_head once and every sequence's KV. Bandwidth and decode alternate; medians, min..max.
 *
 *   bench_moe --model DIR [--threads N] [--reps 5] [--steps 8] [--batch 16]
 *             [--quantization Q] [--load-format auto|mmap] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/pool.h"
#include "machine_limits.h"
#include "model/model_internal.h"

#define MAX_SEQS 64
#define BLOCKS_PER_SEQ 8 /* 128 tokens of context per sequence */

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

/* Bytes of a weight as the kernels read it. */
static double weight_bytes(const xi_weight *w) {
    const double n = (double)w->n_out * (double)w->n_in;
    if (w->dtype == XI_Q4_AWQ) return n / 2 + (double)w->n_out * (double)(w->n_in / w->group_size) * 5;
    if (w->dtype == XI_Q8) return n + (double)w->n_out * 4;
    return n * (double)xi_dtype_size(w->dtype);
}

/* Which experts each MoE layer ran in the current step. */
typedef struct used_experts {
    uint8_t *mask; /* [n_layers][n_experts] */
    int n_layers, n_experts;
} used_experts;

static void on_route(void *user, int layer, int T, int k, const int32_t *sel, const float *w) {
    used_experts *u = user;
    (void)w;
    for (int i = 0; i < T * k; i++) u->mask[(size_t)layer * u->n_experts + sel[i]] = 1;
}

/* Weight bytes of one step given the experts it used, plus the KV it read. */
static double step_bytes(const xi_model *m, const used_experts *u, int n_seqs, int ctx) {
    const xi_config *c = &m->cfg;
    double b = weight_bytes(&m->lm_head);
    for (int l = 0; l < c->n_layers; l++) {
        const xi_layer *L = &m->layers[l];
        b += weight_bytes(&L->wq) + weight_bytes(&L->wk) + weight_bytes(&L->wv) + weight_bytes(&L->wo);
        if (c->layer[l].mlp == XI_MLP_DENSE) {
            b += weight_bytes(&L->wgate) + weight_bytes(&L->wup) + weight_bytes(&L->wdown);
            continue;
        }
        b += weight_bytes(&L->router);
        for (int e = 0; e < c->layer[l].n_experts; e++)
            if (u->mask[(size_t)l * u->n_experts + e])
                b += weight_bytes(&L->egate[e]) + weight_bytes(&L->eup[e]) + weight_bytes(&L->edown[e]);
    }
    return b + (double)n_seqs * ctx * 2.0 * c->n_layers * c->n_kv_heads * c->head_dim * sizeof(float);
}

typedef struct runner {
    xi_model *m;
    xi_kv_store *kv;
    int32_t table[MAX_SEQS][BLOCKS_PER_SEQ];
    float *logits;
} runner;

/* One step of n_seqs sequences, each feeding n tokens from position start. */
static int step(runner *r, int n_seqs, const int32_t *ids, int n, int start) {
    int32_t tok[MAX_SEQS * 16], pos[MAX_SEQS * 16], rows[MAX_SEQS];
    int64_t slots[MAX_SEQS * 16];
    xi_batch_seq seqs[MAX_SEQS];
    const int bs = xi_kv_store_block_size(r->kv);
    for (int s = 0; s < n_seqs; s++) {
        seqs[s] = (xi_batch_seq){s * n, n, r->table[s], BLOCKS_PER_SEQ};
        for (int i = 0; i < n; i++) {
            const int t = s * n + i, p = start + i;
            tok[t] = ids[(s * 131 + p) % 1024];
            pos[t] = p;
            slots[t] = (int64_t)r->table[s][p / bs] * bs + p % bs;
        }
        rows[s] = s * n + n - 1;
    }
    xi_batch b = {.n_tokens = n_seqs * n, .tokens = tok, .positions = pos, .slots = slots,
                  .n_seqs = n_seqs, .seqs = seqs, .n_logits = n_seqs, .logits_rows = rows};
    char err[256];
    if (xi_model_forward(r->m, r->kv, &b, r->logits, err, sizeof err)) {
        fprintf(stderr, "bench_moe: forward: %s\n", err);
        return -1;
    }
    return 0;
}

/* Decode `steps` tokens for n_seqs sequences after an 8-token prompt each; returns tok/s and
 * the mean bytes a step read. */
static int decode(runner *r, used_experts *u, const int32_t *ids, int n_seqs, int steps, double *tok_s,
                  double *bytes) {
    if (step(r, n_seqs, ids, 8, 0)) return -1;
    double t = 0, sum = 0;
    for (int i = 0; i < steps; i++) {
        memset(u->mask, 0, (size_t)u->n_layers * u->n_experts);
        double t0 = xi_now();
        if (step(r, n_seqs, ids, 1, 8 + i)) return -1;
        t += xi_now() - t0;
        sum += step_bytes(r->m, u, n_seqs, 8 + i + 1);
    }
    *tok_s = n_seqs * steps / t;
    *bytes = sum / steps;
    return 0;
}

int main(int argc, char **argv) {
    xi_model_params p = {.n_threads = 0};
    int reps = 5, steps = 8, batch = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) p.dir = argv[i + 1];
        else if (!strcmp(argv[i], "--quantization")) p.quantization = argv[i + 1];
        else if (!strcmp(argv[i], "--load-format")) p.load_format = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) p.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_moe: unknown flag %s\n", argv[i]);
            return 1;
        }
    }
    if (!p.dir || reps < 1 || reps > 100 || steps < 1 || steps > 100 || batch < 1 || batch > MAX_SEQS) {
        fprintf(stderr, "usage: bench_moe --model DIR [--threads N] [--reps R<=100] [--steps S<=100] "
                        "[--batch N<=%d] [--quantization Q] [--load-format F]\n", MAX_SEQS);
        return 1;
    }
    char err[512];
    runner r = {0};
    double t_load = xi_now();
    r.m = xi_model_load(&p, err, sizeof err);
    if (!r.m) {
        fprintf(stderr, "bench_moe: %s\n", err);
        return 1;
    }
    t_load = xi_now() - t_load;
    const xi_config *c = xi_model_config(r.m);
    if (!c->n_experts) {
        fprintf(stderr, "bench_moe: %s is not a mixture-of-experts model\n", p.dir);
        return 1;
    }
    r.kv = xi_kv_store_new(c, MAX_SEQS * BLOCKS_PER_SEQ + 1, 16, XI_F32, err, sizeof err);
    if (!r.kv) {
        fprintf(stderr, "bench_moe: %s\n", err);
        return 1;
    }
    for (int s = 0; s < MAX_SEQS; s++)
        for (int i = 0; i < BLOCKS_PER_SEQ; i++) r.table[s][i] = 1 + s * BLOCKS_PER_SEQ + i;
    r.logits = malloc(sizeof(float) * (size_t)c->vocab_size * MAX_SEQS);
    used_experts u = {calloc((size_t)c->n_layers * c->n_experts, 1), c->n_layers, c->n_experts};
    r.m->route_hook = on_route;
    r.m->route_user = &u;
    int32_t ids[1024];
    for (int i = 0; i < 1024; i++) ids[i] = (int32_t)((i * 7919L) % c->vocab_size);
    if (xi_model_reserve(r.m, batch * 8, batch, err, sizeof err)) return 1;
    const int threads = xi_model_n_threads(r.m);
    xi_pool *pool = xi_pool_new(threads);
    const size_t nbw = (size_t)1 << 28; /* 1 GiB of floats, far beyond any cache */
    float *bw_buf = xi_alloc_big(nbw * sizeof(float));
    for (size_t i = 0; i < nbw; i += 1024) bw_buf[i] = 1.0f;
    limits_read_bandwidth(pool, bw_buf, nbw); /* warm the pages */

    /* warm-up: the first use of the experts (under --load-format mmap, AWQ experts are repacked
     * on the step that first routes to them) stays out of the measured reps */
    double t_warm = xi_now(), dummy_t, dummy_b;
    if (decode(&r, &u, ids, batch, steps, &dummy_t, &dummy_b)) return 1;
    t_warm = xi_now() - t_warm;
    int n_lazy = 0, n_repacked = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (r.m->layers[l].esrc)
            for (int e = 0; e < c->layer[l].n_experts; e++) {
                n_lazy++;
                n_repacked += r.m->layers[l].egate[e].data != NULL;
            }
    double *bw = calloc((size_t)reps, sizeof(double)), *t1 = calloc((size_t)reps, sizeof(double));
    double *f1 = calloc((size_t)reps, sizeof(double)), *tn = calloc((size_t)reps, sizeof(double));
    double *fn = calloc((size_t)reps, sizeof(double)), b1 = 0, bn = 0;
    for (int rep = 0; rep < reps; rep++) {
        bw[rep] = limits_read_bandwidth(pool, bw_buf, nbw);
        if (decode(&r, &u, ids, 1, steps, &t1[rep], &b1)) return 1;
        f1[rep] = t1[rep] * b1 / bw[rep];
        if (decode(&r, &u, ids, batch, steps, &tn[rep], &bn)) return 1;
        fn[rep] = tn[rep] / batch * bn / bw[rep];
    }
    double wall = (double)xi_model_weight_bytes(r.m), m1, l1, h1;
    printf("model %s  %s  %s  kernels %s  threads %d  layers %d  experts %d (%d per token)  weights %.2f GiB  "
           "load %.1f s  reps %d x %d steps\n",
           p.dir, xi_model_quantization(r.m), p.load_format ? p.load_format : "auto", xi_model_ops(r.m)->name,
           threads, c->n_layers, c->n_experts, c->n_experts_per_tok, wall / (1 << 30), t_load, reps, steps);
    printf("warm-up (batch %d, %d steps) %.2f s", batch, steps, t_warm);
    if (n_lazy) printf("; AWQ experts repacked on first use: %d of %d", n_repacked, n_lazy);
    printf("\n");
    stats(bw, reps, &m1, &l1, &h1);
    printf("read bandwidth            %8.2f GB/s    (min %.2f, max %.2f)\n", m1 / 1e9, l1 / 1e9, h1 / 1e9);
    printf("bytes read per step       batch 1: %.1f MiB   batch %d: %.1f MiB (union of experts, last rep)\n",
           b1 / (1 << 20), batch, bn / (1 << 20));
    stats(t1, reps, &m1, &l1, &h1);
    printf("decode batch 1            %8.2f tok/s   (min %.2f, max %.2f)\n", m1, l1, h1);
    stats(f1, reps, &m1, &l1, &h1);
    printf("batch 1 / bandwidth       %8.3f         (min %.3f, max %.3f)  <- fraction of the limit\n", m1, l1, h1);
    stats(tn, reps, &m1, &l1, &h1);
    printf("decode batch %-3d          %8.2f tok/s   (min %.2f, max %.2f) total\n", batch, m1, l1, h1);
    stats(fn, reps, &m1, &l1, &h1);
    printf("batch %-3d / bandwidth     %8.3f         (min %.3f, max %.3f)  <- fraction of the limit\n", batch,
           m1, l1, h1);
    xi_free_big(bw_buf, nbw * sizeof(float));
    xi_pool_free(pool);
    xi_kv_store_free(r.kv);
    xi_model_free(r.m);
    free(u.mask);
    free(r.logits);
    free(bw);
    free(t1);
    free(f1);
    free(tn);
    free(fn);
    return 0;
}
