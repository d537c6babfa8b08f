/* model/arch/registry: architectures[0] -> family, and the Llama lineage's tensor names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/config.h"

static const xi_arch_family *const families[] = {&xi_arch_llama, &xi_arch_qwen3,
                                                  &xi_arch_qwen3_moe};

const xi_arch_family *xi_arch_find(const char *architecture) {
    for (size_t f = 0; f < XI_ARRAY_LEN(families); f++)
        for (const char *const *a = families[f]->hf_archs; *a; a++)
            if (!strcmp(*a, architecture)) return families[f];
    return NULL;
}

const xi_arch_family *xi_arch_find_gguf(const char *gguf_arch, const char **hf) {
    for (size_t f = 0; f < XI_ARRAY_LEN(families); f++)
        for (int i = 0; families[f]->gguf_archs[i]; i++)
            if (!strcmp(families[f]->gguf_archs[i], gguf_arch)) {
                *hf = families[f]->gguf_as_hf[i];
                return families[f];
            }
    return NULL;
}

void xi_arch_known(char *buf, size_t n) {
    size_t o = 0;
    if (n) buf[0] = 0;
    for (size_t f = 0; f < XI_ARRAY_LEN(families); f++)
        for (const char *const *a = families[f]->hf_archs; *a && o < n; a++)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", *a);
}

int xi_arch_tensor_name(const xi_arch_family *f, xi_naming naming, xi_tensor_role role, int layer,
                        int expert, char *buf, size_t n) {
    for (const xi_tensor_name *t = f->names; t->role != XI_T_COUNT; t++) {
        if (t->role != role) continue;
        const char *fmt = naming == XI_NAMES_GGUF ? t->gguf : t->hf;
        int len = snprintf(buf, n, fmt, layer, expert);
        return len < 0 || (size_t)len >= n ? -1 : 0;
    }
    return -1;
}

/* Hugging Face modules and llama.cpp's GGUF names. */
const xi_tensor_name xi_llama_names[] = {
    {XI_T_TOKEN_EMBD, "model.embed_tokens", "token_embd"},
    {XI_T_OUTPUT_NORM, "model.norm", "output_norm"},
    {XI_T_OUTPUT, "lm_head", "output"},
    {XI_T_ATTN_NORM, "model.layers.%d.input_layernorm", "blk.%d.attn_norm"},
    {XI_T_ATTN_Q, "model.layers.%d.self_attn.q_proj", "blk.%d.attn_q"},
    {XI_T_ATTN_K, "model.layers.%d.self_attn.k_proj", "blk.%d.attn_k"},
    {XI_T_ATTN_V, "model.layers.%d.self_attn.v_proj", "blk.%d.attn_v"},
    {XI_T_ATTN_O, "model.layers.%d.self_attn.o_proj", "blk.%d.attn_output"},
    {XI_T_ATTN_Q_NORM, "model.layers.%d.self_attn.q_norm", "blk.%d.attn_q_norm"},
    {XI_T_ATTN_K_NORM, "model.layers.%d.self_attn.k_norm", "blk.%d.attn_k_norm"},
    {XI_T_FFN_NORM, "model.layers.%d.post_attention_layernorm", "blk.%d.ffn_norm"},
    {XI_T_FFN_GATE, "model.layers.%d.mlp.gate_proj", "blk.%d.ffn_gate"},
    {XI_T_FFN_UP, "model.layers.%d.mlp.up_proj", "blk.%d.ffn_up"},
    {XI_T_FFN_DOWN, "model.layers.%d.mlp.down_proj", "blk.%d.ffn_down"},
    {XI_T_FFN_ROUTER, "model.layers.%d.mlp.gate", "blk.%d.ffn_gate_inp"},
    {XI_T_EXP_GATE, "model.layers.%d.mlp.experts.%d.gate_proj", "blk.%d.ffn_gate_exps"},
    {XI_T_EXP_UP, "model.layers.%d.mlp.experts.%d.up_proj", "blk.%d.ffn_up_exps"},
    {XI_T_EXP_DOWN, "model.layers.%d.mlp.experts.%d.down_proj", "blk.%d.ffn_down_exps"},
    {XI_T_COUNT, NULL, NULL},
};

int xi_arch_dense_layers(xi_config *c, int qk_norm, xi_bias_kind bias, char *err, size_t errlen) {
    free(c->layer);
    c->layer = calloc((size_t)c->n_layers, sizeof *c->layer);
    if (!c->layer) return xi_errf(err, errlen, "out of memory for %d layers", c->n_layers);
    for (int l = 0; l < c->n_layers; l++)
        c->layer[l] = (xi_layer_spec){.attn = XI_ATTN_FULL, .cache = XI_CACHE_KV,
                                      .norm = XI_NORM_PRE, .qk_norm = qk_norm, .qkv_bias = bias,
                                      .mlp = XI_MLP_DENSE, .ffn = c->intermediate_size};
    return 0;
}
