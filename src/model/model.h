/* model: a loaded transformer (config + weights) and the paged KV store it computes into.
 * Only the engine thread calls xi_model_forward; load/free belong to the owner. */
#ifndef XI_MODEL_H
#define XI_MODEL_H

#include <stdint.h>

#include "base/comm.h"
#include "base/pool.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/config.h"

typedef struct xi_model xi_model;

typedef struct xi_model_params {
    const char *dir;
    const char *dtype;          /* "auto", "float32", "bfloat16", "float16" */
    const char *quantization;   /* NULL/"auto", "awq", "int8", "none" */
    const char *lm_head_quantization; /* NULL/"none": lm_head as stored; "int8": the int8 weight format at load */
    const char *load_format;    /* "auto" (copy into own memory), "mmap" */
    const char *kernels;        /* NULL: best for this CPU (XINFER_KERNELS honoured) */
    const char *kernel_precision; /* NULL/"auto": XINFER_KERNEL_PRECISION, else "int8"; or "exact" */
    int n_threads;              /* 0 = all online CPUs */
    xi_comm *comm;              /* tensor parallelism: this rank's communicator (NULL or
                                   size 1: the whole model); borrowed, outlives the model */
    void (*progress)(void *user, double fraction); /* optional, per loaded layer */
    void *progress_user;
} xi_model_params;

xi_model *xi_model_load(const xi_model_params *p, char *err, size_t errlen);
void xi_model_free(xi_model *m);

const xi_config *xi_model_config(const xi_model *m);
const xi_ops *xi_model_ops(const xi_model *m);
xi_dtype xi_model_dtype(const xi_model *m);     /* weight dtype (F32/F16/BF16; quantized: the
                                                   dtype of the unquantized tensors) */
int64_t xi_model_weight_bytes(const xi_model *m);
/* The weight bytes a batch-1 decode step reads: all of them less an embedding table that is
 * not also the lm_head (a lookup reads one row of it). */
int64_t xi_model_step_bytes(const xi_model *m);
int64_t xi_model_n_params(const xi_model *m);
int xi_model_n_threads(const xi_model *m);
const char *xi_model_quantization(const xi_model *m); /* "none", "awq", "int8" */
const char *xi_model_lm_head_quantization(const xi_model *m); /* "none" or "int8" */

/* The paged KV store: n_blocks blocks of block_size tokens, K and V for every layer.
 * Memory layout [n_blocks][n_layers][K|V][n_kv_heads][block_size][head_dim]. */
typedef struct xi_kv_store xi_kv_store;

int64_t xi_kv_block_bytes(const xi_config *c, int block_size, xi_dtype kv_dtype);
xi_kv_store *xi_kv_store_new(const xi_config *c, int n_blocks, int block_size, xi_dtype kv_dtype,
                             char *err, size_t errlen);
void xi_kv_store_free(xi_kv_store *kv);
int xi_kv_store_blocks(const xi_kv_store *kv);
int xi_kv_store_block_size(const xi_kv_store *kv);
xi_dtype xi_kv_store_dtype(const xi_kv_store *kv);

/* Run one flat batch: write its K/V into kv, then logits[i * vocab ...] for each
 * batch->logits_rows[i]. Scratch is allocated at the first call with the largest batch and
 * reused (xi_model_reserve preallocates it). Returns 0 or -1 with err. */
int xi_model_forward(xi_model *m, xi_kv_store *kv, const xi_batch *b, float *logits, char *err,
                     size_t errlen);
/* Tensor parallelism (p->comm of size > 1): rank 0 calls xi_model_forward, which sends each
 * batch to the other ranks; they call xi_model_serve_rank, which runs those batches on their
 * shard (with KV memory of their own) until rank 0 calls xi_model_tp_stop (xi_model_free
 * does) or a collective fails. 0 when stopped, -1 with err. */
int xi_model_serve_rank(xi_model *m, char *err, size_t errlen);
int xi_model_tp_stop(xi_model *m, char *err, size_t errlen);
/* Rank 0, idle: a heartbeat, so the other ranks know it lives (they give up on a rank 0
 * silent for twice the collectives' timeout). */
int xi_model_tp_ping(xi_model *m, char *err, size_t errlen);
/* A collective failed: no step can run any more. */
int xi_model_tp_failed(const xi_model *m);
/* Preallocate per-step scratch for batches of up to max_tokens tokens and max_logits rows. */
int xi_model_reserve(xi_model *m, int max_tokens, int max_logits, char *err, size_t errlen);

#endif
