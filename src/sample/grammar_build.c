/* sample/grammar_build: the rule builder every grammar compiler writes into. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/grammar_internal.h"

void xg_init(xg_build *b, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    b->err = err;
    b->errlen = errlen;
    if (errlen) err[0] = 0;
}

void xg_free(xg_build *b) {
    for (int r = 0; r < b->n_rules; r++) {
        for (int a = 0; a < b->rules[r].n_alts; a++) xg_seq_free(&b->rules[r].alts[a]);
        free(b->rules[r].alts);
        free(b->rules[r].name);
    }
    free(b->rules);
    free(b->sets);
    b->rules = NULL;
    b->sets = NULL;
    b->n_rules = b->n_sets = 0;
}

int xg_fail(xg_build *b, const char *fmt, ...) {
    if (!b->failed && b->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, b->errlen, fmt, ap);
        va_end(ap);
    }
    b->failed = 1;
    return -1;
}

static int grow(xg_build *b, void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return xg_fail(b, "grammar: out of memory");
    *p = q;
    *cap = c;
    return 0;
}

int xg_rule_new(xg_build *b) {
    if (b->failed) return -1;
    if (b->n_rules >= 0x7fffff) return xg_fail(b, "grammar: too many rules");
    if (grow(b, (void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) return -1;
    memset(&b->rules[b->n_rules], 0, sizeof *b->rules);
    return b->n_rules++;
}

void xg_seq_free(xg_seq *s) {
    free(s->e);
    memset(s, 0, sizeof *s);
}

void xg_seq_push(xg_build *b, xg_seq *s, uint32_t e) {
    if (b->failed || grow(b, (void **)&s->e, &s->cap, s->n + 1, sizeof *s->e)) return;
    s->e[s->n++] = e;
}

void xg_seq_append(xg_build *b, xg_seq *s, const xg_seq *t) {
    for (int i = 0; i < t->n; i++) xg_seq_push(b, s, t->e[i]);
}

int xg_add_alt(xg_build *b, int rule, const xg_seq *s) {
    if (b->failed || rule < 0) return -1;
    xg_rule *r = &b->rules[rule];
    if (grow(b, (void **)&r->alts, &r->cap_alts, r->n_alts + 1, sizeof *r->alts)) return -1;
    xg_seq *a = &r->alts[r->n_alts];
    memset(a, 0, sizeof *a);
    xg_seq_append(b, a, s);
    r->n_alts++;
    r->defined = 1;
    return b->failed ? -1 : 0;
}

void xg_seq_set(xg_build *b, xg_seq *s, const uint8_t set[32]) {
    if (b->failed) return;
    int i = 0;
    while (i < b->n_sets && memcmp(b->sets[i], set, 32)) i++;
    if (i == b->n_sets) {
        if (grow(b, (void **)&b->sets, &b->cap_sets, b->n_sets + 1, sizeof *b->sets)) return;
        memcpy(b->sets[b->n_sets++], set, 32);
    }
    xg_seq_push(b, s, (uint32_t)i);
}

void xg_seq_byte(xg_build *b, xg_seq *s, uint8_t c) {
    uint8_t set[32] = {0};
    set[c >> 3] = (uint8_t)(1u << (c & 7));
    xg_seq_set(b, s, set);
}

void xg_seq_lit(xg_build *b, xg_seq *s, const char *lit, size_t n) {
    for (size_t i = 0; i < n; i++) xg_seq_byte(b, s, (uint8_t)lit[i]);
}

int xg_wrap(xg_build *b, const xg_seq *s) {
    int r = xg_rule_new(b);
    return xg_add_alt(b, r, s) ? -1 : r;
}

/* The alternatives of x as sequences: a lone reference contributes its rule's alternatives
 * (copied, the rule may still grow), anything else is one alternative. */
