/* bench_guide: the cost of structured outputs' token mask against the decode step it guards,
 * both measured in the same run, alternating (decode, mask, decode, mask, ...):
 *   ratio = (mask time per step x sequences) / decode step time at that batch
 * The mask walks a JSON Schema answer token by token (its tokens from the model's own
 * tokenizer), so every grammar state an answer meets is masked. "warm" masks reuse the
 * per-position token cache (every request after the first with the same schema, and every
 * later visit of a position); "cold" starts each walk from a fresh grammar, so each position's
 * first visit pays for its cache. Medians and min..max over --reps.
 *
 *   bench_guide --model DIR [--threads 2] [--reps 7] [--batch 1,4,16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/guide.h"
#include "model/model.h"
#include "sample/grammar.h"
#include "tokenizer/tokenizer.h"

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":24},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"email\":{\"type\":\"string\",\"format\":\"email\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":12},\"maxItems\":4},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"zip\":{\"type\":\"string\",\"pattern\":\"[0-9]{5}\"}},\"required\":[\"city\",\"zip\"]},"
    "\"score\":{\"type\":\"number\"},\"active\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\",\"email\",\"tags\",\"address\",\"score\",\"active\"]}";
static const char *ANSWER =
    "{\"name\": \"Zoë Müller-Schmidt\", \"age\": 41, \"email\": \"zoe.m@example.org\", "
    "\"tags\": [\"admin\", \"ops\", \"北京\"], \"address\": {\"city\": \"Frankfurt am Main\", "
    "\"zip\": \"60311\"}, \"score\": -12.75, \"active\": true}";

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

/* one decode step of `batch` sequences at position pos (each its own 16-block table) */
static int decode_step(xi_model *m, xi_kv_store *kv, int batch, int pos, float *logits) {
    int32_t ids[64], positions[64], rows[64], table[64 * 16];
    int64_t slots[64];
    xi_batch_seq seqs[64];
    const int bs = xi_kv_store_block_size(kv);
    for (int s = 0; s < batch; s++) {
        for (int k = 0; k < 16; k++) table[s * 16 + k] = 1 + s * 16 + k;
        ids[s] = (s * 7919 + pos) % 1000;
        positions[s] = pos;
        slots[s] = (int64_t)table[s * 16 + pos / bs] * bs + pos % bs;
        seqs[s] = (xi_batch_seq){s, 1, table + s * 16, 16};
        rows[s] = s;
    }
    xi_batch b = {.n_tokens = batch, .tokens = ids, .positions = positions, .slots = slots,
                  .n_seqs = batch, .seqs = seqs, .n_logits = batch, .logits_rows = rows};
    char err[256];
    if (xi_model_forward(m, kv, &b, logits, err, sizeof err)) {
        fprintf(stderr, "forward: %s\n", err);
        return -1;
    }
    return 0;
}

/* mask every state of the answer; returns seconds per mask */
static double mask_walk(xi_guide_vocab *v, xi_grammar *g, const int32_t *ids, int n, const int32_t *end) {
    xi_grammar_state s;
    xi_grammar_state_init(g, &s);
    double t0 = xi_now();
    for (int i = 0; i < n; i++) {
        xi_guide_mask(v, g, &s, end, 1, 0, 1);
        if (!v->allow[ids[i]]) fprintf(stderr, "bench_guide: token %d of the answer masked out\n", i);
        xi_guide_advance(v, g, &s, ids[i]);
    }
    double dt = (xi_now() - t0) / n;
    if (!xi_grammar_done(&s)) fprintf(stderr, "bench_guide: the answer did not complete the schema\n");
    xi_grammar_state_free(&s);
    return dt;
}

