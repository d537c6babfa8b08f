/* Test helpers: drive xi_model_forward directly for one or more sequences with contiguous
 * block tables (no engine), and read the JSON references. */
#ifndef XI_TEST_MODEL_UTIL_H
#define XI_TEST_MODEL_UTIL_H

#include <jansson.h>

#include "model/model.h"

/* Load a model folder from the shared data with fp32 activations (as the references). */
xi_model *tm_load(const char *rel, const char *dtype, const char *kernels, int threads);

typedef struct tm_seq {
    int32_t table[256];  /* block ids */
    int n_blocks;
    int n_past;          /* tokens already in the cache */
} tm_seq;

/* Give seq i blocks [first_block + i*per_seq, ...). */
void tm_seq_init(tm_seq *s, int first_block, int n_blocks);

/* Feed n ids of each of n_seq sequences in ONE batch (rows seq-major); logits of the last
 * row of each sequence go to logits[s * vocab], or of every row when all_rows. */
int tm_forward(xi_model *m, xi_kv_store *kv, tm_seq **seqs, const int32_t *const *ids,
               const int *n, int n_seq, int all_rows, float *logits);

/* Greedy: argmax, lowest id wins a tie. */
int32_t tm_argmax(const float *x, int n);

json_t *tm_load_json(const char *rel);

#endif
