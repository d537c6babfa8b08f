/* model internals shared by the loader and the forward pass (model/ only). */
#ifndef XI_MODEL_INTERNAL_H
#define XI_MODEL_INTERNAL_H

#include "model/gguf_model.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "base/comm.h"

/* One layer's weights: what its spec (cfg.layer[l]) lists is bound, the rest is zero. */
typedef struct xi_layer {
    xi_weight wq, wk, wv, wo;      /* [n_heads*hd, hidden], [n_kv*hd, hidden] x2, [hidden, n_heads*hd] */
    xi_weight wgate, wup, wdown;   /* dense MLP: [inter, hidden] x2, [hidden, inter] */
    float *bq, *bk, *bv;           /* q/k/v bias (Qwen2) as f32, or NULL */
    float *q_norm, *k_norm;        /* [head_dim] f32 per-head q/k RMSNorm (Qwen3), or NULL */
    float *attn_norm, *ffn_norm;   /* [hidden] f32 */
    xi_weight router;              /* MoE: [n_experts, hidden], never quantized */
    xi_weight *egate, *eup, *edown;/* MoE: [n_experts] each expert's [ffn, hidden] x2, [hidden, ffn] */
    struct xi_awq_src *esrc;       /* MoE AWQ experts under --load-format mmap: [3 * n_experts]
                                    * (gate, up, down) still in the file, repacked on first use
                                    * (moe.c); NULL when every expert was repacked at load */
} xi_layer;

/* Rows [r0, r1) and columns [c0, c1) of a stored [rows, cols] matrix: a rank's part. */
typedef struct xi_slice {
    int64_t r0, r1, c0, c1;
} xi_slice;

/* This rank's share of the model under tensor parallelism (shard.c); tp 1: everything. */
typedef struct xi_shard {
    int tp, rank;
    int q_head0, n_heads;      /* this rank's query heads [q_head0, q_head0 + n_heads) */
    int kv_head0, n_kv_heads;  /* its KV heads (replicated when there are fewer than ranks) */
    int64_t vocab0, vocab1;    /* its lm_head rows; logits of the others come from them */
} xi_shard;

/* An AutoAWQ GEMM linear as the checkpoint stores it (qweight, qzeros, scales in the mapped
 * file, stored shape [n_out, n_in]) and this rank's slice of it. */
typedef struct xi_awq_src {
    const void *qweight, *qzeros, *scales;
    int64_t n_in, n_out;
    xi_slice sl;
} xi_awq_src;

/* Every buffer the model allocated, freed in reverse order. */
typedef struct xi_owned {
    void *p;
    size_t bytes;
    int big; /* 1: xi_alloc_big, 0: malloc */
} xi_owned;

/* Per-step MoE scratch, sized for cap tokens (moe.c). */
typedef struct xi_moe_scratch {
    int cap;             /* tokens */
    float *logits;       /* [T, n_experts] router logits, then probabilities */
    int32_t *sel;        /* [T, top_k] chosen experts of each token, ascending id */
    float *w;            /* [T, top_k] their weights */
    int32_t *slot;       /* [T, top_k] row of (token, choice) in the grouped arrays */
    int32_t *start;      /* [n_experts + 1] first grouped row of each expert */
    float *xg;           /* [T * top_k, hidden] inputs grouped by expert */
    float *gate, *up;    /* [T * top_k, ffn] */
    float *yg;           /* [T * top_k, hidden] expert outputs */
} xi_moe_scratch;

struct xi_model {
    xi_config cfg;
    xi_st_set *st;                 /* open while weights may point into the mmap */
    xi_gguf *gguf;                 /* a GGUF model: the file, open like st */
    xi_gguf_weights *gw;           /* ... and its tensors as the loader binds them */
    const xi_ops *ops;
    xi_pool *pool;
    xi_dtype wdtype;               /* dtype of float weights in memory */
    const struct quant_mode *qmode; /* --quantization: how linears load (loader.c) */
    const struct xi_wformat *qfmt; /* ... and their format; NULL: as stored */
    const char *quant;             /* "none", "awq", "int8", "gguf" */
    int lm_head_q8;                /* --lm-head-quantization int8 asked for */
    const char *lm_head_quant;     /* "none" (as stored) or "int8" (quantized at load) */
    xi_weight embed;               /* [vocab, hidden] */
    xi_weight lm_head;             /* [vocab, hidden]; = embed when tied */
    float *final_norm;             /* [hidden] */
    xi_layer *layers;              /* [n_layers] */
    double *inv_freq;              /* [head_dim/2] rotary frequencies after scaling */
    double rope_mscale;            /* YaRN attention factor applied to cos/sin (1 otherwise) */
    int64_t weight_bytes, n_params;
    int64_t embed_bytes;           /* of weight_bytes, the embedding table's */

    xi_owned *owned;
    int n_owned, cap_owned;

