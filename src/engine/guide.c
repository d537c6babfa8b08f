/* engine/guide: the structured-output mask (see guide.h). */
#include "engine/guide.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int xi_guide_vocab_init(xi_guide_vocab *g, const xi_tokenizer *tok, int vocab, char *err,
                        size_t errlen) {
    memset(g, 0, sizeof *g);
    const int nt = xi_tokenizer_vocab_size(tok);
    xi_buf all = {0};
    g->off = malloc(((size_t)vocab + 1) * sizeof *g->off);
    g->usable = calloc((size_t)vocab, 1);
    g->allow = calloc((size_t)vocab, 1);
    if (!g->off || !g->usable || !g->allow) goto oom;
    for (int i = 0; i < vocab; i++) {
        g->off[i] = (uint32_t)all.len;
        if (i >= nt || xi_tokenizer_is_special(tok, i)) continue;
        if (xi_token_bytes(tok, i, &all)) goto oom;
        g->usable[i] = all.len > g->off[i];
    }
    g->off[vocab] = (uint32_t)all.len;
    g->bytes = all.data;
    g->vocab = vocab;
    if (xi_token_table_init(&g->table, vocab, g->off, g->bytes, g->usable)) goto oom;
    return 0;
oom:
    if (!g->bytes) free(all.data);
    xi_guide_vocab_free(g);
    return xi_errf(err, errlen, "structured output: out of memory for the token table");
}

void xi_guide_vocab_free(xi_guide_vocab *g) {
    xi_token_table_free(&g->table);
    free(g->off);
    free(g->bytes);
    free(g->usable);
    free(g->allow);
    memset(g, 0, sizeof *g);
}

static int only_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') return 0;
    return n > 0;
}

int xi_guide_mask(xi_guide_vocab *g, xi_grammar *gr, const xi_grammar_state *s,
                  const int32_t *end, int n_end, int want_more, int pad_ws) {
    const int done = xi_grammar_done(s), more = xi_grammar_can_continue(s);
    int n = 0;
    if (more) n = xi_grammar_mask(gr, s, &g->table, g->allow);
    if (n <= 0) {
        memset(g->allow, 0, (size_t)g->vocab);
        n = 0;
    }
    if (done && !more && pad_ws && (want_more || !n_end)) {
        /* after a complete JSON text, whitespace while the end is held back or there is none
         * (ignore_eos), so the sequence always has a token to draw */
        for (int i = 0; i < g->vocab; i++)
            if (g->usable[i] && only_space(g->bytes + g->off[i], g->off[i + 1] - g->off[i])) {
                g->allow[i] = 1;
                n++;
            }
    }
    for (int k = 0; k < n_end; k++)
        if (end[k] >= 0 && end[k] < g->vocab && (done || !n) && !g->allow[end[k]]) {
            g->allow[end[k]] = 1;
            n++;
        }
    return n;
}

void xi_guide_advance(const xi_guide_vocab *g, xi_grammar *gr, xi_grammar_state *s, int32_t token) {
    if (token < 0 || token >= g->vocab || !g->usable[token]) return;
    xi_grammar_feed(gr, s, g->bytes + g->off[token], g->off[token + 1] - g->off[token]);
}

xi_grammar *xi_guide_cache_share(xi_guide_cache *c, xi_grammar *fresh, int kind, const char *src, int **ref) {
    *ref = NULL;
    c->tick++;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].kind == kind && !strcmp(c->e[i].src, src)) {
            if (!c->e[i].refs && xi_grammar_memory(c->e[i].g) > XI_GUIDE_CACHE_MAX_BYTES) {
                /* its tables grew with every answer: start again from the fresh copy */
                xi_grammar_free(c->e[i].g);
                c->e[i].g = fresh;
                fresh = NULL;
            }
            xi_grammar_free(fresh);
            c->e[i].refs++;
            c->e[i].used = c->tick;
            *ref = &c->e[i].refs;
            return c->e[i].g;
        }
    int slot = c->n < XI_GUIDE_CACHE ? c->n : -1;
    if (slot < 0) /* full: the least recently used one nobody holds */
        for (int i = 0; i < c->n; i++)
            if (!c->e[i].refs && (slot < 0 || c->e[i].used < c->e[slot].used)) slot = i;
    char *copy = slot >= 0 ? xi_strdup(src) : NULL;
    if (!copy) return fresh;
    if (slot < c->n) {
        xi_grammar_free(c->e[slot].g);
        free(c->e[slot].src);
    } else c->n++;
    c->e[slot] = (xi_guide_cached){kind, copy, fresh, 1, c->tick};
    *ref = &c->e[slot].refs;
    return fresh;
}

void xi_guide_cache_free(xi_guide_cache *c) {
    for (int i = 0; i < c->n; i++) {
        xi_grammar_free(c->e[i].g);
        free(c->e[i].src);
    }
    memset(c, 0, sizeof *c);
}