static int alts_of(xg_build *b, const xg_seq *x, xg_seq **out) {
    if (x->n == 1 && (x->e[0] & XG_REF) && b->rules[x->e[0] & ~XG_REF].defined) {
        const xg_rule *r = &b->rules[x->e[0] & ~XG_REF];
        *out = calloc((size_t)r->n_alts + 1, sizeof **out);
        if (!*out) return xg_fail(b, "grammar: out of memory");
        for (int a = 0; a < r->n_alts; a++) xg_seq_append(b, &(*out)[a], &r->alts[a]);
        return r->n_alts;
    }
    *out = calloc(1, sizeof **out);
    if (!*out) return xg_fail(b, "grammar: out of memory");
    xg_seq_append(b, &(*out)[0], x);
    return 1;
}

/* loop ::= alt_1 next | ... | alt_k next | ε, where next is the loop itself (star) or the
 * next shorter optional chain. */
static int loop_rule(xg_build *b, const xg_seq *alts, int n_alts, int next_self, int next) {
    int r = xg_rule_new(b);
    if (r < 0) return -1;
    xg_seq s = {0};
    for (int a = 0; a < n_alts; a++) {
        s.n = 0;
        xg_seq_append(b, &s, &alts[a]);
        if (next_self) xg_seq_ref(b, &s, r);
        else if (next >= 0) xg_seq_ref(b, &s, next);
        xg_add_alt(b, r, &s);
    }
    s.n = 0;
    xg_add_alt(b, r, &s);
    xg_seq_free(&s);
    return b->failed ? -1 : r;
}

int xg_rep(xg_build *b, const xg_seq *x, int min, int max) {
    if (b->failed) return -1;
    if (min < 0 || (max >= 0 && max < min)) return xg_fail(b, "grammar: bad repetition {%d,%d}", min, max);
    if (min > 10000 || max > 10000) return xg_fail(b, "grammar: repetition bound over 10000");
    xg_seq *alts = NULL;
    int n_alts = alts_of(b, x, &alts);
    int tail = -1;
    if (n_alts > 0) {
        if (max < 0) tail = loop_rule(b, alts, n_alts, 1, -1);
        else
            for (int k = 0; k < max - min && !b->failed; k++) tail = loop_rule(b, alts, n_alts, 0, tail);
    }
    for (int a = 0; a < (n_alts > 0 ? n_alts : 0); a++) xg_seq_free(&alts[a]);
    free(alts);
    if (b->failed) return -1;
    xg_seq s = {0};
    int xr = -1;
    if (min > 0) xr = x->n == 1 && (x->e[0] & XG_REF) ? (int)(x->e[0] & ~XG_REF) : xg_wrap(b, x);
    for (int i = 0; i < min; i++) xg_seq_ref(b, &s, xr);
    if (tail >= 0) xg_seq_ref(b, &s, tail);
    int r = xg_wrap(b, &s);
    xg_seq_free(&s);
    return r;
}

/* ---- code point classes as UTF-8 byte sequences ---- */

static int utf8_enc(uint32_t c, uint8_t *o) {
    if (c < 0x80) return o[0] = (uint8_t)c, 1;
    if (c < 0x800) return o[0] = (uint8_t)(0xc0 | c >> 6), o[1] = (uint8_t)(0x80 | (c & 0x3f)), 2;
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xe0 | c >> 12);
        o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | c >> 18);
    o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}

int64_t xg_utf8_next(const char *src, size_t n, size_t *i) {
    const uint8_t *s = (const uint8_t *)src;
    if (*i >= n) return -1;
    uint32_t c = s[*i];
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || *i + (size_t)len > n) return -1;
    if (len > 1) c &= 0x3fu >> (len - 1);
    for (int k = 1; k < len; k++) {
        if ((s[*i + k] & 0xc0) != 0x80) return -1;
        c = c << 6 | (s[*i + k] & 0x3f);
    }
    *i += (size_t)len;
    return c;
}

void xg_seq_cp(xg_build *b, xg_seq *s, uint32_t c) {
    uint8_t o[4];
    int n = utf8_enc(c, o);
    for (int i = 0; i < n; i++) xg_seq_byte(b, s, o[i]);
}