int main(int argc, char **argv) {
    xi_model_params p = {.n_threads = 2};
    int reps = 7, batches[8] = {1, 4, 16}, n_batches = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) p.dir = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) p.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) {
            n_batches = 0;
            for (char *t = strtok(argv[i + 1], ","); t && n_batches < 8; t = strtok(NULL, ","))
                batches[n_batches++] = atoi(t);
        } else {
            fprintf(stderr, "bench_guide: unknown flag %s\n", argv[i]);
            return 1;
        }
    }
    for (int k = 0; k < n_batches; k++)
        if (batches[k] < 1 || batches[k] > 64) return fprintf(stderr, "bench_guide: batch in 1..64\n"), 1;
    if (!p.dir || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: bench_guide --model DIR [--threads N] [--reps R] [--batch 1,4,16]\n");
        return 1;
    }
    char err[512];
    xi_model *m = xi_model_load(&p, err, sizeof err);
    xi_tokenizer *tok = m ? xi_tokenizer_load(p.dir, err, sizeof err) : NULL;
    if (!tok) {
        fprintf(stderr, "bench_guide: %s\n", err);
        return 1;
    }
    const xi_config *c = xi_model_config(m);
    xi_kv_store *kv = xi_kv_store_new(c, 64 * 16 + 1, 16, XI_F32, err, sizeof err);
    xi_guide_vocab v;
    if (!kv || xi_model_reserve(m, 64, 64, err, sizeof err) || xi_guide_vocab_init(&v, tok, c->vocab_size, err, sizeof err)) {
        fprintf(stderr, "bench_guide: %s\n", err);
        return 1;
    }
    int32_t *ids = NULL;
    const int n_ids = xi_tokenizer_encode(tok, ANSWER, strlen(ANSWER), 0, 1, &ids, err, sizeof err);
    const int32_t end = 0; /* any id: the end of the answer is never drawn here */
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * 64);
    xi_grammar *warm = xi_grammar_compile(XI_GRAMMAR_JSON_SCHEMA, SCHEMA, strlen(SCHEMA), err, sizeof err);
    if (n_ids < 1 || !logits || !warm) {
        fprintf(stderr, "bench_guide: %s\n", err);
        return 1;
    }
    mask_walk(&v, warm, ids, n_ids, &end); /* builds the warm cache */
    double *dec = calloc((size_t)reps * n_batches, sizeof(double));
    double *mw = calloc((size_t)reps, sizeof(double)), *mc = calloc((size_t)reps, sizeof(double));
    for (int k = 0; k < n_batches; k++) decode_step(m, kv, batches[k], 0, logits); /* warm up */
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < n_batches; k++) {
            double t0 = xi_now();
            for (int t = 1; t <= 8; t++)
                if (decode_step(m, kv, batches[k], t, logits)) return 1;
            dec[k * reps + rep] = (xi_now() - t0) / 8;
        }
        mw[rep] = mask_walk(&v, warm, ids, n_ids, &end);
        xi_grammar *cold = xi_grammar_compile(XI_GRAMMAR_JSON_SCHEMA, SCHEMA, strlen(SCHEMA), err, sizeof err);
        mc[rep] = mask_walk(&v, cold, ids, n_ids, &end);
        xi_grammar_free(cold);
    }
    double med, lo, hi, wmed, wlo, whi, cmed, clo, chi;
    printf("model %s  threads %d  vocab %d  answer %d tokens  reps %d\n", p.dir, xi_model_n_threads(m),
           c->vocab_size, n_ids, reps);
    stats(mw, reps, &wmed, &wlo, &whi);
    stats(mc, reps, &cmed, &clo, &chi);
    printf("mask per step, warm   %8.3f ms  (min %.3f, max %.3f)\n", wmed * 1e3, wlo * 1e3, whi * 1e3);
    printf("mask per step, cold   %8.3f ms  (min %.3f, max %.3f)  (each position's cache built on its first visit)\n",
           cmed * 1e3, clo * 1e3, chi * 1e3);
    for (int k = 0; k < n_batches; k++) {
        const int b = batches[k];
        stats(dec + k * reps, reps, &med, &lo, &hi);
        printf("batch %2d: decode step %8.2f ms (min %.2f, max %.2f)   mask/decode warm %.4f (%.4f..%.4f)"
               "   cold %.4f (%.4f..%.4f)\n",
               b, med * 1e3, lo * 1e3, hi * 1e3, b * wmed / med, b * wlo / hi, b * whi / lo, b * cmed / med,
               b * clo / hi, b * chi / lo);
    }
    xi_grammar_free(warm);
    xi_guide_vocab_free(&v);
    free(ids);
    free(logits);
    free(dec);
    free(mw);
    free(mc);
    xi_kv_store_free(kv);
    xi_tokenizer_free(tok);
    xi_model_free(m);
    return 0;
}
