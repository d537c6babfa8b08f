/* model/arch: architectures as data.
 *
 * A family file under model/arch/ turns config.json into a per-layer spec (what attention a
 * layer runs and what it caches, q/k norm, q/k/v bias, norm placement, MLP kind: dense or MoE
 * with its routing rule) and names the family's tensors in Hugging Face's and GGUF's naming.
 * The loader binds what the spec lists; forward runs the spec. The registry maps
 * config.json's architectures[0] to its family. A new family is one file and its tests. */
#ifndef XI_ARCH_H
#define XI_ARCH_H

#include <jansson.h>
#include <stddef.h>

struct xi_config;
struct xi_gguf;

/* How a layer mixes tokens. FULL: causal softmax attention over every earlier position. */
typedef enum { XI_ATTN_FULL } xi_attn_kind;
/* What a layer keeps per token between steps. KV: its K and V in the paged KV store (one
 * layout for every layer today; a sliding-window or recurrent layer adds a kind). */
typedef enum { XI_CACHE_KV } xi_cache_kind;
/* PRE: x += f(rmsnorm(x)) around both attention and MLP (Llama, Qwen). */
typedef enum { XI_NORM_PRE } xi_norm_place;
typedef enum { XI_MLP_DENSE, XI_MLP_MOE } xi_mlp_kind;
/* SOFTMAX_TOPK: softmax over every expert's router logit in fp32, the top k (lowest id wins a
 * tie), their weights renormalised to sum 1 when norm_topk (Qwen3-MoE, Mixtral). */
typedef enum { XI_ROUTE_SOFTMAX_TOPK } xi_route_kind;
/* q/k/v bias: OPTIONAL is loaded when the checkpoint has it, REQUIRED must be there (Qwen2,
 * or attention_bias true). */
typedef enum { XI_BIAS_OPTIONAL, XI_BIAS_REQUIRED } xi_bias_kind;

typedef struct xi_layer_spec {
    xi_attn_kind attn;
    xi_cache_kind cache;
    xi_norm_place norm;
    int qk_norm;            /* per-head RMSNorm of q and k, weights [head_dim], before RoPE */
    xi_bias_kind qkv_bias;
    xi_mlp_kind mlp;
    int ffn;                /* dense: intermediate size; MoE: each expert's intermediate size */
    int n_experts, top_k;   /* MoE only */
    xi_route_kind route;    /* MoE only */
    int norm_topk;          /* MoE only: renormalise the top-k weights */
} xi_layer_spec;

/* Every tensor a family may have. Names are of the module: the loader appends ".weight",
 * ".bias" or AWQ's ".qweight"/".qzeros"/".scales". */
typedef enum {
    XI_T_TOKEN_EMBD, XI_T_OUTPUT_NORM, XI_T_OUTPUT,
    XI_T_ATTN_NORM, XI_T_ATTN_Q, XI_T_ATTN_K, XI_T_ATTN_V, XI_T_ATTN_O,
    XI_T_ATTN_Q_NORM, XI_T_ATTN_K_NORM,
    XI_T_FFN_NORM, XI_T_FFN_GATE, XI_T_FFN_UP, XI_T_FFN_DOWN,
    XI_T_FFN_ROUTER,                              /* [n_experts, hidden] */
    XI_T_EXP_GATE, XI_T_EXP_UP, XI_T_EXP_DOWN,    /* one expert's; GGUF stacks them in 3-D */
    XI_T_COUNT
} xi_tensor_role;

typedef enum { XI_NAMES_HF, XI_NAMES_GGUF } xi_naming;

/* printf formats of a role's module name: layer first, then expert where the name has one
 * (GGUF's expert tensors are 3-D [n_experts, ...] and have no expert index). */
typedef struct xi_tensor_name {
    xi_tensor_role role;
    const char *hf, *gguf;
} xi_tensor_name;

typedef struct xi_arch_family {
    const char *name;             /* "llama", "qwen3", "qwen3_moe" */
    const char *const *hf_archs;  /* config.json architectures[0] values, NULL-terminated */
    const char *const *gguf_archs;/* GGUF general.architecture values, NULL-terminated */
    const char *const *gguf_as_hf;/* the config.json architecture of each gguf_archs entry */
    /* GGUF hook: put the family's own config.json fields, read from the file's metadata
     * (keys "<arch>.*"), into cfg, the config.json object built from the common keys
     * (model/gguf_model.c); NULL when the family has none. -1 with err naming the key. */
    int (*gguf_config)(json_t *cfg, const struct xi_gguf *g, const char *arch, char *err,
                       size_t errlen);
    /* Read the family's own config.json fields into c (the common ones are read already)
     * and fill c->layer[0 .. c->n_layers). -1 with err naming file and field. */
    int (*parse)(struct xi_config *c, json_t *j, const char *file, char *err, size_t errlen);
    const xi_tensor_name *names;  /* ends with role XI_T_COUNT */
} xi_arch_family;

/* The family of architectures[0], or NULL. */
const xi_arch_family *xi_arch_find(const char *architecture);
/* The family of a GGUF general.architecture and the config.json architecture it stands for
 * (*hf), or NULL. */
const xi_arch_family *xi_arch_find_gguf(const char *gguf_arch, const char **hf);
/* "LlamaForCausalLM, MistralForCausalLM, ..." : every architecture the registry knows. */
void xi_arch_known(char *buf, size_t n);
/* The module name of role in the given naming for layer (and expert); -1 when the family has
 * no such tensor or buf is too small. */
int xi_arch_tensor_name(const xi_arch_family *f, xi_naming naming, xi_tensor_role role, int layer,
                        int expert, char *buf, size_t n);

/* The Llama lineage's tensor names (Llama, Qwen2, Qwen3, Qwen3-MoE share them). */
extern const xi_tensor_name xi_llama_names[];
/* The spec every family starts its layers from: full attention, KV cache, pre-norm, dense
 * MLP of intermediate_size. Allocates c->layer; -1 with err when out of memory. */
int xi_arch_dense_layers(struct xi_config *c, int qk_norm, xi_bias_kind bias, char *err,
                         size_t errlen);

/* The families (model/arch/<family>.c). */
extern const xi_arch_family xi_arch_llama;     /* Llama, Mistral, Qwen2 */
extern const xi_arch_family xi_arch_qwen3;     /* Qwen3 dense */
extern const xi_arch_family xi_arch_qwen3_moe; /* Qwen3-MoE */

#endif