    /* per-step scratch, sized by xi_model_reserve; reused every step */
    int cap_tokens, cap_logits, cap_scratch;
    float *x;       /* [T, hidden] residual stream */
    float *xn;      /* [T, max(hidden, q_dim)] normed input / projection output */
    float *q;       /* [T, n_heads*hd] */
    float *k, *v;   /* [T, n_kv*hd] */
    float *att;     /* [T, n_heads*hd] attention output */
    float *gate;    /* [T, inter] */
    float *up;      /* [T, inter] */
    float *cs;      /* [T, hd] cos then sin per token */
    float *hlast;   /* [L, hidden] rows whose logits are wanted */
    float *attn_scratch; /* [n_threads, cap_scratch] */
    int64_t *attn_cost;  /* [T + 1] prefix sums of keys read per token, for load balance */
    xi_moe_scratch moe;  /* MoE layers' routing and grouped rows (moe.c) */
    /* tensor parallelism (shard.c, tp.c): NULL comm or size 1 runs alone */
    xi_comm *comm;
    xi_shard shard;
    float *tp_logits;    /* [L, vocab1 - vocab0] this rank's logits columns */
    float *tp_gather;    /* [L, vocab] rank 0: every rank's columns, rank by rank */
    int64_t *tp_counts;  /* [tp] floats each rank contributes to the gather */
    uint8_t *tp_msg;     /* the batch as sent to the other ranks */
    size_t tp_msg_cap;
    xi_kv_store *tp_kv;  /* ranks other than 0: their own KV blocks (tp.c) */
    int tp_failed;       /* a collective failed (or the others were stopped): no more */
    int tp_live;         /* every rank loaded its shard and serves */
    int64_t tp_steps, tp_tokens; /* rank 0: steps sent and their tokens */
    /* Tests: when set, every MoE layer reports its routing (rows in batch order, each row's
     * top_k experts in ascending id and their weights). */
    void (*route_hook)(void *user, int layer, int T, int top_k, const int32_t *sel, const float *w);
    void *route_user;
};

int xi_model_own(xi_model *m, void *p, size_t bytes, int big);
/* shard.c: choose this rank's share (after config and quantization are known; refuses a
 * -tp that cuts heads or quantization groups, listing the -tp values that work) and, once
 * the weights are bound, make cfg describe this rank's heads and ffn columns. */
int xi_shard_plan(xi_model *m, xi_comm *comm, char *err, size_t errlen);
void xi_shard_localize(xi_model *m);
/* The lm_head rows [*v0, *v1) of rank of tp (multiples of 8 long, the last one shorter). */
void xi_shard_vocab(int vocab, int tp, int rank, int64_t *v0, int64_t *v1);
/* The slice sl (NULL: all) of an AutoAWQ GEMM weight, packed as xi_weight_pack_awq does. */
int xi_shard_pack_awq(xi_weight *w, const int32_t *qweight, const int32_t *qzeros,
                      const uint16_t *scales, int64_t n_in, int64_t n_out, int group,
                      const xi_slice *sl, void **owned, size_t *owned_bytes, char *err,
                      size_t errlen);
/* src as a kernel-layout weight (packed, then blocked for m's kernels) in one new allocation
 * *owned of *owned_bytes that the caller owns; -1 with err set (nothing allocated). Safe to
 * run for different weights on several threads at once. */
int xi_awq_repack(const xi_model *m, xi_weight *w, const xi_awq_src *src, void **owned,
                  size_t *owned_bytes, char *err, size_t errlen);
/* The slice sl (NULL: all) of a float weight quantized to int8 per output channel; each
 * channel's scale comes from its whole row, so shards quantize exactly as -tp 1 does. */
int xi_shard_quantize_q8(xi_weight *w, const void *src, xi_dtype dtype, int64_t n_out,
                         int64_t n_in, const xi_slice *sl, void **owned, size_t *owned_bytes,
                         char *err, size_t errlen);
/* tp.c: the collectives of one forward pass. */
int xi_tp_send_batch(xi_model *m, const xi_kv_store *kv, const xi_batch *b, char *err, size_t errlen);
int xi_tp_allreduce(xi_model *m, float *buf, int64_t n, char *err, size_t errlen);
int xi_tp_logits(xi_model *m, int n_rows, float *logits, char *err, size_t errlen);
int xi_tp_reserve(xi_model *m, int max_logits);
void xi_tp_free(xi_model *m);
int xi_model_forward_rank(xi_model *m, xi_kv_store *kv, const xi_batch *b, float *logits,
                          char *err, size_t errlen);
/* The KV store as seen by one layer's attention. */
xi_kv_view xi_kv_store_view(const xi_kv_store *kv, int layer);
/* MoE (moe.c): x += the mixture of experts of xn for layer L, every row (out = it, when
 * out is set: xn may be out, it is read first); sizes scratch. -1 with err set when an
 * expert routed to for the first time cannot be repacked (out of memory). */
int xi_moe_reserve(xi_model *m, int max_tokens);
int xi_moe_forward(xi_model *m, int layer, int T, float *out, char *err, size_t errlen);
void xi_moe_free(xi_moe_scratch *s);
void xi_rope_frequencies(const xi_config *c, double *inv_freq, double *mscale);

#endif
