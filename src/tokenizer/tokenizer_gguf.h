/* tokenizer/tokenizer_gguf: the tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*):
 * model "gpt2" (byte-level BPE with merges; pre-tokenizer by tokenizer.ggml.pre: qwen2,
 * llama-bpe / llama3, gpt-2 / default) and "llama" (SentencePiece with scores and byte
 * fallback); token types, bos/eos/add_bos/add_eos and tokenizer.chat_template. Other models
 * and pre-tokenizers are refused by name. */
#ifndef XI_TOKENIZER_GGUF_H
#define XI_TOKENIZER_GGUF_H

#include "model/gguf.h"
#include "tokenizer/tokenizer.h"

xi_tokenizer *xi_tokenizer_load_gguf(const xi_gguf *g, char *err, size_t errlen);
/* A model's tokenizer: from a GGUF file's metadata, or a folder's tokenizer files. */
xi_tokenizer *xi_tokenizer_load_model(const char *path, char *err, size_t errlen);

#endif
