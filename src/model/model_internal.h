/* model internals shared by the loader and the forward pass (model/ only). */
#ifndef XI_MODEL_INTERNAL_H
#define XI_MODEL_INTERNAL_H

#include "model/model.h"
#include "model/safetensors.h"

typedef struct xi_layer {
    xi_weight wq, wk, wv, wo;      /* [n_heads*hd, hidden], [n_kv*hd, hidden] x2, [hidden, n_heads*hd] */
    xi_weight wgate, wup, wdown;   /* [inter, hidden] x2, [hidden, inter] */
    float *bq, *bk, *bv;           /* q/k/v bias (Qwen2) as f32, or NULL */
    float *attn_norm, *ffn_norm;   /* [hidden] f32 */
} xi_layer;

/* Every buffer the model allocated, freed in reverse order. */
typedef struct xi_owned {
    void *p;
    size_t bytes;
    int big; /* 1: xi_alloc_big, 0: malloc */
} xi_owned;

struct xi_model {
    xi_config cfg;
    xi_st_set *st;                 /* open while weights may point into the mmap */
    const xi_ops *ops;
    xi_pool *pool;
    xi_dtype wdtype;               /* dtype of float weights in memory */
    const char *quant;             /* "none", "awq", "int8" */
    xi_weight embed;               /* [vocab, hidden] */
    xi_weight lm_head;             /* [vocab, hidden]; = embed when tied */
    float *final_norm;             /* [hidden] */
    xi_layer *layers;              /* [n_layers] */
    double *inv_freq;              /* [head_dim/2] rotary frequencies after scaling */
    double rope_mscale;            /* YaRN attention factor applied to cos/sin (1 otherwise) */
    int64_t weight_bytes, n_params;

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
};

int xi_model_own(xi_model *m, void *p, size_t bytes, int big);
/* The KV store as seen by one layer's attention. */
xi_kv_view xi_kv_store_view(const xi_kv_store *kv, int layer);
void xi_rope_frequencies(const xi_config *c, double *inv_freq, double *mscale);

#endif
