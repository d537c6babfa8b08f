/* model/arch/llama: LlamaForCausalLM (Llama 2/3.x, TinyLlama), MistralForCausalLM without
 * sliding windows, and Qwen2ForCausalLM (Qwen2, Qwen2.5: the same body with q/k/v bias). */
#include <string.h>

#include "model/config.h"

static int parse(xi_config *c, json_t *j, const char *file, char *err, size_t errlen) {
    (void)file;
    int qwen2 = !strcmp(c->architecture, "Qwen2ForCausalLM");
    c->attention_bias = qwen2 || json_is_true(json_object_get(j, "attention_bias"));
    return xi_arch_dense_layers(c, 0, c->attention_bias ? XI_BIAS_REQUIRED : XI_BIAS_OPTIONAL,
                                err, errlen);
}

static const char *const hf[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", NULL};
static const char *const gguf[] = {"llama", "qwen2", NULL};
static const char *const gguf_hf[] = {"LlamaForCausalLM", "Qwen2ForCausalLM"};

const xi_arch_family xi_arch_llama = {"llama", hf, gguf, gguf_hf, NULL, parse, xi_llama_names};
