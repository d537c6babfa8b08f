/* sample/grammar_mask: the per-step token mask of a grammar state.
 *
 * A state is a set of stacks; a token is allowed when its bytes advance any of them. Trying
 * 151,936 tokens byte by byte every step would cost as much as the model, so the mask is built
 * from a cache per grammar position p (the element on top of a stack): walking every token
 * from the lone frame (p, unknown context) sorts it into "accepted" (its bytes are consumed
 * without leaving p's rule, so whatever lies below on the stack it is allowed), "rejected"
 * (dies inside the rule) or "check" (reaches the end of the rule: only the full stack can
 * tell). The walk visits tokens in byte order and reuses the states of the prefix a token
 * shares with the previous one, a trie walk without a trie. A step then ORs one bitmap per
 * stack and checks the few "check" tokens against the real stack. */
#include <stdlib.h>
#include <string.h>

#include "sample/grammar_internal.h"

static int cmp_token(const void *a, const void *b, void *arg) {
    const xi_token_table *t = arg;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t lx = t->off[x + 1] - t->off[x], ly = t->off[y + 1] - t->off[y];
    int c = memcmp(t->bytes + t->off[x], t->bytes + t->off[y], lx < ly ? lx : ly);
    if (c) return c;
    return lx < ly ? -1 : lx > ly ? 1 : (x < y ? -1 : x > y);
}

int xi_token_table_init(xi_token_table *t, int vocab, const uint32_t *off, const char *bytes,
                        const uint8_t *usable) {
    memset(t, 0, sizeof *t);
    t->vocab = vocab;
    t->off = off;
    t->bytes = bytes;
    t->usable = usable;
    t->order = malloc(((size_t)vocab + 1) * sizeof *t->order);
    t->lcp = malloc(((size_t)vocab + 1) * sizeof *t->lcp);
    if (!t->order || !t->lcp) {
        xi_token_table_free(t);
        return -1;
    }
    for (int i = 0; i < vocab; i++)
        if (usable[i]) {
            t->order[t->n_order++] = i;
            const int len = (int)(off[i + 1] - off[i]);
            if (len > t->max_len) t->max_len = len;
        }
    qsort_r(t->order, (size_t)t->n_order, sizeof *t->order, cmp_token, t);
    t->s_off = malloc(((size_t)t->n_order + 1) * sizeof *t->s_off);
    t->s_bytes = malloc((size_t)off[vocab] + 1);
    if (!t->s_off || !t->s_bytes) {
        xi_token_table_free(t);
        return -1;
    }
    uint32_t at = 0;
    for (int i = 0; i < t->n_order; i++) {
        const int32_t k = t->order[i];
        t->s_off[i] = at;
        memcpy(t->s_bytes + at, bytes + off[k], off[k + 1] - off[k]);
        at += off[k + 1] - off[k];
    }
    t->s_off[t->n_order] = at;
    for (int i = 0; i < t->n_order; i++) {
        int l = 0;
        if (i) {
            const int32_t a = t->order[i - 1], b = t->order[i];
            const uint32_t la = off[a + 1] - off[a], lb = off[b + 1] - off[b];
            while ((uint32_t)l < la && (uint32_t)l < lb && bytes[off[a] + l] == bytes[off[b] + l] && l < 65535) l++;
        }
        t->lcp[i] = (uint16_t)l;
    }
    return 0;
}

void xi_token_table_free(xi_token_table *t) {
    free(t->order);
    free(t->lcp);
    free(t->s_bytes);
    free(t->s_off);
    memset(t, 0, sizeof *t);
}

static void drop_cache(xi_grammar *g) {
    if (g->cache)
        for (int i = 0; i < g->n_elems; i++)
            if (g->cache[i]) {
                free(g->cache[i]->accept);
                free(g->cache[i]->check);
                free(g->cache[i]);
                g->cache[i] = NULL;
            }
    free(g->walk);
    free(g->acc);
    for (int i = 0; i < g->n_res; i++) free(g->res_list[i]);
    free(g->res_list);
    free(g->res_n);
    free(g->res_buf);
    xg_map_free(&g->res);
    g->res_list = NULL;
    g->res_n = NULL;
    g->res_buf = NULL;
    g->n_res = g->cap_res = 0;
    g->walk = NULL;
    g->acc = NULL;
    g->walk_depth = 0;
    g->cache_for = NULL;
}

void xg_mask_free(xi_grammar *g) {
    drop_cache(g);
    free(g->cache);
    g->cache = NULL;
}

