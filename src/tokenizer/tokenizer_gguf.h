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

/* Writing (tokenizer_gguf_write.c): t as the tokenizer.ggml.* keys and tokenizer.chat_template
 * llama.cpp's converter writes, for byte-level BPE ("gpt2") and BPE with byte fallback
 * ("llama", scores from the merge ranks); anything else is refused. -1 with err. */
typedef struct xi_tokenizer_gguf_opts {
    const char *pre;       /* byte-level BPE: tokenizer.ggml.pre ("qwen2", "llama-bpe") */
    int n_vocab;           /* the model's embedding rows, tokens past t's are "[PADi]" (unused);
                              0: t's vocabulary size */
    int32_t bos, eos, pad; /* ids written; bos / eos -1: t's own (none: not written); pad -1: none */
} xi_tokenizer_gguf_opts;
int xi_tokenizer_write_gguf(xi_gguf_writer *w, const xi_tokenizer *t,
                            const xi_tokenizer_gguf_opts *o, char *err, size_t errlen);

#endif
