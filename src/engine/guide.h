/* engine/guide: structured outputs — the output held to a grammar (sample/grammar: JSON
 * Schema, regex, choice, GBNF, any JSON object).
 *
 * Before each draw of a guided sequence the engine builds a mask over the vocabulary: a token
 * is allowed when its bytes (xi_token_bytes, exact for byte-level BPE and SentencePiece alike)
 * keep the sequence's grammar state a prefix of the language. The end tokens (EOS and the stop
 * ids) are allowed once the text is complete, and only they when nothing may follow (JSON
 * kinds pad with whitespace instead while min_tokens holds the end back or ignore_eos leaves
 * none). Special tokens are never allowed otherwise. The mask depends on the sequence's own
 * output alone, so batching cannot change it. Engine thread only. */
#ifndef XI_GUIDE_H
#define XI_GUIDE_H

#include <stddef.h>
#include <stdint.h>

#include "sample/grammar.h"
#include "tokenizer/tokenizer.h"

/* Every token's bytes, built once, the first time a guided request arrives. */
typedef struct xi_guide_vocab {
    int vocab;
    uint32_t *off;          /* [vocab + 1]: token i is bytes[off[i], off[i+1]) */
    char *bytes;
    uint8_t *usable;        /* [vocab]: a normal token with bytes */
    uint8_t *allow;         /* [vocab]: the last mask built */
    xi_token_table table;   /* the same tokens sorted for the grammar mask */
} xi_guide_vocab;

/* Build the table for a model vocab of `vocab` rows (ids past the tokenizer's are unusable).
 * 0, or -1 with err set. */
int xi_guide_vocab_init(xi_guide_vocab *g, const xi_tokenizer *tok, int vocab, char *err,
                        size_t errlen);
void xi_guide_vocab_free(xi_guide_vocab *g);

/* The mask (g->allow) for a sequence in state s of grammar gr. end [n_end] are its end
 * tokens; want_more says min_tokens still holds them back; pad_ws lets whitespace follow a
 * complete text (JSON). Returns the number of tokens allowed; when nothing could continue,
 * the end tokens are allowed so the sequence stops. */
int xi_guide_mask(xi_guide_vocab *g, xi_grammar *gr, const xi_grammar_state *s,
                  const int32_t *end, int n_end, int want_more, int pad_ws);
/* Compiled grammars shared by requests that give the same source, so a schema's token-mask
 * cache (sample/grammar_mask.c) outlives the request that built it: every request after the
 * first with the same schema is masked warm. Least recently used entries nobody holds go
 * first. */
#define XI_GUIDE_CACHE 16
#define XI_GUIDE_CACHE_MAX_BYTES (256u << 20) /* a cached grammar grown past this is rebuilt */
typedef struct xi_guide_cached {
    int kind;
    char *src;              /* owned */
    xi_grammar *g;          /* owned */
    int refs;               /* groups holding it */
    uint64_t used;
} xi_guide_cached;
typedef struct xi_guide_cache {
    xi_guide_cached e[XI_GUIDE_CACHE];
    int n;
    uint64_t tick;
} xi_guide_cache;

/* The grammar for (kind, src): a cached twin of fresh (fresh is then freed) or fresh itself,
 * now cached. *ref is the counter to decrement when done, or NULL when fresh could not be
 * cached (the caller keeps owning it). */
xi_grammar *xi_guide_cache_share(xi_guide_cache *c, xi_grammar *fresh, int kind, const char *src, int **ref);
void xi_guide_cache_free(xi_guide_cache *c);

/* Advance s by a drawn token (end tokens, special tokens and bytes the grammar refuses leave
 * it as it is). */
void xi_guide_advance(const xi_guide_vocab *g, xi_grammar *gr, xi_grammar_state *s, int32_t token);

#endif
