/* model/gguf_export: a GGUF file of arch llama or qwen2 written out as a Hugging Face folder
 * (config.json + model.safetensors with every weight dequantized to dtype F32, BF16 or F16;
 * norms F32): the safetensors path's view of a GGUF file, which the tests hold against the
 * GGUF loader (gguf_model.c, which binds the tensors as stored).
 * Llama's q/k row interleave is undone; types without a dequantizer, 3-D tensors, RoPE
 * scaling and Llama 3's rope_freqs (which config.json cannot express) are refused by name.
 * The error names the file and the key or tensor. */
#ifndef XI_GGUF_EXPORT_H
#define XI_GGUF_EXPORT_H

#include <stddef.h>

#include "tensor/dtype.h"

int xi_gguf_export_hf(const char *gguf_path, const char *out_dir, xi_dtype dtype, char *err,
                      size_t errlen);

#endif
