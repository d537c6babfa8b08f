/* bench_engine: the engine's own overheads, as ratios measured in one run.
 *
 *   1. scheduler + block manager per step with 256 running requests: logic alone, and inside
 *      a stories260K engine (cheap forward) as a share of the whole step;
 *   2. the same scheduling time as a fraction of one decode step of a Qwen2.5-0.5B-shaped
 *      model (--model DIR, made by `genmodel --preset qwen2.5-0.5b DIR`; target < 2%), and
 *      that model's aggregate decode tok/s at 1, 4, 16, 64 concurrent requests vs 1;
 *   3. prefix caching: TTFT of a request whose 1,024-token prefix is cached vs the same request
 *      cold (qwen2-tiny-random, or --ttft-model DIR; target >= 10x);
 *   4. KV memory: the fraction of allocated KV slots holding tokens while 64 requests of ~500
 *      tokens run together (target > 95%).
 *   5. with --prefix-hit (alone, on --model): what a prefix hit costs. The prefill of N new
 *      tokens behind a cached P-token prefix against the same N tokens with no prefix, as
 *      ratios over alternating repetitions, next to the ratio a FLOP count predicts (the
 *      hit's only real extra work is attention over the cached context).
 *
 * usage: bench_engine [--model DIR] [--ttft-model DIR] [--data DIR] [--threads N]
 *        bench_engine --model DIR --prefix-hit [--prefix P] [--new N] [--reps R] [--threads N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/core.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* ---- a core on a real model ------------------------------------------------------------ */

typedef struct bench_engine {
    xi_model *model;
    xi_tokenizer *tok;
    xi_kv_store *kv;
    xi_core core;
    int64_t next_id;
} bench_engine;

