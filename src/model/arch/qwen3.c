/* model/arch/qwen3: Qwen3ForCausalLM. Llama's body with a per-head RMSNorm of q and k
 * (q_norm, k_norm: [head_dim], shared by the heads) before RoPE, head_dim from config.json
 * (not hidden/heads: attention scale and RoPE use it), and no q/k/v bias by default. */
#include "model/config.h"

static int parse(xi_config *c, json_t *j, const char *file, char *err, size_t errlen) {
    (void)file;
    c->attention_bias = json_is_true(json_object_get(j, "attention_bias"));
    return xi_arch_dense_layers(c, 1, c->attention_bias ? XI_BIAS_REQUIRED : XI_BIAS_OPTIONAL,
                                err, errlen);
}

static const char *const hf[] = {"Qwen3ForCausalLM", NULL};
static const char *const gguf[] = {"qwen3", NULL};

const xi_arch_family xi_arch_qwen3 = {"qwen3", hf, gguf, hf, NULL, parse, xi_llama_names};
