/* bench_accuracy: what 8-bit activations cost. The same model is loaded twice, with the
 * exact kernel precision (fp32 activations) and with int8 (integer dot products for AWQ and
 * int8 weights; bf16 inputs for BF16 weights where the CPU has AVX-512 BF16); the exact model decodes greedily from a fixed prompt (BOS and PROMPT - 1
 * pseudo-random ids, or BOS alone with --bos-only, as trained models start a story), and
 * the int8 model is
 * fed the same tokens (teacher forcing), so every step compares the two logit rows for the
 * same context. Then the int8 model decodes on its own, to count how long greedy output
 * stays identical.
 *
 *   bench_accuracy --model DIR [--quantization auto|int8] [--dtype bfloat16] [--tokens 64] [--threads N]
 *                  [--bos-only 1] [--compare precision|lm-head]
 *
 * With --compare lm-head, both run at the default kernel precision and differ only in the
 * lm_head: 16-bit as stored (the reference) against --lm-head-quantization int8.
 *
 * Prints per-step logit error (max |d|, and rms(d) / std(logits) so random and trained
 * models compare), top-1 agreement under teacher forcing, and free-running greedy agreement. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

#define MAX_TOKENS 1024
#define PROMPT 16

typedef struct {
    xi_model *m;
    xi_kv_store *kv;
    int32_t table[MAX_TOKENS / 16 + 2];
    float *logits;
    int vocab;
} runner;

static int runner_open(runner *r, xi_model_params p, const char *precision, const char *lm_head) {
    char err[512];
    p.kernel_precision = precision;
    p.lm_head_quantization = lm_head;
    if (!(r->m = xi_model_load(&p, err, sizeof err))) {
        fprintf(stderr, "bench_accuracy: %s\n", err);
        return -1;
    }
    const xi_config *c = xi_model_config(r->m);
    r->vocab = c->vocab_size;
    const int nb = MAX_TOKENS / 16 + 2;
    if (!(r->kv = xi_kv_store_new(c, nb + 1, 16, XI_F32, err, sizeof err))) {
        fprintf(stderr, "bench_accuracy: %s\n", err);
        return -1;
    }
    for (int i = 0; i < nb; i++) r->table[i] = i + 1;
    r->logits = malloc(sizeof(float) * (size_t)r->vocab);
    return r->logits ? 0 : -1;
}

static void runner_close(runner *r) {
    xi_kv_store_free(r->kv);
    xi_model_free(r->m);
    free(r->logits);
}

/* Tokens ids[0..n) at positions start.., logits of the last into r->logits. */
static int step(runner *r, const int32_t *ids, int n, int start) {
    int32_t pos[PROMPT];
    int64_t slots[PROMPT];
    for (int i = 0; i < n; i++) {
        pos[i] = start + i;
        slots[i] = (int64_t)r->table[pos[i] / 16] * 16 + pos[i] % 16;
    }
    xi_batch_seq s = {0, n, r->table, MAX_TOKENS / 16 + 2};
    int32_t row = n - 1;
    xi_batch b = {.n_tokens = n, .tokens = ids, .positions = pos, .slots = slots,
                  .n_seqs = 1, .seqs = &s, .n_logits = 1, .logits_rows = &row};
    char err[256];
    if (xi_model_forward(r->m, r->kv, &b, r->logits, err, sizeof err)) {
        fprintf(stderr, "bench_accuracy: forward: %s\n", err);
        return -1;
    }
    return 0;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    xi_model_params p = {.n_threads = 0};
    int n_tok = 64, np = PROMPT, lm = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) p.dir = argv[i + 1];
        else if (!strcmp(argv[i], "--quantization")) p.quantization = argv[i + 1];
        else if (!strcmp(argv[i], "--dtype")) p.dtype = argv[i + 1];
        else if (!strcmp(argv[i], "--tokens")) n_tok = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) p.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bos-only")) np = atoi(argv[i + 1]) ? 1 : PROMPT;
        else if (!strcmp(argv[i], "--compare") && (!strcmp(argv[i + 1], "lm-head") || !strcmp(argv[i + 1], "precision")))
            lm = !strcmp(argv[i + 1], "lm-head");
        else {
            fprintf(stderr, "bench_accuracy: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    if (!p.dir || n_tok < 1 || n_tok + PROMPT > MAX_TOKENS) {
        fprintf(stderr, "usage: bench_accuracy --model DIR [--quantization auto|int8] [--dtype bfloat16] [--tokens N<=%d] "
                        "[--threads N] [--bos-only 1] [--compare precision|lm-head]\n", MAX_TOKENS - PROMPT);
        return 2;
    }
    runner ex = {0}, q8 = {0};
    /* the reference and the variant measured against it */
    const char *ref_prec = lm ? NULL : "exact", *var_prec = lm ? NULL : "int8",
               *var_lm = lm ? "int8" : NULL, *what = lm ? "int8 lm_head vs 16-bit" : "int8 vs exact";
    if (runner_open(&ex, p, ref_prec, NULL) || runner_open(&q8, p, var_prec, var_lm)) return 1;
    const int V = ex.vocab;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(PROMPT + n_tok)), *free_run = malloc(sizeof(int32_t) * (size_t)n_tok);
    double *maxd = malloc(sizeof(double) * (size_t)n_tok), *rel = malloc(sizeof(double) * (size_t)n_tok),
           *margin = malloc(sizeof(double) * (size_t)n_tok);
    const int bos = xi_model_config(ex.m)->bos_token_id;
    for (int i = 0; i < np; i++) toks[i] = 1 + (int32_t)((i * 7919u) % (unsigned)(V - 1));
    if (bos >= 0) toks[0] = bos;
    int agree = 0;
    double worst = 0;
    /* teacher forcing: the exact model's greedy tokens feed both */
    for (int t = 0; t < n_tok; t++) {
        const int start = t ? np + t - 1 : 0, n = t ? 1 : np;
        if (step(&ex, toks + start, n, start) || step(&q8, toks + start, n, start)) return 1;
        double m = 0, s = 0, ss = 0, dd = 0;
        for (int j = 0; j < V; j++) {
            const double d = (double)q8.logits[j] - ex.logits[j];
            m = fmax(m, fabs(d));
            dd += d * d;
            s += ex.logits[j];
            ss += (double)ex.logits[j] * ex.logits[j];
        }
        const double var = ss / V - (s / V) * (s / V);
        maxd[t] = m;
        rel[t] = sqrt(dd / V) / sqrt(var > 0 ? var : 1e-30);
        worst = fmax(worst, m);
        toks[np + t] = argmax(ex.logits, V);
        double second = -INFINITY; /* the exact logits' top-1 margin: how close a flip was */
        for (int j = 0; j < V; j++)
            if (j != toks[np + t]) second = fmax(second, ex.logits[j]);
        margin[t] = ex.logits[toks[np + t]] - second;
        agree += argmax(q8.logits, V) == toks[np + t];
    }
    /* free running: the int8 model decodes on its own from the prompt */
    runner_close(&q8);
    if (runner_open(&q8, p, var_prec, var_lm)) return 1;
    int same_prefix = -1, same_pos = 0;
    for (int t = 0; t < n_tok; t++) {
        const int start = t ? np + t - 1 : 0, n = t ? 1 : np;
        const int32_t *in = t ? &free_run[t - 1] : toks;
        if (step(&q8, in, n, start)) return 1;
        free_run[t] = argmax(q8.logits, V);
        const int same = free_run[t] == toks[np + t];
        same_pos += same;
        if (!same && same_prefix < 0) same_prefix = t;
    }
    if (same_prefix < 0) same_prefix = n_tok;
    qsort(maxd, (size_t)n_tok, sizeof *maxd, cmp_double);
    qsort(rel, (size_t)n_tok, sizeof *rel, cmp_double);
    qsort(margin, (size_t)n_tok, sizeof *margin, cmp_double);
    printf("model %s  quantization %s  kernels %s  vocab %d  %d prompt + %d tokens\n", p.dir,
           xi_model_quantization(ex.m), xi_model_ops(ex.m)->name, V, np, n_tok);
    printf("%s logits, per step: max |d| median %.4g (max %.4g); rms(d)/std(logits) "
           "median %.4g (max %.4g)\n", what, maxd[n_tok / 2], worst, rel[n_tok / 2], rel[n_tok - 1]);
    printf("top-1 under teacher forcing: %d/%d agree (exact top-1 margin: median %.4g, min %.4g)\n",
           agree, n_tok, margin[n_tok / 2], margin[0]);
    printf("greedy free-running: identical for the first %d/%d tokens, same token at %d/%d positions\n",
           same_prefix, n_tok, same_pos, n_tok);
    runner_close(&ex);
    runner_close(&q8);
    free(toks);
    free(free_run);
    free(maxd);
    free(rel);
    free(margin);
    return 0;
}
