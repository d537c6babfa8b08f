/* model/config: config.json + generation_config.json of a Hugging Face folder. */
#ifndef XI_CONFIG_H
#define XI_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "model/arch.h"
#include "tensor/dtype.h"

#define XI_MAX_EOS 8

typedef enum { XI_ROPE_NONE, XI_ROPE_LLAMA3, XI_ROPE_YARN, XI_ROPE_LINEAR } xi_rope_type;

typedef struct xi_config {
    char architecture[64];      /* config.json architectures[0], e.g. "Qwen3ForCausalLM" */
    const xi_arch_family *family;
    xi_layer_spec *layer;       /* [n_layers] owned: what each layer runs (model/arch.h) */
    int hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads, head_dim, vocab_size;
    int max_position_embeddings;
    float rms_norm_eps;
    double rope_theta;
    xi_rope_type rope_type;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    float *rope_freq_factors;   /* [head_dim/2] owned, or NULL: each rotary frequency divided by
                                   its factor before the scaling above (a GGUF's rope_freqs) */
    double yarn_beta_fast, yarn_beta_slow, yarn_mscale, yarn_mscale_all_dim;
    int tie_word_embeddings;
    int attention_bias;         /* q/k/v bias (Qwen2) */
    /* mixture of experts (0 when dense); which layers are MoE is in layer[] */
    int n_experts, n_experts_per_tok, moe_intermediate_size, norm_topk_prob;
    xi_dtype torch_dtype;
    int bos_token_id;           /* -1 when absent */
    int eos_ids[XI_MAX_EOS];    /* config.json eos + generation_config.json eos, unique */
    int n_eos;
    /* quantization_config */
    int quant_awq;              /* quant_method == "awq" */
    int quant_bits, quant_group_size, quant_zero_point;
    char **modules_to_not_convert;
    int n_modules_to_not_convert;
    /* generation_config.json defaults (< 0 when absent) */
    float gen_temperature, gen_top_p, gen_min_p, gen_repetition_penalty;
    int gen_top_k;
} xi_config;

/* Parse dir/config.json and dir/generation_config.json (optional). */
int xi_config_load(xi_config *c, const char *dir, char *err, size_t errlen);
/* The same from a parsed config.json object j (path names it in errors); dir: the folder
 * whose generation_config.json is read, or NULL for none (a GGUF file's config). */
int xi_config_parse(xi_config *c, json_t *j, const char *path, const char *dir, char *err,
                    size_t errlen);
void xi_config_free(xi_config *c);
/* For the family parsers: o[key] as a non-negative int into *out (left as is when absent and
 * not required); -1 with err naming file and key. */
int xi_config_get_int(json_t *o, const char *key, int *out, int required, const char *file,
                      char *err, size_t errlen);

#endif
