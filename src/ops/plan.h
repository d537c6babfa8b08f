/* ops/plan: `xinfer plan` — how much memory a model needs on a device, how many sequences
 * fit, and a bandwidth-bound decode estimate (formulas: reference ascend.md §0 and §6).
 * Pure arithmetic over a model's shape and a device's memory and bandwidth; no I/O except
 * xi_plan_model_load (config.json). Any thread. */
#ifndef XI_OPS_PLAN_H
#define XI_OPS_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* GGUF: a GGUF file's quantized weights as stored (their bytes are measured from the file). */
typedef enum { XI_PQ_NONE, XI_PQ_AWQ, XI_PQ_INT8, XI_PQ_GGUF } xi_plan_quant;

typedef struct xi_plan_model {
    char name[96];
    char source[16];            /* "catalogue" or "folder" */
    int hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
    int tied;                   /* lm_head shares the embedding matrix */
    int attention_bias;         /* q/k/v bias (Qwen2) */
    int qk_norm;                /* per-head q/k RMSNorm weights (Qwen3) */
    int experts, experts_per_tok, moe_intermediate; /* MoE (Qwen3-MoE); experts 0: dense */
    int moe_layers;             /* layers whose MLP is the mixture (the rest dense) */
    int max_position;
    char dtype[16];             /* "bfloat16", "float16", "float32" */
    int dtype_bytes;
    xi_plan_quant quant;        /* what the checkpoint holds */
    char quant_method[16];      /* "awq", "gptq" or "" */
    int quant_bits, quant_group, quant_zero_point;
    /* GGUF: bytes as stored of the linear layers other than the experts, of every expert
     * together, of the embedding and lm_head, and of the rest (norms, biases, routers); the
     * file's most common matrix type ("q4_K"). */
    int64_t gguf_linear, gguf_experts, gguf_embed, gguf_other;
    char gguf_type[16];
} xi_plan_model;

/* Built-in shapes (reference model-configs.md). Names match case-insensitively and
 * forgive an "org/" prefix and "-Instruct" / "-AWQ" suffixes ("-AWQ" sets quant). */
int xi_plan_model_catalog(const char *name, xi_plan_model *m, char *err, size_t errlen);
int xi_plan_model_count(void);
const char *xi_plan_model_name(int i);
/* Shape and quantization_config from dir/config.json, or shape and stored bytes from a GGUF
 * file when dir is one. */
int xi_plan_model_load(const char *dir, xi_plan_model *m, char *err, size_t errlen);

typedef struct xi_plan_device {
    const char *key;            /* "910b3", "300i-duo", "kunpeng920", "custom" */
    const char *name;
    int is_cpu;
    int64_t mem_bytes;          /* visible memory of one device (npu-smi MB = MiB) */
    int devices;                /* devices in one product unit (Duo 2, 800I A2 8) */
    int max_tp;                 /* largest tensor-parallel group tried */
    double bw_lo, bw_hi;        /* memory bandwidth per device, bytes/s; 0 = unknown */
    double tflops_lo, tflops_hi;/* fp16 dense per device; 0 = unknown */
    int bf16;                   /* native BF16 (310P has none: bf16 models run as fp16) */
    int w4;                     /* native 4-bit weight matmul (310P: INT8 only) */
    const char *source;         /* where the numbers come from */
} xi_plan_device;

int xi_plan_device_count(void);
const xi_plan_device *xi_plan_device_at(int i);
/* NULL when key names no catalogue device (err lists the keys). */
const xi_plan_device *xi_plan_device_find(const char *key, char *err, size_t errlen);

typedef enum { XI_KV_AUTO, XI_KV_F16, XI_KV_BF16, XI_KV_F32, XI_KV_FP8 } xi_plan_kv;

typedef struct xi_plan_params {
    int quant;                  /* xi_plan_quant, or -1: as the checkpoint */
    xi_plan_kv kv_dtype;
    int max_model_len;          /* 0: the model's max_position */
    int typical_context;        /* 0: min(2048, max_model_len) */
    int tp;                     /* 0: the smallest that fits */
    double util;                /* fraction of device memory the server may take (0.9) */
    int block_size;             /* 0: 128 on Ascend (vllm-ascend), 16 on CPU (xinfer) */
    double overhead_bytes;      /* < 0: default runtime reserve per device (see plan.c) */
    int max_num_seqs;           /* cap on the batch of the decode estimate (256) */
} xi_plan_params;

void xi_plan_params_default(xi_plan_params *p);

typedef struct xi_plan_weights {
    int64_t params, params_linear, params_embed, params_lm_head, params_other;
    int64_t bytes_linear;       /* quantized (or not) linear layers, scales and zeros included */
    int64_t bytes_linear_meta;  /* of which scales and zero points */
    int64_t bytes_embed;        /* embeddings + lm_head, always 16-bit */
    int64_t bytes_other;        /* norms and biases */
    int64_t bytes;              /* total */
    /* What one token reads (MoE: top-k experts of each MoE layer and the router; dense: all
     * linears): the decode estimate's weight traffic at batch 1. */
    int64_t params_active, bytes_active;
    int64_t bytes_expert;       /* one expert's gate, up and down (0 dense) */
    /* The same at the batch of the estimate: the expected union of experts its tokens pick
     * when routing is uniform, E (1 - (1 - k/E)^batch) per layer (xi_plan.batch). */
    int64_t bytes_batch;
} xi_plan_weights;

typedef struct xi_plan {
    xi_plan_quant quant;
    int kv_bytes;               /* per element */
    const char *kv_dtype;       /* "float16", ... as planned */
    int max_model_len, typical_context, block_size, tp;
    double util;
    xi_plan_weights w;
    int64_t weights_per_device;
    int64_t kv_per_token;       /* whole model: 2 × layers × kv_heads × head_dim × bytes */
    int64_t kv_per_token_device;/* one device's share (KV heads split, or replicated when tp > kv_heads) */
    int64_t kv_per_seq_full;    /* one device, max_model_len rounded up to blocks */
    int64_t kv_per_seq_typical;
    int64_t device_bytes, usable_bytes, overhead_bytes;
    int64_t kv_budget;          /* per device; negative when the weights do not fit */
    int fits;                   /* at least one full-length sequence fits */
    int64_t max_seqs_full, max_seqs_typical;
    int min_tp;                 /* smallest valid TP that fits (0: none up to max_tp) */
    int batch;                  /* concurrency of the batched estimate */
    double tok1_lo, tok1_hi;    /* batch-1 decode bound, tok/s (0 when bandwidth unknown) */
    double tokn_lo, tokn_hi;    /* aggregate decode bound at `batch` (bandwidth and compute) */
    double compute_lo, compute_hi; /* aggregate compute ceiling at `batch` (0 unknown) */
    int n_notes;
    char notes[6][200];
} xi_plan;

/* TP sizes vLLM-style engines accept for this shape: heads % tp == 0, KV heads divisible by
 * tp or tp a multiple of them, and for 4-bit groups intermediate/tp a multiple of the group. */
int xi_plan_tp_valid(const xi_plan_model *m, xi_plan_quant q, int tp);
/* Fill r for m on d. p->tp == 0 picks the smallest valid TP that fits (TP 1 when none does).
 * Returns -1 for parameters that make no sense (err names the parameter). */
int xi_plan_compute(const xi_plan_model *m, const xi_plan_device *d, const xi_plan_params *p,
                    xi_plan *r, char *err, size_t errlen);
const char *xi_plan_quant_name(xi_plan_quant q);

#endif