static int be_open(bench_engine *b, const char *dir, int n_threads, int kv_blocks, int budget,
                   int max_seqs, int max_len, int caching) {
    char err[256];
    memset(b, 0, sizeof *b);
    xi_model_params mp = {.dir = dir, .dtype = "auto", .load_format = "auto", .n_threads = n_threads};
    if (!(b->model = xi_model_load(&mp, err, sizeof err)) ||
        !(b->tok = xi_tokenizer_load(dir, err, sizeof err))) {
        fprintf(stderr, "%s: %s\n", dir, err);
        return -1;
    }
    const xi_config *c = xi_model_config(b->model);
    if (max_len > c->max_position_embeddings) max_len = c->max_position_embeddings;
    b->kv = xi_kv_store_new(c, kv_blocks + 1, 16, xi_model_dtype(b->model), err, sizeof err);
    xi_core_params cp = {kv_blocks + 1, 16, max_seqs, budget, max_len, caching, 1, 0};
    if (!b->kv || xi_core_init(&b->core, &cp, b->model, b->kv, b->tok, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", dir, err);
        return -1;
    }
    return 0;
}

static void be_close(bench_engine *b) {
    xi_core_free(&b->core);
    xi_kv_store_free(b->kv);
    xi_tokenizer_free(b->tok);
    xi_model_free(b->model);
}

typedef struct first_token {
    double t;               /* xi_now() at the first output with ids */
    int n_done;
} first_token;

static void on_out(void *user, const xi_output *o) {
    first_token *f = user;
    if (f && o->n_new && f->t == 0) f->t = xi_now();
    if (f && o->finish_reason != XI_FINISH_NONE) f->n_done++;
}

static int be_submit(bench_engine *b, const int32_t *prompt, int n, int max_tokens, void *user) {
    xi_request_params rp;
    memset(&rp, 0, sizeof rp);
    rp.n = 1;
    rp.temperature = 0;
    rp.top_p = 1;
    rp.repetition_penalty = 1;
    rp.seed = -1;
    rp.max_tokens = max_tokens;
    rp.ignore_eos = 1;
    rp.logprobs = rp.prompt_logprobs = -1;
    xi_group *g = xi_group_new(&rp, prompt, n);
    if (!g) return -1;
    g->id = b->next_id++;
    g->fn = on_out;
    g->user = user;
    g->arrival = xi_now();
    xi_core_add(&b->core, g);
    return 0;
}

static void run_idle(bench_engine *b) {
    char err[256];
    while (xi_core_has_work(&b->core))
        if (xi_core_step(&b->core, err, sizeof err) < 0) {
            fprintf(stderr, "step: %s\n", err);
            return;
        }
}

static void fill_prompt(int32_t *p, int n, int vocab, uint64_t seed) {
    p[0] = 1;
    for (int i = 1; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        p[i] = 3 + (int32_t)(seed % (uint64_t)(vocab - 3));
    }
}

/* ---- 1. scheduler + block manager, logic alone ------------------------------------------ */

/* n requests with prompts of prompt_len tokens generating gen tokens each, all admitted at
 * once; returns seconds of schedule + update per step; *util gets the mean fraction of
 * allocated slots that hold tokens over the steps where every request runs. */
static double sched_only(int n, int prompt_len, int gen, double *util) {
    xi_kv_manager km;
    xi_scheduler s;
    int bs = 16, max_prompt = prompt_len + prompt_len / 10 + 1, max_len = max_prompt + gen;
    int blocks = n * ((max_len + bs - 1) / bs) + 1;
    xi_sched_params sp = {n, 8192, max_len, 1};
    if (xi_kv_manager_init(&km, blocks, bs, 1, max_len, NULL, 0) || xi_sched_init(&s, &sp, &km, NULL, 0))
        return -1;
    xi_request *r = calloc((size_t)n, sizeof *r);
    int32_t *prompt = malloc((size_t)max_prompt * sizeof *prompt);
    int32_t *sampled = calloc((size_t)n, sizeof *sampled);
    xi_request_limits lim = {.max_tokens = gen, .eos_token_id = -1};
    for (int i = 0; i < n; i++) {
        /* lengths spread +-10% so block boundaries fall at different steps */
        int len = prompt_len - prompt_len / 10 + (i * 7919) % (prompt_len / 5 + 1);
        fill_prompt(prompt, len, 32000, (uint64_t)i + 1);
        xi_request_init(&r[i], i, prompt, len, &lim, max_len, bs, NULL, NULL, 0);
        xi_sched_add(&s, &r[i]);
    }
    double t = 0, used = 0, alloc = 0;
    int steps = 0;
    uint64_t x = 88172645463325252ull;
    while (xi_sched_has_unfinished(&s)) {
        double t0 = xi_now();
        int k = xi_sched_schedule(&s);
        for (int i = 0; i < k; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sampled[i] = 3 + (int32_t)(x % 31997);
        }
        xi_sched_update(&s, sampled);
        t += xi_now() - t0;
        steps++;
        if (s.n_running == n) {
            for (int i = 0; i < n; i++) {
                used += r[i].num_computed;
                alloc += (double)r[i].n_blocks * bs;
            }
        }
    }
    *util = alloc > 0 ? used / alloc : 0;
    for (int i = 0; i < n; i++) xi_request_free(&r[i]);
    free(r);
    free(prompt);
    free(sampled);
    xi_sched_free(&s);
    xi_kv_manager_free(&km);
    return t / steps;
}

/* ---- 5. prefix-hit cost ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_ratio(const char *what, double *r, int n) {
    qsort(r, (size_t)n, sizeof *r, cmp_double);
    printf("%s: %.2fx median (%.2f..%.2f, %d reps)\n", what, r[n / 2], r[0], r[n - 1], n);
}

/* Seconds from submit to the first token of one prompt (max_tokens 1). */
static double time_prefill(bench_engine *b, const int32_t *prompt, int n) {
    first_token f = {0};
    double t0 = xi_now();
    be_submit(b, prompt, n, 1, &f);
    run_idle(b);
    return f.t - t0;
}

/* Forward FLOPs of n tokens at positions p0 .. p0+n-1: the layers' matmuls (2 per weight),
 * attention (QK^T and PV: 4 per head dim per key) and the one lm_head row. */
static double prefill_flops(const xi_config *c, int p0, int n) {
    const double qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
    const double w = c->hidden_size * (2 * qd + 2 * kvd) + 3.0 * c->hidden_size * c->intermediate_size;
    const double keys = (double)n * p0 + (double)n * (n + 1) / 2;
    return c->n_layers * (2 * w * n + 4 * qd * keys) + 2.0 * c->hidden_size * c->vocab_size;
}

static int prefix_hit(const char *dir, int threads, int P, int N, int reps) {
    bench_engine b;
    const int max_len = P + N + 8;
    if (be_open(&b, dir, threads, 4 * (max_len / 16 + 2) * (reps + 2), 4096, 4, max_len, 1)) return 1;
    const xi_config *c = xi_model_config(b.model);
    int32_t *prompt = malloc((size_t)(P + N) * sizeof *prompt);
    double *hit = malloc((size_t)reps * sizeof *hit), *full = malloc((size_t)reps * sizeof *full);
    fill_prompt(prompt, P + N, c->vocab_size, 99);
    time_prefill(&b, prompt, P + N); /* caches the prefix, warms the pages */
    for (int k = 0; k < reps; k++) {
        /* each repetition: fresh new tokens, so only the P-token prefix can hit */
        fill_prompt(prompt + P, N, c->vocab_size, 1000 + (uint64_t)k);
        prompt[P] = 3 + k;
        double t_new = time_prefill(&b, prompt + P, N);
        double t_hit = time_prefill(&b, prompt, P + N);
        int32_t keep = prompt[1];
        prompt[1] = 3 + (keep + 1 + k) % (c->vocab_size - 3); /* another prefix: a miss */
        double t_cold = time_prefill(&b, prompt, P + N);
        prompt[1] = keep;
        hit[k] = t_hit / t_new;
        full[k] = t_cold / t_new;
    }
    printf("prefix hit: %d new tokens behind a cached %d-token prefix (%s, %d threads)\n", N, P,
           dir, threads);
    print_ratio("  prefill with the hit / the new tokens alone", hit, reps);
    printf("  FLOP model of that ratio (attention over the cached context as the only extra): "
           "%.2fx\n", prefill_flops(c, P, N) / prefill_flops(c, 0, N));
    print_ratio("  prefill of the same prompt with no hit / the new tokens alone", full, reps);
    free(prompt);
    free(hit);
    free(full);
    be_close(&b);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    const char *model05 = NULL, *ttft_model = NULL, *data = "../shared/data";
    int threads = 0, hit_mode = 0, hit_p = 512, hit_n = 128, reps = 5;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each result as soon as it is measured */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model05 = argv[++i];
        else if (!strcmp(argv[i], "--ttft-model") && i + 1 < argc) ttft_model = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefix-hit")) hit_mode = 1;
        else if (!strcmp(argv[i], "--prefix") && i + 1 < argc) hit_p = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--new") && i + 1 < argc) hit_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_engine [--model DIR] [--ttft-model DIR] [--data DIR] [--threads N]\n"
                            "       bench_engine --model DIR --prefix-hit [--prefix P] [--new N] [--reps R]\n");
            return 2;
        }
    }
    if (hit_mode) {
        if (!model05 || hit_p < 16 || hit_n < 2 || reps < 1) {
            fprintf(stderr, "--prefix-hit: needs --model DIR, --prefix >= 16, --new >= 2, --reps >= 1\n");
            return 2;
        }
        return prefix_hit(model05, threads, hit_p, hit_n, reps);
    }
    char *stories = xi_path_join(data, "models/stories260K");
    char *qwen_tiny = xi_path_join(data, "models/qwen2-tiny-random");
    if (!ttft_model) ttft_model = qwen_tiny;

    /* 1. scheduling with 256 running */
    double util_unused;
    double t_logic = sched_only(256, 128, 128, &util_unused);
    bench_engine b;
    if (be_open(&b, stories, threads, 256 * 16, 8192, 256, 512, 1)) return 1;
    int32_t prompt[2048];
    for (int i = 0; i < 256; i++) {
        fill_prompt(prompt, 16 + i % 16, 512, (uint64_t)i + 7);
        be_submit(&b, prompt, 16 + i % 16, 128, NULL);
    }
    run_idle(&b);
    xi_core *c = &b.core;
    double step = (c->t_sched + c->t_batch + c->t_forward + c->t_sample + c->t_output) / c->steps;
    double sched = c->t_sched / c->steps;
    printf("scheduler + block manager, 256 running: %.1f us/step alone, %.1f us/step in the "
           "stories260K engine = %.1f%% of its step (forward %.1f%%, sampling %.1f%%, "
           "batch %.1f%%, outputs %.1f%%)\n",
           t_logic * 1e6, sched * 1e6, 100 * sched / step, 100 * c->t_forward / c->steps / step,
           100 * c->t_sample / c->steps / step, 100 * c->t_batch / c->steps / step,
           100 * c->t_output / c->steps / step);
    be_close(&b);

    /* 2. against a 0.5B decode step, and throughput vs concurrency */
    if (model05) {
        bench_engine m;
        if (be_open(&m, model05, threads, 64 * 40, 2048, 64, 640, 0)) return 1;
        int vocab = xi_model_config(m.model)->vocab_size;
        double tps1 = 0;
        const int conc[4] = {1, 4, 16, 64};
        for (int k = 0; k < 4; k++) {
            int n = conc[k], gen = 16;
            for (int i = 0; i < n; i++) {
                fill_prompt(prompt, 8, vocab, (uint64_t)(k * 100 + i + 1));
                be_submit(&m, prompt, 8, gen, NULL);
            }
            /* prefill first, then time the decode steps only */
            char err[256];
            xi_core_step(&m.core, err, sizeof err);
            int64_t g0 = m.core.generation_tokens_total;
            double f0 = m.core.t_forward, t0 = xi_now();
            int64_t s0 = m.core.steps;
            run_idle(&m);
            double dt = xi_now() - t0;
            double tps = (double)(m.core.generation_tokens_total - g0) / dt;
            if (k == 0) {
                tps1 = tps;
                double dec = (m.core.t_forward - f0) / (double)(m.core.steps - s0);
                printf("scheduling 256 running / one 0.5B decode step (1 sequence, %.1f ms): "
                       "%.3f%% alone, %.3f%% in-engine (target < 2%%)\n",
                       dec * 1e3, 100 * t_logic / dec, 100 * sched / dec);
            }
            printf("0.5B decode throughput at %2d concurrent: %.2fx concurrency 1\n", n, tps / tps1);
        }
        be_close(&m);
    } else {
        printf("0.5B comparisons skipped: pass --model DIR (genmodel --preset qwen2.5-0.5b DIR)\n");
    }

    /* 3. prefix caching TTFT */
    {
        bench_engine t;
        if (be_open(&t, ttft_model, threads, 512, 2048, 8, 4096, 1)) return 1;
        int vocab = xi_model_config(t.model)->vocab_size;
        fill_prompt(prompt, 1040, vocab, 4242);
        first_token cold = {0}, warm = {0};
        double t0 = xi_now();
        be_submit(&t, prompt, 1040, 1, &cold);
        run_idle(&t);
        double ttft_cold = cold.t - t0;
        for (int i = 1024; i < 1040; i++) prompt[i] = 3 + (prompt[i] + 1) % (vocab - 3);
        t0 = xi_now();
        be_submit(&t, prompt, 1040, 1, &warm);
        run_idle(&t);
        double ttft_warm = warm.t - t0;
        printf("prefix caching: TTFT cold / TTFT with a cached 1024-token prefix = %.1fx "
               "(target >= 10x; %s)\n", ttft_cold / ttft_warm, ttft_model);
        be_close(&t);
    }

    /* 4. KV slot utilisation */
    double util;
    sched_only(64, 450, 100, &util);
    printf("KV slots holding tokens, 64 requests of ~500 tokens: %.1f%% (target > 95%%)\n",
           100 * util);
    free(stories);
    free(qwen_tiny);
    return 0;
}
