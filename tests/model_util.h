/* Test helpers: drive xi_model_forward directly for one or more sequences with contiguous
 * block tables (no engine), and read the JSON references. */
#ifndef XI_TEST_MODEL_UTIL_H
#define XI_TEST_MODEL_UTIL_H

#include <jansson.h>

#include "kernels/kernels.h"
#include "model/gguf.h"
#include "model/model.h"

/* Load a model folder from the shared data with fp32 activations (as the references). */
xi_model *tm_load(const char *rel, const char *dtype, const char *kernels, int threads);
/* The same with a --quantization (NULL: as the checkpoint); rel may be an absolute folder. */
xi_model *tm_load_ex(const char *rel, const char *dtype, const char *quant, const char *kernels,
                     int threads);
/* ... and an --lm-head-quantization (NULL: as stored). */
xi_model *tm_load_lm(const char *rel, const char *dtype, const char *quant, const char *lm_head,
                     const char *kernels, int threads);

typedef struct tm_seq {
    int32_t table[256];  /* block ids */
    int n_blocks;
    int n_past;          /* tokens already in the cache */
} tm_seq;

/* Give seq i blocks [first_block + i*per_seq, ...). */
void tm_seq_init(tm_seq *s, int first_block, int n_blocks);

/* Feed n ids of each of n_seq sequences in ONE batch (rows seq-major); logits of the last
 * row of each sequence go to logits[s * vocab], or of every row when all_rows; none when
 * logits is NULL. */
int tm_forward(xi_model *m, xi_kv_store *kv, tm_seq **seqs, const int32_t *const *ids,
               const int *n, int n_seq, int all_rows, float *logits);

/* Greedy: argmax, lowest id wins a tie. */
int32_t tm_argmax(const float *x, int n);

json_t *tm_load_json(const char *rel);

/* One batch of n <= 256 ids from position 0; the logits of every row (heap, [n][vocab]), NULL
 * on failure. */
float *tm_logits_all(xi_model *m, const int32_t *ids, int n);

/* Run build/tools/genmodel (or $XINFER_TOOLS/genmodel) --preset `preset` with `args` into
 * tmpdir/sub; returns that path (heap) or NULL with genmodel's output on stderr. */
char *tm_genmodel(const char *sub, const char *preset, const char *args);

/* Every metadata key of g written to w as it is (for copies of a GGUF file with some tensors
 * changed). */
void tm_gguf_copy_kv(xi_gguf_writer *w, const xi_gguf *g);

/* Every kernel variant this CPU runs must reproduce the references. */
#define TM_FOR_EACH_VARIANT(fn, ...)                                                  \
    do {                                                                           \
        const xi_ops *all_[8];                                                     \
        int n_ = xi_ops_available(all_, 8);                                        \
        for (int v_ = 0; v_ < n_; v_++) {                                          \
            fn(all_[v_]->name, ##__VA_ARGS__);                                     \
            CHECKF(!xi_test_failed(), "kernel variant %s", all_[v_]->name);        \
        }                                                                          \
    } while (0)

/* The same for each activation precision of quantized weights in the mask (1: exact,
 * 2: int8; XINFER_KERNEL_PRECISION picks it at load). Unquantized models run the same code
 * in both, so they need only TM_FOR_EACH_VARIANT. */
#define TM_FOR_EACH_VARIANT_IN(precisions, fn, ...)                                   \
    do {                                                                           \
        static const char *const prec_[2] = {"exact", "int8"};                     \
        for (int p_ = 0; p_ < 2; p_++) {                                           \
            if (!((precisions) >> p_ & 1)) continue;                               \
            setenv("XINFER_KERNEL_PRECISION", prec_[p_], 1);                       \
            TM_FOR_EACH_VARIANT(fn, ##__VA_ARGS__);                                \
            CHECKF(!xi_test_failed(), "%s precision", prec_[p_]);                  \
        }                                                                          \
        unsetenv("XINFER_KERNEL_PRECISION");                                       \
    } while (0)

/* A Hugging Face reference (models/<rel>/reference.json): the first 8 logits at every
 * position and the whole last row within 1e-4, then greedy 32 equal. The largest errors seen
 * go to err_first8 / err_last (over every sequence) when not NULL. */
/* --quantization int8 of models/<rel>: under bytes_ratio of the float weight bytes, last logits of ids within
 * 5% of the logit range of the float model's (and not equal), same argmax. */
void tm_int8_tracks_float(const char *rel, const int32_t *ids, int n, double bytes_ratio);

/* The same sequence computed alone and as one of 17 sequences in a batch gives the same bits;
 * so does feeding its prompt in chunks of 1, 5 and 16 tokens. KV cache of dtype kvt. */
void tm_invariance(const char *kernels, const char *rel, xi_dtype kvt, const char *quant);
/* The same with an --lm-head-quantization. */
void tm_invariance_lm(const char *kernels, const char *rel, xi_dtype kvt, const char *quant,
                      const char *lm_head);

void tm_reference(const char *kernels, const char *rel, double *err_first8, double *err_last);
/* The same for the model at model (a folder or file: shared-data relative or absolute) against
 * the reference ref_rel, logits within tol. */
void tm_reference_of(const char *kernels, const char *model, const char *ref_rel, double tol,
                     double *err_first8, double *err_last);

#endif
