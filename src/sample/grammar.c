/* sample/grammar: flattening the built rules, interned stack frames, and byte-by-byte
 * matching (see grammar.h). */
#include "sample/grammar.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sample/grammar_internal.h"

#define XG_MAX_FRAMES (1 << 22)
/* The (pos, parent) pairs one step's closures may visit. Nested optional repetitions make the
 * closure grow with the product of their counts (fuzzing found a regex of a hundred ?s repeated
 * {704} and {352} times whose start state took over 11 s); the JSON, choice and tool grammars
 * visit at most thousands. Past it the step fails, and a grammar whose start state passes it
 * is refused at compile with a message. */
#define XG_MAX_VISITS (1 << 20)

void xi_grammar_free(xi_grammar *g) {
    if (!g) return;
    xg_mask_free(g);
    xg_dfa_free(g);
    free(g->elems);
    free(g->alt_start);
    free(g->rule_alts);
    free(g->sets);
    free(g->frames);
    free(g->hash);
    free(g->visit);
    free(g->visit_gen);
    free(g->cstack);
    free(g);
}

static xi_grammar *flatten(xg_build *b, int root) {
    xi_grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    int n_elems = 0, n_alts = 0;
    for (int r = 0; r < b->n_rules; r++) {
        n_alts += b->rules[r].n_alts;
        for (int a = 0; a < b->rules[r].n_alts; a++) n_elems += b->rules[r].alts[a].n + 1;
    }
    g->elems = malloc(((size_t)n_elems + 1) * sizeof *g->elems);
    g->alt_start = malloc(((size_t)n_alts + 1) * sizeof *g->alt_start);
    g->rule_alts = malloc(((size_t)b->n_rules + 1) * sizeof *g->rule_alts);
    g->sets = malloc(((size_t)b->n_sets + 1) * sizeof *g->sets);
    g->frames = malloc(1024 * sizeof *g->frames);
    g->hash = calloc(2048, sizeof *g->hash);
    if (!g->elems || !g->alt_start || !g->rule_alts || !g->sets || !g->frames || !g->hash) {
        xi_grammar_free(g);
        return NULL;
    }
    int e = 0, k = 0;
    for (int r = 0; r < b->n_rules; r++) {
        g->rule_alts[r] = (uint32_t)k;
        for (int a = 0; a < b->rules[r].n_alts; a++) {
            const xg_seq *s = &b->rules[r].alts[a];
            g->alt_start[k++] = (uint32_t)e;
            if (s->n) memcpy(g->elems + e, s->e, (size_t)s->n * sizeof *s->e);
            e += s->n;
            g->elems[e++] = XG_END;
        }
    }
    g->rule_alts[b->n_rules] = (uint32_t)k;
    if (b->n_sets) memcpy(g->sets, b->sets, (size_t)b->n_sets * sizeof *g->sets);
    g->n_sets = b->n_sets;
    g->n_elems = n_elems;
    g->n_rules = b->n_rules;
    g->root = root;
    g->cap_frames = 1024;
    g->n_frames = 2; /* 0: complete, 1: unknown context */
    memset(g->frames, 0, 2 * sizeof *g->frames);
    g->hash_cap = 2048;
    return g;
}

