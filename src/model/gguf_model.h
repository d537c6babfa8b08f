/* model/gguf_model: a GGUF file as a model source for the loader. Its config.json is built
 * from the metadata (common keys here, the family's own through its arch hook) and parsed by
 * the one config path; its tensors are looked up by the family's GGUF names and handed to the
 * loader in Hugging Face layout: ne = [in, out] becomes [out, in], one expert of a 3-D
 * ffn_*_exps tensor is "blk.L.ffn_gate_exps.E.weight", Llama's interleaved q/k rows are put
 * back in rotate-half order. Float tensors keep their dtype; quantized 2-D ones keep their
 * ggml block format as dtype GGML (rows as stored, xi_st_tensor.qtype names the type), which
 * the kernels compute directly; a quantized 1-D tensor is dequantized to f32. */
#ifndef XI_GGUF_MODEL_H
#define XI_GGUF_MODEL_H

#include <jansson.h>
#include <stddef.h>

#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"

/* For family hooks: metadata "<arch>.<key>" (an integer) as config.json's hf_key. -1 with err
 * when required and absent or not a positive integer below 2^31. */
int xi_gguf_config_int(json_t *cfg, const xi_gguf *g, const char *arch, const char *key,
                       const char *hf_key, int required, char *err, size_t errlen);

/* c from g's metadata; path names the file in errors. */
int xi_config_load_gguf(xi_config *c, const xi_gguf *g, const char *path, char *err,
                        size_t errlen);

/* The tensors of g as the loader sees them. transient: a converted tensor's memory lives until the next lookup only
 * (the loader copies each at once); else until xi_gguf_weights_free. */
typedef struct xi_gguf_weights xi_gguf_weights;
/* Checks every tensor's type first: a type without a dequantizer is refused by name. */
xi_gguf_weights *xi_gguf_weights_new(const xi_gguf *g, const xi_config *c, const char *path,
                                     int transient, char *err, size_t errlen);
void xi_gguf_weights_free(xi_gguf_weights *w);
/* A tensor by its GGUF name (with the expert suffix above), or NULL when absent or out of
 * memory. */
const xi_st_tensor *xi_gguf_weights_find(xi_gguf_weights *w, const char *name);

#endif