static void set_range(uint8_t *set, unsigned lo, unsigned hi) {
    for (unsigned c = lo; c <= hi; c++) set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* [lo, hi] within one encoded length, as alternatives of per-byte ranges (RE2's split: cut
 * where the continuation bytes do not span their full range). */
static void utf8_alts(xg_build *b, int rule, uint8_t *ascii, uint32_t lo, uint32_t hi) {
    if (b->failed) return;
    if (hi < 0x80) {
        set_range(ascii, lo, hi);
        return;
    }
    static const uint32_t lim[] = {0x7f, 0x7ff, 0xffff, 0x10ffff};
    for (int k = 0; k < 3; k++)
        if (lo <= lim[k] && hi > lim[k]) {
            utf8_alts(b, rule, ascii, lo, lim[k]);
            utf8_alts(b, rule, ascii, lim[k] + 1, hi);
            return;
        }
    uint8_t L[4], H[4];
    const int n = utf8_enc(lo, L);
    utf8_enc(hi, H);
    for (int i = 1; i < n; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                utf8_alts(b, rule, ascii, lo, lo | m);
                utf8_alts(b, rule, ascii, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_alts(b, rule, ascii, lo, (hi & ~m) - 1);
                utf8_alts(b, rule, ascii, hi & ~m, hi);
                return;
            }
        }
    }
    xg_seq s = {0};
    for (int i = 0; i < n; i++) {
        uint8_t set[32] = {0};
        set_range(set, L[i], H[i]);
        xg_seq_set(b, &s, set);
    }
    xg_add_alt(b, rule, &s);
    xg_seq_free(&s);
}

static int cmp_range(const void *a, const void *b) {
    const xg_cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int xg_cp_class(xg_build *b, const xg_cp_range *r, int n, int negate) {
    if (b->failed) return -1;
    /* sort, merge, complement, then cut out the surrogates */
    xg_cp_range *v = malloc(((size_t)n + 2) * 2 * sizeof *v);
    if (!v) return xg_fail(b, "grammar: out of memory");
    int m = 0;
    for (int i = 0; i < n; i++)
        if (r[i].lo <= r[i].hi && r[i].lo <= 0x10ffff)
            v[m++] = (xg_cp_range){r[i].lo, r[i].hi > 0x10ffff ? 0x10ffff : r[i].hi};
    qsort(v, (size_t)m, sizeof *v, cmp_range);
    int k = 0;
    for (int i = 0; i < m; i++) {
        if (k && v[i].lo <= v[k - 1].hi + 1) {
            if (v[i].hi > v[k - 1].hi) v[k - 1].hi = v[i].hi;
        } else v[k++] = v[i];
    }
    xg_cp_range *u = v + n + 2;
    int nu = 0;
    if (negate) {
        uint32_t next = 0;
        for (int i = 0; i < k; i++) {
            if (v[i].lo > next) u[nu++] = (xg_cp_range){next, v[i].lo - 1};
            next = v[i].hi + 1;
        }
        if (next <= 0x10ffff) u[nu++] = (xg_cp_range){next, 0x10ffff};
    } else {
        if (k) memcpy(u, v, (size_t)k * sizeof *u);
        nu = k;
    }
    int rule = xg_rule_new(b);
    uint8_t ascii[32] = {0};
    for (int i = 0; i < nu; i++) {
        uint32_t lo = u[i].lo, hi = u[i].hi;
        if (lo < 0xd800 && hi >= 0xd800) {
            if (hi > 0xdfff) utf8_alts(b, rule, ascii, 0xe000, hi);
            hi = 0xd7ff;
        } else if (lo >= 0xd800 && lo <= 0xdfff) {
            if (hi <= 0xdfff) continue;
            lo = 0xe000;
        }
        utf8_alts(b, rule, ascii, lo, hi);
    }
    free(v);
    static const uint8_t none[32];
    if (memcmp(ascii, none, 32)) {
        xg_seq s = {0};
        xg_seq_set(b, &s, ascii);
        xg_add_alt(b, rule, &s);
        xg_seq_free(&s);
    }
    if (!b->failed && !b->rules[rule].n_alts) return xg_fail(b, "grammar: a character class matches nothing");
    return b->failed ? -1 : rule;
}