xi_grammar *xi_grammar_compile(xi_grammar_kind kind, const char *src, size_t len, char *err,
                               size_t errlen) {
    xg_build b;
    xg_init(&b, err, errlen);
    int root = -1;
    switch (kind) {
    case XI_GRAMMAR_JSON_OBJECT: root = xg_compile_json_object(&b); break;
    case XI_GRAMMAR_JSON_SCHEMA: root = xg_compile_json_schema(&b, src, len); break;
    case XI_GRAMMAR_REGEX: root = xg_compile_regex(&b, src, len, 0); break;
    case XI_GRAMMAR_CHOICE: root = xg_compile_choice(&b, src, len); break;
    case XI_GRAMMAR_GBNF: root = xg_compile_gbnf(&b, src, len); break;
    default: xg_fail(&b, "grammar: unknown kind %d", (int)kind);
    }
    xi_grammar *g = NULL;
    if (root >= 0 && !b.failed) {
        g = flatten(&b, root);
        if (!g) xi_errf(err, errlen, "grammar: out of memory");
    }
    if (g) {
        xi_grammar_state st;
        const int bad = xi_grammar_state_init(g, &st);
        xi_grammar_state_free(&st);
        if (bad && g->too_complex)
            xi_errf(err, errlen, "grammar: too complex (its start state needs more than %d expansion steps; "
                    "simplify nested repetitions)", XG_MAX_VISITS);
        else if (bad)
            xi_errf(err, errlen, "grammar: out of memory");
        if (bad) {
            xi_grammar_free(g);
            g = NULL;
        }
    }
    xg_free(&b);
    return g;
}

/* ---- frames ---- */

static uint32_t frame_hash(uint32_t pos, uint32_t parent) {
    uint64_t h = ((uint64_t)pos << 32 | parent) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32);
}

static int rehash(xi_grammar *g) {
    int cap = g->hash_cap * 2;
    uint32_t *h = calloc((size_t)cap, sizeof *h);
    if (!h) return -1;
    for (int id = 2; id < g->n_frames; id++) {
        uint32_t i = frame_hash(g->frames[id].pos, g->frames[id].parent) & (uint32_t)(cap - 1);
        while (h[i]) i = (i + 1) & (uint32_t)(cap - 1);
        h[i] = (uint32_t)id;
    }
    free(g->hash);
    g->hash = h;
    g->hash_cap = cap;
    return 0;
}

uint32_t xg_intern(xi_grammar *g, uint32_t pos, uint32_t parent) {
    const uint32_t mask = (uint32_t)g->hash_cap - 1;
    uint32_t i = frame_hash(pos, parent) & mask;
    for (uint32_t id; (id = g->hash[i]); i = (i + 1) & mask)
        if (g->frames[id].pos == pos && g->frames[id].parent == parent) return id;
    const uint32_t depth = g->frames[parent].depth + 1;
    if (depth > XI_GRAMMAR_MAX_DEPTH || g->n_frames >= XG_MAX_FRAMES) return XG_FAIL;
    if (g->n_frames == g->cap_frames) {
        xg_frame *f = realloc(g->frames, (size_t)g->cap_frames * 2 * sizeof *f);
        if (!f) return XG_FAIL;
        g->frames = f;
        g->cap_frames *= 2;
    }
    const uint32_t id = (uint32_t)g->n_frames++;
    g->frames[id] = (xg_frame){pos, parent, depth};
    g->hash[i] = id;
    if (2 * g->n_frames > g->hash_cap && rehash(g)) return XG_FAIL;
    return id;
}

/* ---- closure: from an element position to the frames whose top is a byte set ---- */

typedef struct idset {
    uint32_t **v;
    int *cap;
    int n;
    int oom;
} idset;

static void add_id(idset *s, uint32_t id) {
    if (s->n == *s->cap) {
        int c = *s->cap ? *s->cap * 2 : 16;
        uint32_t *v = realloc(*s->v, (size_t)c * sizeof *v);
        if (!v) {
            s->oom = 1;
            return;
        }
        *s->v = v;
        *s->cap = c;
    }
    (*s->v)[s->n++] = id;
}

/* Start a closure: an empty visited set. */
static void visit_reset(xi_grammar *g) {
    g->n_visit = 0;
    g->too_complex = 0;
    if (++g->gen == 0) { /* wrapped: every stamp is stale again */
        if (g->visit_gen) memset(g->visit_gen, 0, (size_t)g->visit_cap * sizeof *g->visit_gen);
        g->gen = 1;
    }
}

static size_t visit_slot(uint64_t key, int cap) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (size_t)(cap - 1);
}

