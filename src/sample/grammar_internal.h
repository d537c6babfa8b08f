/* sample/grammar internals: the rule builder the compilers share (grammar_build.c), the
 * flattened grammar and its frame table (grammar.c), the mask cache (grammar_mask.c). */
#ifndef XI_GRAMMAR_INTERNAL_H
#define XI_GRAMMAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sample/grammar.h"

/* An element: a byte set (index into sets) or a reference to a rule. */
#define XG_REF 0x80000000u
#define XG_END 0xffffffffu

/* A sequence under construction. */
typedef struct xg_seq {
    uint32_t *e;
    int n, cap;
} xg_seq;

typedef struct xg_rule {
    xg_seq *alts;       /* [n_alts] */
    int n_alts, cap_alts;
    char *name;         /* GBNF name or NULL */
    int defined;
} xg_rule;

typedef struct xg_build {
    xg_rule *rules;
    int n_rules, cap_rules;
    uint8_t (*sets)[32]; /* [n_sets] 256-bit byte sets */
    int n_sets, cap_sets;
    char *err;
    size_t errlen;
    int failed;         /* an error (or OOM) was recorded: later calls do nothing */
} xg_build;

void xg_init(xg_build *b, char *err, size_t errlen);
void xg_free(xg_build *b);
/* Record an error (the first one wins). Returns -1. */
int xg_fail(xg_build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int xg_rule_new(xg_build *b);
int xg_add_alt(xg_build *b, int rule, const xg_seq *s);
void xg_seq_free(xg_seq *s);
void xg_seq_push(xg_build *b, xg_seq *s, uint32_t e);
void xg_seq_append(xg_build *b, xg_seq *s, const xg_seq *t);
void xg_seq_set(xg_build *b, xg_seq *s, const uint8_t set[32]);
void xg_seq_byte(xg_build *b, xg_seq *s, uint8_t c);
void xg_seq_lit(xg_build *b, xg_seq *s, const char *lit, size_t n);
static inline void xg_seq_ref(xg_build *b, xg_seq *s, int rule) {
    xg_seq_push(b, s, XG_REF | (uint32_t)rule);
}
/* A rule for x{min,max} (max < 0: unbounded). x's alternatives are inlined into the loop, so
 * a repetition keeps one stack frame however long it runs. */
int xg_rep(xg_build *b, const xg_seq *x, int min, int max);
/* A rule with the single alternative s. */
int xg_wrap(xg_build *b, const xg_seq *s);

/* Code point ranges [lo, hi] (inclusive), as a rule of their UTF-8 byte sequences. */
typedef struct xg_cp_range {
    uint32_t lo, hi;
} xg_cp_range;
/* negate: the complement within U+0000..U+10FFFF (surrogates never match). */
int xg_cp_class(xg_build *b, const xg_cp_range *r, int n, int negate);
/* The UTF-8 code point at src[*i] (advancing *i), or -1 for bad or cut-off UTF-8. */
int64_t xg_utf8_next(const char *src, size_t n, size_t *i);
/* Append c as UTF-8. */
void xg_seq_cp(xg_build *b, xg_seq *s, uint32_t c);

/* Compilers into the builder: each returns the root rule or -1 (b->err set). */
int xg_compile_regex(xg_build *b, const char *src, size_t len, int json_string);
int xg_compile_gbnf(xg_build *b, const char *src, size_t len);
int xg_compile_json_schema(xg_build *b, const char *src, size_t len);
int xg_compile_json_object(xg_build *b);
int xg_compile_choice(xg_build *b, const char *src, size_t len);

/* ---- the compiled grammar ---- */

/* An open-addressing map of non-zero 64-bit keys (grammar_dfa.c). */
typedef struct xg_map {
    uint64_t *key, *val;
    int cap, used;
} xg_map;
/* 1 with *val when key is there, else 0. */
int xg_map_get(const xg_map *m, uint64_t key, uint64_t *val);
int xg_map_put(xg_map *m, uint64_t key, uint64_t val); /* -1 on OOM */
void xg_map_free(xg_map *m);

typedef struct xg_frame {
    uint32_t pos;       /* element index */
    uint32_t parent;    /* frame returned to; 0: the bottom (complete), 1: an unknown context */
    uint32_t depth;
} xg_frame;

typedef struct xg_cache_entry {
    uint64_t *accept;   /* [words] tokens accepted whatever lies below */
    int32_t *check;     /* [n_check] tokens to check against the full stack, as indices
                           into the token table's byte order */
    int n_check;
} xg_cache_entry;

struct xi_grammar {
    uint32_t *elems;    /* [n_elems]: per alternative its elements then XG_END */
    int n_elems;
    uint32_t *alt_start; /* [n_alt_starts] element index of each alternative */
    uint32_t *rule_alts; /* [n_rules + 1]: rule r's alternatives are alt_start[rule_alts[r]..] */
    int n_rules, root;
    uint8_t (*sets)[32];
    int n_sets;
    /* interned frames: id -> frame, (pos, parent) -> id */
    xg_frame *frames;
    int n_frames, cap_frames;
    uint32_t *hash;     /* [hash_cap] frame ids, 0 empty */
    int hash_cap;
    /* scratch for closures */
    /* (pos << 32 | parent) seen in this closure: an open-addressing set whose slots count
     * only when stamped with the current generation, so a new closure clears it in O(1) */
    uint64_t *visit;        /* [visit_cap] keys */
    uint32_t *visit_gen;    /* [visit_cap] the generation each slot was written in */
    uint32_t gen;
    int n_visit, visit_cap; /* n_visit: keys of this generation */
    int too_complex;        /* this generation's closures passed XG_MAX_VISITS pairs */
    uint64_t *cstack;       /* the closure's pending (pos << 32 | parent) */
    int cstack_cap;
    /* mask cache, per element position (built for one token table) */
    xg_cache_entry **cache; /* [n_elems] */
    const xi_token_table *cache_for;
    uint32_t *walk;     /* [max_len + 1] per-depth interned state sets of the mask walk */
    int walk_depth;
    /* interned sets of stack ids and the steps between them (grammar_dfa.c) */
    uint32_t *dset_ids;
    size_t n_dset_ids, cap_dset_ids;
    uint32_t *dset_off, *dset_n; /* [n_dsets] set s is dset_ids[dset_off[s]..][dset_n[s]] */
    uint8_t *dset_flags;         /* [n_dsets] XG_SET_* */
    int n_dsets, cap_dsets;
    uint32_t *dset_hash;
    int dset_hash_cap;
    uint32_t **drow;             /* [cap_dsets] per set, [256] the set each byte leads to
                                    (XG_UNSEEN until computed), allocated on first use */
    uint32_t *dscratch;
    int cap_dscratch;
    /* per stack id: its check tokens that the full stack accepts (a context's answer) */
    xg_map res;         /* stack id + 1 -> index into res_list */
    int32_t **res_list; /* [n_res] the accepted tokens, owned */
    int *res_n;
    int n_res, cap_res;
    int32_t *res_buf;   /* scratch: [vocab] */
    uint64_t *acc;      /* [words] the mask being built */
};

/* Advance the id set in[n_in] by byte c into out (sorted, unique). Returns the count or -1. */
int xg_step(xi_grammar *g, const uint32_t *in, int n_in, uint8_t c, uint32_t **out, int *cap);
/* The stack id for frame (pos, parent), interned; XG_FAIL on OOM or past the depth limit. */
#define XG_FAIL 0xffffffffu
uint32_t xg_intern(xi_grammar *g, uint32_t pos, uint32_t parent);

/* Interned sets (grammar_dfa.c): 0 is the empty set; XG_FAIL on OOM. */
#define XG_SET_LIVE 1       /* some stack can take another byte */
#define XG_SET_CTX 2        /* holds the "unknown context" mark */
#define XG_SET_NONEMPTY 4
uint32_t xg_dfa_set(xi_grammar *g, const uint32_t *ids, int n);
uint32_t xg_dfa_step(xi_grammar *g, uint32_t set, uint8_t c);
void xg_dfa_free(xi_grammar *g);
/* The mask's caches and scratch (grammar_mask.c). */
void xg_mask_free(xi_grammar *g);

#endif
