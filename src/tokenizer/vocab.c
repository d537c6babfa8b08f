/* tokenizer vocab: string -> id and (left, right) -> merge hash maps, built once at load and
 * read-only afterwards, so lookups need no lock. */
#define XI_TOKENIZER_INTERNAL
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* ---- string -> id ---- */

int xi_strmap_init(xi_strmap *m, char *const *keys, const uint32_t *lens, int n) {
    uint32_t cap = 16;
    while (cap < (uint32_t)n * 2u) cap *= 2; /* load factor <= 0.5 keeps probes short */
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return -1;
    m->cap = cap;
    m->keys = keys;
    m->key_lens = lens;
    for (int id = 0; id < n; id++) {
        if (!keys[id]) continue;
        uint32_t h = (uint32_t)xi_hash64(keys[id], lens[id]) & (cap - 1);
        for (;; h = (h + 1) & (cap - 1)) {
            uint32_t s = m->slots[h];
            if (!s) {
                m->slots[h] = (uint32_t)id + 1;
                break;
            }
            /* A duplicate string keeps its first (lowest) id. */
            if (lens[s - 1] == lens[id] && !memcmp(keys[s - 1], keys[id], lens[id])) break;
        }
    }
    return 0;
}

int32_t xi_strmap_get(const xi_strmap *m, const char *s, size_t len) {
    if (!m->slots) return -1;
    uint32_t h = (uint32_t)xi_hash64(s, len) & (m->cap - 1);
    for (;; h = (h + 1) & (m->cap - 1)) {
        uint32_t v = m->slots[h];
        if (!v) return -1;
        if (m->key_lens[v - 1] == len && !memcmp(m->keys[v - 1], s, len)) return (int32_t)v - 1;
    }
}

void xi_strmap_free(xi_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* ---- merges ---- */

static uint32_t merge_hash(uint64_t key, uint32_t cap) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key & (cap - 1);
}

int xi_merges_init(xi_tokenizer *t, uint32_t n) {
    uint32_t cap = 16;
    while (cap < n * 2u) cap *= 2;
    t->merges = malloc((size_t)cap * sizeof *t->merges);
    if (!t->merges) return -1;
    for (uint32_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merge_cap = cap;
    return 0;
}

/* A pair listed twice keeps its first (best) rank, as the Hugging Face loader does. */
int xi_merges_add(xi_tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t id) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t h = merge_hash(key, t->merge_cap);
    for (uint32_t probes = 0; probes < t->merge_cap; probes++, h = (h + 1) & (t->merge_cap - 1)) {
        xi_merge_slot *s = &t->merges[h];
        if (s->key == key) return 0;
        if (s->key == UINT64_MAX) {
            s->key = key;
            s->rank = rank;
            s->id = id;
            return 0;
        }
    }
    return -1;
}

const xi_merge_slot *xi_merges_get(const xi_tokenizer *t, int32_t left, int32_t right) {
    if (!t->merges) return NULL;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t h = merge_hash(key, t->merge_cap);
    for (;; h = (h + 1) & (t->merge_cap - 1)) {
        const xi_merge_slot *s = &t->merges[h];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}