/* Doubles the set, keeping this generation's keys; nonzero when out of memory. */
static int visit_grow(xi_grammar *g) {
    const int cap = g->visit_cap ? 2 * g->visit_cap : 256;
    uint64_t *k = malloc((size_t)cap * sizeof *k);
    uint32_t *s = calloc((size_t)cap, sizeof *s);
    if (!k || !s) {
        free(k);
        free(s);
        return -1;
    }
    for (int i = 0; i < g->visit_cap; i++) {
        if (g->visit_gen[i] != g->gen) continue;
        size_t j = visit_slot(g->visit[i], cap);
        while (s[j] == g->gen) j = (j + 1) & (size_t)(cap - 1);
        k[j] = g->visit[i];
        s[j] = g->gen;
    }
    free(g->visit);
    free(g->visit_gen);
    g->visit = k;
    g->visit_gen = s;
    g->visit_cap = cap;
    return 0;
}

/* Whether (pos, parent) was seen in this closure; marks it seen. A hash set: closures of
 * nested repetitions reach tens of thousands of pairs, and the linear scan this replaced made
 * such a regex take minutes to compile (found by fuzzing: [8-c] with a hundred ?s, {352}).
 * Out of memory counts as seen, which ends that branch of the closure. */
static int visited(xi_grammar *g, uint32_t pos, uint32_t parent) {
    const uint64_t key = (uint64_t)pos << 32 | parent;
    if (g->n_visit >= XG_MAX_VISITS) {
        g->too_complex = 1;
        return 1;
    }
    if (2 * (g->n_visit + 1) > g->visit_cap && visit_grow(g)) return 1;
    for (size_t i = visit_slot(key, g->visit_cap);; i = (i + 1) & (size_t)(g->visit_cap - 1)) {
        if (g->visit_gen[i] != g->gen) {
            g->visit[i] = key;
            g->visit_gen[i] = g->gen;
            g->n_visit++;
            return 0;
        }
        if (g->visit[i] == key) return 1;
    }
}

/* Every (pos, parent) reachable without reading a byte, depth first in the order of the
 * alternatives, with an explicit stack of pending alternatives: recursing per reference
 * overflowed the thread's stack on chains of optional elements (a regex of a hundred nested
 * ?s repeated {704} times went tens of thousands of calls deep; found by fuzzing). The
 * stack's order is the recursion's, so frames are interned in the same order. */
/* Room for `need` entries on the closure stack (kept across closures); 0, or -1 when out of
 * memory. */
static int cstack_reserve(xi_grammar *g, int need) {
    if (need <= g->cstack_cap) return 0;
    const int cap = need < 32 ? 64 : 2 * need;
    uint64_t *v = realloc(g->cstack, (size_t)cap * sizeof *v);
    if (!v) return -1;
    g->cstack = v;
    g->cstack_cap = cap;
    return 0;
}

static void closure(xi_grammar *g, uint32_t pos0, uint32_t parent0, idset *out) {
    int sp = 0;
    if (cstack_reserve(g, 1)) {
        out->oom = 1;
        return;
    }
    g->cstack[sp++] = (uint64_t)pos0 << 32 | parent0;
    while (sp) {
        uint32_t pos = (uint32_t)(g->cstack[--sp] >> 32), parent = (uint32_t)g->cstack[sp];
        for (;;) {
            if (visited(g, pos, parent)) break;
            const uint32_t e = g->elems[pos];
            if (e == XG_END) {
                if (parent <= 1) {
                    add_id(out, parent);
                    break;
                }
                const xg_frame f = g->frames[parent];
                pos = f.pos;
                parent = f.parent;
                continue;
            }
            if (!(e & XG_REF)) {
                const uint32_t id = xg_intern(g, pos, parent);
                if (id != XG_FAIL) add_id(out, id);
                break;
            }
            const uint32_t r = e & ~XG_REF;
            /* a reference that ends its alternative returns straight to our caller: repetition
             * and right recursion keep the stack as it is */
            const uint32_t ret = g->elems[pos + 1] == XG_END ? parent : xg_intern(g, pos + 1, parent);
            if (ret == XG_FAIL) break;
            const uint32_t a0 = g->rule_alts[r], a1 = g->rule_alts[r + 1];
            if (cstack_reserve(g, sp + (int)(a1 - a0))) {
                out->oom = 1;
                return;
            }
            for (uint32_t a = a1; a-- > a0;) g->cstack[sp++] = (uint64_t)g->alt_start[a] << 32 | ret;
            break;
        }
    }
}

