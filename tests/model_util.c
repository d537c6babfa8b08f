#include "model_util.h"

#include <stdio.h>
#include <stdlib.h>

#include "test.h"

xi_model *tm_load(const char *rel, const char *dtype, const char *kernels, int threads) {
    char err[512] = "";
    char *dir = xi_test_data(rel);
    xi_model_params p = {.dir = dir, .dtype = dtype, .kernels = kernels, .n_threads = threads};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    if (!m) fprintf(stderr, "    load %s: %s\n", dir, err);
    free(dir);
    return m;
}

void tm_seq_init(tm_seq *s, int first_block, int n_blocks) {
    s->n_blocks = n_blocks;
    s->n_past = 0;
    for (int i = 0; i < n_blocks; i++) s->table[i] = first_block + i;
}

int tm_forward(xi_model *m, xi_kv_store *kv, tm_seq **seqs, const int32_t *const *ids,
               const int *n, int n_seq, int all_rows, float *logits) {
    size_t total = 0;
    for (int s = 0; s < n_seq; s++) total += (size_t)(n[s] > 0 ? n[s] : 0);
    if (total == 0 || total > (1u << 20)) return -1;
    int32_t *tok = malloc(sizeof(int32_t) * total), *pos = malloc(sizeof(int32_t) * total);
    int64_t *slots = malloc(sizeof(int64_t) * total);
    int32_t *rows = malloc(sizeof(int32_t) * total);
    xi_batch_seq *bs = calloc(n_seq, sizeof *bs);
    const int B = xi_kv_store_block_size(kv);
    int r = 0, nl = 0;
    for (int s = 0; s < n_seq; s++) {
        bs[s] = (xi_batch_seq){r, n[s], seqs[s]->table, seqs[s]->n_blocks};
        for (int i = 0; i < n[s]; i++, r++) {
            int p = seqs[s]->n_past + i;
            tok[r] = ids[s][i];
            pos[r] = p;
            slots[r] = (int64_t)seqs[s]->table[p / B] * B + p % B;
            if (all_rows || i == n[s] - 1) rows[nl++] = r;
        }
        seqs[s]->n_past += n[s];
    }
    xi_batch b = {(int32_t)total, tok, pos, slots, n_seq, bs, nl, rows, 0, NULL, NULL};
    char err[256];
    int rc = xi_model_forward(m, kv, &b, logits, err, sizeof err);
    if (rc) fprintf(stderr, "    forward: %s\n", err);
    free(tok);
    free(pos);
    free(slots);
    free(rows);
    free(bs);
    return rc;
}

int32_t tm_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

json_t *tm_load_json(const char *rel) {
    char *p = xi_test_data(rel);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j) fprintf(stderr, "    %s: %s\n", p, je.text);
    free(p);
    return j;
}
