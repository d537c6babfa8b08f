/* sample/grammar: one byte-level pushdown grammar behind every kind of structured output.
 *
 * JSON Schema, regular expressions, GBNF (llama.cpp's grammar format), choice lists and
 * json_object all compile to the same rules (grammar_json.c, grammar_regex.c, grammar_gbnf.c);
 * a rule is a list of alternatives, each a sequence of byte sets and references to rules.
 * Matching keeps a set of stacks, as llama.cpp's recogniser does, but over bytes, so a token
 * is checked by its exact bytes (xi_token_bytes) whatever the tokenizer. Stacks are interned
 * frames (position, return frame), so a stack is one 32-bit id and a state a small sorted set.
 * The per-step token mask (grammar_mask.c) caches, per grammar position, the tokens accepted
 * whatever lies below on the stack and the few that need the full stack checked.
 *
 * Limits keep a guided model from wandering: stacks at most XI_GRAMMAR_MAX_DEPTH frames, JSON
 * whitespace and number digits bounded by the compilers. A grammar and its states belong to one
 * thread at a time (the engine thread once submitted); compiling is pure. */
#ifndef XI_GRAMMAR_H
#define XI_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#define XI_GRAMMAR_MAX_DEPTH 256

typedef enum xi_grammar_kind {
    XI_GRAMMAR_JSON_OBJECT = 1, /* any JSON object (response_format json_object) */
    XI_GRAMMAR_JSON_SCHEMA,     /* src: a JSON Schema document */
    XI_GRAMMAR_REGEX,           /* src: a regular expression (whole output) */
    XI_GRAMMAR_CHOICE,          /* src: a JSON array of strings, the output is one of them */
    XI_GRAMMAR_GBNF,            /* src: llama.cpp GBNF with a `root` rule */
} xi_grammar_kind;

typedef struct xi_grammar xi_grammar;

/* Compile; NULL with err set ("json_schema: unsupported keyword 'not'", "regex: ... at 4"). */
xi_grammar *xi_grammar_compile(xi_grammar_kind kind, const char *src, size_t len, char *err,
                               size_t errlen);
void xi_grammar_free(xi_grammar *g);

/* A matching state: the set of live stacks (0 is the "complete" mark). Copy with
 * xi_grammar_state_copy; states of one grammar share its frame table. */
typedef struct xi_grammar_state {
    uint32_t *ids;  /* [n] sorted stack ids, owned */
    int n, cap;
} xi_grammar_state;

/* The start state. 0, or -1 on OOM. */
int xi_grammar_state_init(xi_grammar *g, xi_grammar_state *s);
int xi_grammar_state_copy(xi_grammar_state *dst, const xi_grammar_state *src);
void xi_grammar_state_free(xi_grammar_state *s);
/* Feed bytes: 0 when the text so far is still a prefix of the language (s advanced), -1 when
 * not (s unchanged). */
int xi_grammar_feed(xi_grammar *g, xi_grammar_state *s, const char *bytes, size_t n);
/* 1 when the text so far is a complete sentence. */
int xi_grammar_done(const xi_grammar_state *s);
/* 1 when some byte could still follow. */
int xi_grammar_can_continue(const xi_grammar_state *s);

/* Bytes a grammar's tables hold now (frames, sets, step rows, mask caches): they grow as
 * more of the language is visited, so a long-lived shared grammar is dropped past a limit. */
size_t xi_grammar_memory(const xi_grammar *g);

/* Every token's bytes, sorted for the mask's shared-prefix walk. Built once per vocabulary. */
typedef struct xi_token_table {
    int vocab;
    const uint32_t *off;    /* [vocab + 1] borrowed: token i is bytes[off[i], off[i+1]) */
    const char *bytes;      /* borrowed */
    const uint8_t *usable;  /* [vocab] borrowed: a normal token with bytes */
    int32_t *order;         /* [n_order] usable tokens sorted by bytes, owned */
    uint16_t *lcp;          /* [n_order] common prefix with the previous one, owned */
    char *s_bytes;          /* the tokens' bytes again, in that order (the walks stream them) */
    uint32_t *s_off;        /* [n_order + 1]: order[i] is s_bytes[s_off[i], s_off[i+1]) */
    int n_order;
    int max_len;
} xi_token_table;

int xi_token_table_init(xi_token_table *t, int vocab, const uint32_t *off, const char *bytes,
                        const uint8_t *usable);
void xi_token_table_free(xi_token_table *t);

/* allow[i] = 1 for each usable token whose bytes keep s a prefix of the language (end tokens
 * are the caller's: see xi_grammar_done). Returns the count, or -1 on OOM. */
int xi_grammar_mask(xi_grammar *g, const xi_grammar_state *s, const xi_token_table *t,
                    uint8_t *allow);

#endif