static int cmp_u32(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int finish_set(idset *s) {
    if (s->oom) return -1;
    uint32_t *v = *s->v;
    if (s->n > 1) {
        qsort(v, (size_t)s->n, sizeof *v, cmp_u32);
        int k = 1;
        for (int i = 1; i < s->n; i++)
            if (v[i] != v[k - 1]) v[k++] = v[i];
        s->n = k;
    }
    return s->n;
}

int xg_step(xi_grammar *g, const uint32_t *in, int n_in, uint8_t c, uint32_t **out, int *cap) {
    idset s = {out, cap, 0, 0};
    visit_reset(g);
    for (int i = 0; i < n_in; i++) {
        if (in[i] <= 1) continue;
        const xg_frame f = g->frames[in[i]];
        const uint8_t *set = g->sets[g->elems[f.pos]];
        if (set[c >> 3] >> (c & 7) & 1) closure(g, f.pos + 1, f.parent, &s);
    }
    if (g->too_complex) s.oom = 1;
    return finish_set(&s);
}

/* ---- states ---- */

int xi_grammar_state_init(xi_grammar *g, xi_grammar_state *st) {
    memset(st, 0, sizeof *st);
    idset s = {&st->ids, &st->cap, 0, 0};
    visit_reset(g);
    const uint32_t r = (uint32_t)g->root;
    for (uint32_t a = g->rule_alts[r]; a < g->rule_alts[r + 1]; a++) closure(g, g->alt_start[a], 0, &s);
    if (g->too_complex) s.oom = 1;
    st->n = finish_set(&s);
    return st->n < 0 ? -1 : 0;
}

int xi_grammar_state_copy(xi_grammar_state *dst, const xi_grammar_state *src) {
    if (dst->cap < src->n) {
        uint32_t *v = realloc(dst->ids, (size_t)(src->n ? src->n : 1) * sizeof *v);
        if (!v) return -1;
        dst->ids = v;
        dst->cap = src->n ? src->n : 1;
    }
    if (src->n) memcpy(dst->ids, src->ids, (size_t)src->n * sizeof *src->ids);
    dst->n = src->n;
    return 0;
}

void xi_grammar_state_free(xi_grammar_state *s) {
    free(s->ids);
    memset(s, 0, sizeof *s);
}

int xi_grammar_feed(xi_grammar *g, xi_grammar_state *s, const char *bytes, size_t n) {
    if (!n) return 0;
    uint32_t set = xg_dfa_set(g, s->ids, s->n);
    for (size_t i = 0; i < n && set && set != XG_FAIL; i++) set = xg_dfa_step(g, set, (uint8_t)bytes[i]);
    if (!set || set == XG_FAIL) return -1;
    const int k = (int)g->dset_n[set];
    if (k > s->cap) {
        uint32_t *v = realloc(s->ids, (size_t)k * sizeof *v);
        if (!v) return -1;
        s->ids = v;
        s->cap = k;
    }
    memcpy(s->ids, g->dset_ids + g->dset_off[set], (size_t)k * sizeof *s->ids);
    s->n = k;
    return 0;
}

int xi_grammar_done(const xi_grammar_state *s) {
    return s->n > 0 && s->ids[0] == 0;
}

int xi_grammar_can_continue(const xi_grammar_state *s) {
    return s->n > 0 && s->ids[s->n - 1] > 1;
}
