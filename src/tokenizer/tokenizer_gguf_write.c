/* tokenizer/tokenizer_gguf_write: a loaded tokenizer as GGUF metadata, the keys llama.cpp's
 * converter writes (see tokenizer_gguf.h). The inverse of tokenizer_gguf.c's reading:
 *
 *   byte-level BPE       tokenizer.ggml.model "gpt2", tokens, token_type, merges (rank order,
 *                        "left right" in byte-level text), pre (the caller names it)
 *   BPE, byte fallback   "llama" (SentencePiece): tokens, token_type, scores; a piece's score is
 *                        minus the rank of the first merge that makes it, so merging the
 *                        highest-scoring pair first replays the merge order; pieces no merge
 *                        makes score below every merge
 *
 * Token types: special added tokens CONTROL (the unknown token UNKNOWN), other added tokens
 * USER_DEFINED, <0xNN> byte pieces BYTE, rows past the vocabulary "[PADi]" UNUSED. */
#define XI_TOKENIZER_INTERNAL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_gguf.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static int cmp_rank(const void *pa, const void *pb) {
    const xi_merge_slot *a = pa, *b = pb;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* The merges in rank order (count in *n); NULL when out of memory. */
static xi_merge_slot *sorted_merges(const xi_tokenizer *t, uint32_t *n) {
    *n = 0;
    xi_merge_slot *m = malloc(((size_t)t->merge_cap + 1) * sizeof *m);
    if (!m) return NULL;
    for (uint32_t i = 0; t->merges && i < t->merge_cap; i++)
        if (t->merges[i].key != UINT64_MAX) m[(*n)++] = t->merges[i];
    qsort(m, *n, sizeof *m, cmp_rank);
    return m;
}

static int write_gpt2_merges(xi_gguf_writer *w, const xi_tokenizer *t, char *err, size_t errlen) {
    uint32_t n;
    xi_merge_slot *m = sorted_merges(t, &n);
    char **s = xi_calloc((size_t)n + 1, sizeof *s);
    int rc = m && s ? 0 : -1;
    for (uint32_t i = 0; !rc && i < n; i++) {
        int32_t l = (int32_t)(m[i].key >> 32), r = (int32_t)(uint32_t)m[i].key;
        size_t ll = t->token_lens[l], rl = t->token_lens[r];
        if (!(s[i] = malloc(ll + rl + 2))) rc = -1;
        else snprintf(s[i], ll + rl + 2, "%s %s", t->tokens[l], t->tokens[r]);
    }
    if (!rc) rc = xi_gguf_write_arr_str(w, "tokenizer.ggml.merges", n, (const char *const *)s, NULL);
    for (uint32_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
    free(m);
    return rc ? xi_errf(err, errlen, "out of memory") : 0;
}

static int write_spm_scores(xi_gguf_writer *w, const xi_tokenizer *t, int n, char *err,
                            size_t errlen) {
    uint32_t nm;
    xi_merge_slot *m = sorted_merges(t, &nm);
    float *score = malloc((size_t)n * sizeof *score);
    if (!m || !score) {
        free(m);
        free(score);
        return xi_errf(err, errlen, "out of memory");
    }
    for (int i = 0; i < n; i++) score[i] = -1e9f;
    for (uint32_t i = nm; i-- > 0;) score[m[i].id] = -(float)m[i].rank; /* the first rank wins */
    int rc = xi_gguf_write_arr(w, "tokenizer.ggml.scores", XI_GGUF_F32, (uint64_t)n, score);
    free(m);
    free(score);
    return rc ? xi_errf(err, errlen, "out of memory") : 0;
}

static int token_type(const xi_tokenizer *t, int32_t i) {
    if (i >= t->n_vocab || !t->tokens[i]) return TT_UNUSED;
    if (i == t->unk_id) return TT_UNKNOWN;
    if (t->special[i]) return TT_CONTROL;
    if (t->added[i]) return TT_USER_DEFINED;
    for (int b = 0; t->byte_fallback && b < 256; b++)
        if (t->byte_ids[b] == i) return TT_BYTE;
    return TT_NORMAL;
}

int xi_tokenizer_write_gguf(xi_gguf_writer *w, const xi_tokenizer *t,
                            const xi_tokenizer_gguf_opts *o, char *err, size_t errlen) {
    int spm = t->byte_fallback && !t->byte_level;
    if (!spm && !t->byte_level)
        return xi_errf(err, errlen, "GGUF tokenizer: only byte-level BPE (gpt2) and BPE with byte "
                                    "fallback (llama) can be written");
    if (!spm && (!o->pre || !*o->pre))
        return xi_errf(err, errlen, "GGUF tokenizer: a byte-level BPE needs a pre-tokenizer name");
    if (o->n_vocab && o->n_vocab < t->n_vocab)
        return xi_errf(err, errlen, "GGUF tokenizer: %d tokens do not fit %d embedding rows",
                       t->n_vocab, o->n_vocab);
    int n = o->n_vocab ? o->n_vocab : t->n_vocab, rc = -1;
    const char **toks = xi_calloc((size_t)n, sizeof *toks);
    char **pads = xi_calloc((size_t)n, sizeof *pads);
    int32_t *types = xi_calloc((size_t)n, sizeof *types);
    if (!toks || !pads || !types) goto out;
    for (int i = 0; i < n; i++) {
        types[i] = token_type(t, i);
        if (types[i] != TT_UNUSED) {
            toks[i] = t->tokens[i];
            continue;
        }
        /* llama.cpp's converter names the rows no token has [PADi] */
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%d]", i);
        if (!(pads[i] = xi_strdup(buf))) goto out;
        toks[i] = pads[i];
    }
    int32_t bos = o->bos >= 0 ? o->bos : t->bos_id, eos = o->eos >= 0 ? o->eos : t->eos_id;
    uint8_t add_bos = bos >= 0 && t->n_prefix > 0 && t->prefix_ids[0] == bos;
    rc = xi_gguf_write_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2") ||
         (!spm && xi_gguf_write_str(w, "tokenizer.ggml.pre", o->pre)) ||
         xi_gguf_write_arr_str(w, "tokenizer.ggml.tokens", (uint64_t)n, toks, NULL) ||
         xi_gguf_write_arr(w, "tokenizer.ggml.token_type", XI_GGUF_I32, (uint64_t)n, types) ||
         (bos >= 0 && xi_gguf_write_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos)) ||
         (eos >= 0 && xi_gguf_write_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos)) ||
         (o->pad >= 0 && xi_gguf_write_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)o->pad)) ||
         (spm && t->unk_id >= 0 &&
          xi_gguf_write_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)t->unk_id)) ||
         xi_gguf_write_scalar(w, "tokenizer.ggml.add_bos_token", XI_GGUF_BOOL, &add_bos) ||
         (t->chat_template && xi_gguf_write_str(w, "tokenizer.chat_template", t->chat_template))
             ? -1
             : 0;
    if (rc) goto out;
    rc = spm ? write_spm_scores(w, t, n, err, errlen) : write_gpt2_merges(w, t, err, errlen);
    goto done;
out:
    xi_errf(err, errlen, "out of memory");
done:
    for (int i = 0; pads && i < n; i++) free(pads[i]);
    free(pads);
    free(toks);
    free(types);
    return rc ? -1 : 0;
}