static int bind_table(xi_grammar *g, const xi_token_table *t) {
    if (g->cache_for == t) return 0;
    drop_cache(g);
    const size_t words = ((size_t)t->vocab + 63) / 64;
    if (!g->cache) g->cache = calloc((size_t)g->n_elems + 1, sizeof *g->cache);
    g->walk = calloc((size_t)t->max_len + 1, sizeof *g->walk);
    g->acc = malloc(words * sizeof *g->acc);
    g->walk_depth = t->max_len;
    if (!g->cache || !g->walk || !g->acc) {
        drop_cache(g);
        return -1;
    }
    g->cache_for = t;
    return 0;
}

/* Sort every token into accepted / rejected / check from the frame (pos, unknown context). */
static xg_cache_entry *build_entry(xi_grammar *g, const xi_token_table *t, uint32_t pos) {
    xg_cache_entry *c = calloc(1, sizeof *c);
    const size_t words = ((size_t)t->vocab + 63) / 64;
    if (!c || !(c->accept = calloc(words, sizeof *c->accept))) {
        free(c);
        return NULL;
    }
    int cap_check = 0;
    const uint32_t top = xg_intern(g, pos, 1);
    if (top == XG_FAIL) return c;
    uint8_t ctx_seen[4096];  /* ctx_seen[d]: some path reached the rule's end within d bytes */
    uint8_t *ctx = t->max_len < (int)sizeof ctx_seen ? ctx_seen : malloc((size_t)t->max_len + 1);
    if (!ctx || (g->walk[0] = xg_dfa_set(g, &top, 1)) == XG_FAIL) goto oom_ctx;
    ctx[0] = 0;
    int valid = 0;          /* walk[0..valid] hold the previous token's prefix states */
    int dead_at = 1 << 30;  /* depth where the previous walk ran out of live stacks */
    for (int i = 0; i < t->n_order; i++) {
        const char *b = t->s_bytes + t->s_off[i];
        const int len = (int)(t->s_off[i + 1] - t->s_off[i]);
        int d = i ? t->lcp[i] : 0;
        int verdict; /* 1 accept, 2 check, 0 reject */
        if (d >= dead_at) {
            verdict = ctx[dead_at] ? 2 : 0;
        } else {
            if (d > valid) d = valid;
            dead_at = 1 << 30;
            while (d < len) {
                const uint32_t next = xg_dfa_step(g, g->walk[d], (uint8_t)b[d]);
                if (next == XG_FAIL) goto oom_ctx;
                g->walk[++d] = next;
                const uint8_t f = g->dset_flags[next];
                ctx[d] = (uint8_t)(ctx[d - 1] | (f & XG_SET_CTX));
                if (!(f & XG_SET_LIVE)) {
                    dead_at = d;
                    break;
                }
            }
            valid = d;
            if (d == len && (g->dset_flags[g->walk[d]] & XG_SET_LIVE)) verdict = 1;
            else verdict = ctx[d] ? 2 : 0;
        }
        if (verdict == 1) c->accept[t->order[i] >> 6] |= 1ull << (t->order[i] & 63);
        else if (verdict == 2) {
            if (c->n_check == cap_check) {
                cap_check = cap_check ? cap_check * 2 : 256;
                int32_t *v = realloc(c->check, (size_t)cap_check * sizeof *v);
                if (!v) goto oom_ctx;
                c->check = v;
            }
            c->check[c->n_check++] = i;
        }
    }
    if (ctx != ctx_seen) free(ctx);
    return c;
oom_ctx:
    if (ctx && ctx != ctx_seen) free(ctx);
    free(c->accept);
    free(c->check);
    free(c);
    return NULL;
}

/* The tokens of list[n] (indices into the byte order; NULL: all n) whose bytes advance the
 * stack id, by the same shared-prefix walk as the cache, into out as token ids. Returns the
 * count or -1 on OOM. */
static int walk_from(xi_grammar *g, const xi_token_table *t, uint32_t id, const int32_t *list, int n,
                     int32_t *out) {
    if ((g->walk[0] = xg_dfa_set(g, &id, 1)) == XG_FAIL) return -1;
    int valid = 0, dead_at = 1 << 30, count = 0;
    const char *pb = NULL;
    int plen = 0;
    for (int j = 0; j < n; j++) {
        const int32_t i = list ? list[j] : j;
        const char *b = t->s_bytes + t->s_off[i];
        const int len = (int)(t->s_off[i + 1] - t->s_off[i]);
        int l = 0;
        while (l < len && l < plen && b[l] == pb[l]) l++;
        pb = b;
        plen = len;
        if (l >= dead_at) continue;
        int d = l < valid ? l : valid;
        dead_at = 1 << 30;
        while (d < len) {
            const uint32_t next = xg_dfa_step(g, g->walk[d], (uint8_t)b[d]);
            if (next == XG_FAIL) return -1;
            g->walk[++d] = next;
            if (!next) {
                dead_at = d;
                break;
            }
        }
        valid = d;
        if (d == len && g->walk[d]) out[count++] = t->order[i];
    }
    return count;
}

