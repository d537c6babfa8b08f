/* sample/grammar_dfa: sets of stack ids interned to one id each, with memoised steps between
 * them: the lazy subset construction the mask walks run on. A walk step is then one array
 * load (a 256-entry row per set) instead of a closure per stack, and the tokens of a
 * vocabulary revisit the same few sets over and over. Set 0 is the empty set. Also the small
 * map the per-stack caches use. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sample/grammar_internal.h"

void xg_dfa_free(xi_grammar *g) {
    free(g->dset_ids);
    free(g->dset_off);
    free(g->dset_n);
    free(g->dset_flags);
    free(g->dset_hash);
    for (int i = 0; g->drow && i < g->n_dsets; i++) free(g->drow[i]);
    free(g->drow);
    free(g->dscratch);
}

static uint32_t set_hash(const uint32_t *ids, int n) {
    return (uint32_t)xi_hash64(ids, (size_t)n * sizeof *ids);
}

static int hash_insert(uint32_t *h, int cap, uint32_t hv, uint32_t id) {
    uint32_t i = hv & (uint32_t)(cap - 1);
    while (h[i]) i = (i + 1) & (uint32_t)(cap - 1);
    h[i] = id;
    return 0;
}

static int grow_sets(xi_grammar *g) {
    if (g->n_dsets < g->cap_dsets) return 0;
    const int cap = g->cap_dsets ? g->cap_dsets * 2 : 1024;
    uint32_t *off = realloc(g->dset_off, (size_t)cap * sizeof *off);
    if (!off) return -1;
    g->dset_off = off;
    uint32_t *n = realloc(g->dset_n, (size_t)cap * sizeof *n);
    if (!n) return -1;
    g->dset_n = n;
    uint8_t *f = realloc(g->dset_flags, (size_t)cap);
    if (!f) return -1;
    g->dset_flags = f;
    uint32_t **rows = realloc(g->drow, (size_t)cap * sizeof *rows);
    if (!rows) return -1;
    memset(rows + g->cap_dsets, 0, (size_t)(cap - g->cap_dsets) * sizeof *rows);
    g->drow = rows;
    /* the hash keeps half its slots free */
    uint32_t *h = calloc((size_t)cap * 2, sizeof *h);
    if (!h) return -1;
    for (int s = 1; s < g->n_dsets; s++) hash_insert(h, cap * 2, set_hash(g->dset_ids + g->dset_off[s], (int)g->dset_n[s]), (uint32_t)s);
    free(g->dset_hash);
    g->dset_hash = h;
    g->dset_hash_cap = cap * 2;
    g->cap_dsets = cap;
    return 0;
}

uint32_t xg_dfa_set(xi_grammar *g, const uint32_t *ids, int n) {
    if (!g->n_dsets) { /* set 0: the empty set */
        if (grow_sets(g)) return XG_FAIL;
        g->dset_off[0] = g->dset_n[0] = 0;
        g->dset_flags[0] = 0;
        g->n_dsets = 1;
    }
    if (!n) return 0;
    const uint32_t hv = set_hash(ids, n);
    for (uint32_t i = hv & (uint32_t)(g->dset_hash_cap - 1), s; (s = g->dset_hash[i]); i = (i + 1) & (uint32_t)(g->dset_hash_cap - 1))
        if (g->dset_n[s] == (uint32_t)n && !memcmp(g->dset_ids + g->dset_off[s], ids, (size_t)n * sizeof *ids)) return s;
    if (grow_sets(g)) return XG_FAIL;
    if (g->n_dset_ids + (size_t)n > g->cap_dset_ids) {
        size_t cap = g->cap_dset_ids ? g->cap_dset_ids * 2 : 16384;
        while (cap < g->n_dset_ids + (size_t)n) cap *= 2;
        uint32_t *v = realloc(g->dset_ids, cap * sizeof *v);
        if (!v) return XG_FAIL;
        g->dset_ids = v;
        g->cap_dset_ids = cap;
    }
    const uint32_t s = (uint32_t)g->n_dsets++;
    memcpy(g->dset_ids + g->n_dset_ids, ids, (size_t)n * sizeof *ids);
    g->dset_off[s] = (uint32_t)g->n_dset_ids;
    g->dset_n[s] = (uint32_t)n;
    g->n_dset_ids += (size_t)n;
    /* ids are sorted: markers 0 (complete) and 1 (unknown context) come first */
    uint8_t f = XG_SET_NONEMPTY;
    if (ids[n - 1] > 1) f |= XG_SET_LIVE;
    for (int i = 0; i < n && ids[i] <= 1; i++)
        if (ids[i] == 1) f |= XG_SET_CTX;
    g->dset_flags[s] = f;
    hash_insert(g->dset_hash, g->dset_hash_cap, hv, s);
    return s;
}

static uint32_t map_slot(const xg_map *m, uint64_t key) {
    const uint32_t mask = (uint32_t)m->cap - 1;
    uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40) & mask;
    while (m->key[h] && m->key[h] != key) h = (h + 1) & mask;
    return h;
}

int xg_map_get(const xg_map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    const uint32_t h = map_slot(m, key);
    if (!m->key[h]) return 0;
    *val = m->val[h];
    return 1;
}

int xg_map_put(xg_map *m, uint64_t key, uint64_t val) {
    if (2 * (m->used + 1) > m->cap) {
        xg_map b = {calloc((size_t)(m->cap ? m->cap * 2 : 4096), sizeof(uint64_t)),
                    malloc((size_t)(m->cap ? m->cap * 2 : 4096) * sizeof(uint64_t)), m->cap ? m->cap * 2 : 4096, m->used};
        if (!b.key || !b.val) {
            free(b.key);
            free(b.val);
            return -1;
        }
        for (int i = 0; i < m->cap; i++)
            if (m->key[i]) {
                const uint32_t h = map_slot(&b, m->key[i]);
                b.key[h] = m->key[i];
                b.val[h] = m->val[i];
            }
        xg_map_free(m);
        *m = b;
    }
    const uint32_t h = map_slot(m, key);
    if (!m->key[h]) m->used++;
    m->key[h] = key;
    m->val[h] = val;
    return 0;
}

void xg_map_free(xg_map *m) {
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

#define XG_UNSEEN 0xfffffffeu

uint32_t xg_dfa_step(xi_grammar *g, uint32_t set, uint8_t c) {
    if (!set) return 0;
    uint32_t *row = g->drow[set];
    if (row && row[c] != XG_UNSEEN) return row[c];
    if (!row) {
        if (!(row = malloc(256 * sizeof *row))) return XG_FAIL;
        for (int i = 0; i < 256; i++) row[i] = XG_UNSEEN;
        g->drow[set] = row;
    }
    const int n = xg_step(g, g->dset_ids + g->dset_off[set], (int)g->dset_n[set], c, &g->dscratch, &g->cap_dscratch);
    if (n < 0) return XG_FAIL;
    const uint32_t r = xg_dfa_set(g, g->dscratch, n);
    if (r == XG_FAIL) return XG_FAIL;
    g->drow[set][c] = r; /* xg_dfa_set may have moved drow, not the row */
    return r;
}
