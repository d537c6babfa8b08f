/* model/arch/qwen3_moe: Qwen3MoeForCausalLM. Qwen3's attention; the MLP of layer l is a
 * mixture of num_experts SwiGLU experts of moe_intermediate_size unless l is listed in
 * mlp_only_layers or (l + 1) is not a multiple of decoder_sparse_step (then a dense MLP of
 * intermediate_size). Router mlp.gate [num_experts, hidden]: softmax over all experts,
 * top num_experts_per_tok, renormalised when norm_topk_prob. */
#include "base/base.h"
#include "model/config.h"
#include "model/gguf_model.h"

static int parse(xi_config *c, json_t *j, const char *file, char *err, size_t errlen) {
    c->attention_bias = json_is_true(json_object_get(j, "attention_bias"));
    if (xi_arch_dense_layers(c, 1, c->attention_bias ? XI_BIAS_REQUIRED : XI_BIAS_OPTIONAL, err,
                             errlen))
        return -1;
    int step = 1;
    if (xi_config_get_int(j, "num_experts", &c->n_experts, 1, file, err, errlen) ||
        xi_config_get_int(j, "num_experts_per_tok", &c->n_experts_per_tok, 1, file, err, errlen) ||
        xi_config_get_int(j, "moe_intermediate_size", &c->moe_intermediate_size, 1, file, err,
                          errlen) ||
        xi_config_get_int(j, "decoder_sparse_step", &step, 0, file, err, errlen))
        return -1;
    if (c->n_experts < 1 || c->n_experts > 4096 || c->n_experts_per_tok < 1 ||
        c->n_experts_per_tok > c->n_experts)
        return xi_errf(err, errlen, "%s: num_experts_per_tok %d must be in [1, num_experts %d] "
                                    "(num_experts at most 4096)",
                       file, c->n_experts_per_tok, c->n_experts);
    if (c->moe_intermediate_size < 1)
        return xi_errf(err, errlen, "%s: moe_intermediate_size must be positive", file);
    if (step < 1) return xi_errf(err, errlen, "%s: decoder_sparse_step must be positive", file);
    c->norm_topk_prob = json_is_true(json_object_get(j, "norm_topk_prob"));
    json_t *only = json_object_get(j, "mlp_only_layers");
    if (only && !json_is_null(only) && !json_is_array(only))
        return xi_errf(err, errlen, "%s: mlp_only_layers must be a list of layer indices", file);
    for (int l = 0; l < c->n_layers; l++) {
        int dense = (l + 1) % step != 0;
        size_t i;
        json_t *e;
        json_array_foreach(only, i, e) if (json_is_integer(e) && json_integer_value(e) == l) dense = 1;
        if (dense) continue;
        xi_layer_spec *s = &c->layer[l];
        s->mlp = XI_MLP_MOE;
        s->ffn = c->moe_intermediate_size;
        s->n_experts = c->n_experts;
        s->top_k = c->n_experts_per_tok;
        s->route = XI_ROUTE_SOFTMAX_TOPK;
        s->norm_topk = c->norm_topk_prob;
    }
    return 0;
}

static const char *const hf[] = {"Qwen3MoeForCausalLM", NULL};
static const char *const gguf[] = {"qwen3moe", NULL};

/* GGUF: llama.cpp runs every qwen3moe layer as MoE and renormalises the top-k weights. */
static int gguf_config(json_t *cfg, const xi_gguf *g, const char *arch, char *err, size_t errlen) {
    json_object_set_new(cfg, "norm_topk_prob", json_true());
    return xi_gguf_config_int(cfg, g, arch, "expert_count", "num_experts", 1, err, errlen) ||
                   xi_gguf_config_int(cfg, g, arch, "expert_used_count", "num_experts_per_tok", 1,
                                      err, errlen) ||
                   xi_gguf_config_int(cfg, g, arch, "expert_feed_forward_length",
                                      "moe_intermediate_size", 1, err, errlen)
               ? -1
               : 0;
}

const xi_arch_family xi_arch_qwen3_moe = {"qwen3_moe", hf, gguf, hf, gguf_config, parse,
                                          xi_llama_names};