/* The check tokens of entry c that the stack id accepts, resolved once per stack id (a stack
 * is its whole context, so the answer never changes). NULL on OOM. */
static const int32_t *resolved(xi_grammar *g, const xi_token_table *t, uint32_t id, const xg_cache_entry *c, int *n) {
    uint64_t k;
    if (!xg_map_get(&g->res, (uint64_t)id + 1, &k)) {
        if (!g->res_buf && !(g->res_buf = malloc((size_t)t->vocab * sizeof *g->res_buf))) return NULL;
        if (g->n_res == g->cap_res) {
            const int cap = g->cap_res ? g->cap_res * 2 : 256;
            int32_t **l = realloc(g->res_list, (size_t)cap * sizeof *l);
            if (l) g->res_list = l;
            int *m = l ? realloc(g->res_n, (size_t)cap * sizeof *m) : NULL;
            if (!m) return NULL;
            g->res_n = m;
            g->cap_res = cap;
        }
        const int found = walk_from(g, t, id, c ? c->check : NULL, c ? c->n_check : t->n_order, g->res_buf);
        int32_t *list = found > 0 ? malloc((size_t)found * sizeof *list) : NULL;
        if (found < 0 || (found > 0 && !list)) return NULL;
        if (found) memcpy(list, g->res_buf, (size_t)found * sizeof *list);
        k = (uint64_t)g->n_res;
        if (xg_map_put(&g->res, (uint64_t)id + 1, k)) return free(list), NULL;
        g->res_list[g->n_res] = list;
        g->res_n[g->n_res++] = found;
    }
    *n = g->res_n[k];
    return g->res_list[k] ? g->res_list[k] : (const int32_t *)g->res_n;
}

int xi_grammar_mask(xi_grammar *g, const xi_grammar_state *s, const xi_token_table *t,
                    uint8_t *allow) {
    if (bind_table(g, t)) return -1;
    const size_t words = ((size_t)t->vocab + 63) / 64;
    uint64_t *acc = g->acc;
    memset(acc, 0, words * sizeof *acc);
    for (int k = 0; k < s->n; k++) {
        const uint32_t id = s->ids[k];
        if (id <= 1) continue;
        const uint32_t pos = g->frames[id].pos;
        if (!g->cache[pos] && !(g->cache[pos] = build_entry(g, t, pos))) return -1;
        /* near the depth limit a token may push past it: every token is tried on the real
         * stack (c NULL), not only the check ones */
        const xg_cache_entry *c = g->frames[id].depth > XI_GRAMMAR_MAX_DEPTH / 2 ? NULL : g->cache[pos];
        if (c)
            for (size_t w = 0; w < words; w++) acc[w] |= c->accept[w];
        int n_ok = 0;
        const int32_t *ok = c && !c->n_check ? NULL : resolved(g, t, id, c, &n_ok);
        if ((!c || c->n_check) && !ok) return -1;
        for (int j = 0; j < n_ok; j++) acc[ok[j] >> 6] |= 1ull << (ok[j] & 63);
    }
    int count = 0;
    for (int i = 0; i < t->vocab; i++) {
        allow[i] = (uint8_t)(acc[i >> 6] >> (i & 63) & 1);
        count += allow[i];
    }
    return count;
}

size_t xi_grammar_memory(const xi_grammar *g) {
    size_t bytes = (size_t)g->cap_frames * sizeof *g->frames + (size_t)g->hash_cap * sizeof *g->hash +
                   g->cap_dset_ids * sizeof *g->dset_ids + (size_t)g->cap_dsets * 17;
    for (int i = 0; i < g->n_dsets; i++) bytes += g->drow[i] ? 256 * sizeof **g->drow : 0;
    const size_t words = g->cache_for ? ((size_t)g->cache_for->vocab + 63) / 64 : 0;
    for (int i = 0; g->cache && i < g->n_elems; i++)
        if (g->cache[i]) bytes += words * 8 + (size_t)g->cache[i]->n_check * 4;
    for (int i = 0; i < g->n_res; i++) bytes += (size_t)g->res_n[i] * 4;
    return bytes;
}
