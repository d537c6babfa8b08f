/* sample/grammar_json: JSON grammars — any JSON object (json_object), a JSON Schema, a
 * choice list.
 *
 * As xgrammar does, output cannot wander: at most XG_JSON_WS whitespace bytes between tokens,
 * integers of at most 16 digits (so no client overflows a double), fractions of at most 16
 * and exponents of 2 digits, strings without control characters or lone surrogates. Objects
 * list their properties in the schema's order; required ones always appear, optional ones may
 * be left out, and no others unless additionalProperties allows them (absent means none when
 * properties are given, as in OpenAI's strict mode and xgrammar). A keyword this compiler
 * cannot honour is an error naming it, never silently ignored. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/grammar_internal.h"

#define XG_JSON_WS 16
#define XG_JSON_DIGITS 16
#define XG_JSON_MAX_INT 999999999999999LL /* unbounded integer ranges: 15 digits */

typedef struct jref {
    char *path;
    int rule;
} jref;

typedef struct jc {
    xg_build *b;
    json_t *doc;
    int ws, value, string, number, integer;
    jref *refs;
    int n_refs, cap_refs;
    struct str_memo { int min, max, rule; } str_memo[32];
    int n_str_memo;
    int depth;
} jc;

static void lit(jc *c, xg_seq *s, const char *t) {
    xg_seq_lit(c->b, s, t, strlen(t));
}

static int rule_of_lit(jc *c, const char *t) {
    xg_seq s = {0};
    lit(c, &s, t);
    int r = xg_wrap(c->b, &s);
    xg_seq_free(&s);
    return r;
}

static void set_of(xg_build *b, xg_seq *s, const char *chars) {
    uint8_t set[32] = {0};
    for (const char *p = chars; *p; p++) set[(uint8_t)*p >> 3] |= (uint8_t)(1u << ((uint8_t)*p & 7));
    xg_seq_set(b, s, set);
}

static void range_set(xg_build *b, xg_seq *s, char lo, char hi) {
    uint8_t set[32] = {0};
    for (int ch = lo; ch <= hi; ch++) set[ch >> 3] |= (uint8_t)(1u << (ch & 7));
    xg_seq_set(b, s, set);
}

static int ws_rule(jc *c) {
    if (c->ws >= 0) return c->ws;
    xg_seq s = {0};
    set_of(c->b, &s, " \t\n\r");
    c->ws = xg_rep(c->b, &s, 0, XG_JSON_WS);
    xg_seq_free(&s);
    return c->ws;
}

static void ws(jc *c, xg_seq *s) {
    xg_seq_ref(c->b, s, ws_rule(c));
}

/* one string character: anything but '"', '\' and controls, or an escape */
static int char_rule(jc *c) {
    static const xg_cp_range bad[] = {{0, 0x1f}, {'"', '"'}, {'\\', '\\'}};
    int r = xg_cp_class(c->b, bad, 3, 1);
    xg_seq s = {0};
    xg_seq_byte(c->b, &s, '\\');
    set_of(c->b, &s, "\"\\/bfnrt");
    xg_add_alt(c->b, r, &s);
    /* \uXXXX without surrogates (a lone one is not valid JSON to strict parsers) */
    static const char *const first[2][2] = {{"0123456789abcABCefEF", NULL}, {"dD", "01234567"}};
    for (int k = 0; k < 2; k++) {
        s.n = 0;
        lit(c, &s, "\\u");
        set_of(c->b, &s, first[k][0]);
        if (first[k][1]) set_of(c->b, &s, first[k][1]);
        for (int d = first[k][1] ? 2 : 1; d < 4; d++) set_of(c->b, &s, "0123456789abcdefABCDEF");
        xg_add_alt(c->b, r, &s);
    }
    xg_seq_free(&s);
    return r;
}

static int string_rule(jc *c, int min, int max) {
    for (int i = 0; i < c->n_str_memo; i++)
        if (c->str_memo[i].min == min && c->str_memo[i].max == max) return c->str_memo[i].rule;
    xg_seq ch = {0}, s = {0};
    xg_seq_ref(c->b, &ch, char_rule(c));
    int body = xg_rep(c->b, &ch, min, max);
    lit(c, &s, "\"");
    xg_seq_ref(c->b, &s, body);
    lit(c, &s, "\"");
    int r = xg_wrap(c->b, &s);
    xg_seq_free(&ch);
    xg_seq_free(&s);
    if (r >= 0 && c->n_str_memo < 32) c->str_memo[c->n_str_memo++] = (struct str_memo){min, max, r};
    return r;
}

/* digits: [0-9]{min,max} */
static void digits(jc *c, xg_seq *s, int min, int max) {
    xg_seq d = {0};
    range_set(c->b, &d, '0', '9');
    xg_seq_ref(c->b, s, xg_rep(c->b, &d, min, max));
    xg_seq_free(&d);
}

/* (0 | [1-9][0-9]{0,15}) */
static void uint_any(jc *c, xg_seq *s) {
    int r = xg_rule_new(c->b);
    xg_seq a = {0};
    lit(c, &a, "0");
    xg_add_alt(c->b, r, &a);
    a.n = 0;
    range_set(c->b, &a, '1', '9');
    digits(c, &a, 0, XG_JSON_DIGITS - 1);
    xg_add_alt(c->b, r, &a);
    xg_seq_free(&a);
    xg_seq_ref(c->b, s, r);
}

static int frac_rule(jc *c) {
    xg_seq s = {0};
    lit(c, &s, ".");
    digits(c, &s, 1, XG_JSON_DIGITS);
    int f = xg_wrap(c->b, &s);
    s.n = 0;
    xg_seq_ref(c->b, &s, f);
    int r = xg_rep(c->b, &s, 0, 1);
    xg_seq_free(&s);
    return r;
}

static int number_rule(jc *c) {
    if (c->number >= 0) return c->number;
    /* -?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})? */
    xg_seq s = {0}, ex = {0}, sg = {0};
    lit(c, &s, "-");
    const int minus = xg_rep(c->b, &s, 0, 1);
    set_of(c->b, &ex, "eE");
    set_of(c->b, &sg, "+-");
    xg_seq_ref(c->b, &ex, xg_rep(c->b, &sg, 0, 1));
    digits(c, &ex, 1, 2);
    const int exr = xg_wrap(c->b, &ex);
    ex.n = 0;
    xg_seq_ref(c->b, &ex, exr);
    const int exopt = xg_rep(c->b, &ex, 0, 1);
    s.n = 0;
    xg_seq_ref(c->b, &s, minus);
    uint_any(c, &s);
    xg_seq_ref(c->b, &s, frac_rule(c));
    xg_seq_ref(c->b, &s, exopt);
    c->number = xg_wrap(c->b, &s);
    xg_seq_free(&s);
    xg_seq_free(&ex);
    xg_seq_free(&sg);
    return c->number;
}

/* ---- integer ranges as digit sequences ---- */

static void uint_same_len(jc *c, int rule, char *prefix, int plen, const char *a, const char *b, int n) {
    if (c->b->failed) return;
    if (n == 0) {
        xg_seq s = {0};
        xg_seq_lit(c->b, &s, prefix, (size_t)plen);
        xg_add_alt(c->b, rule, &s);
        xg_seq_free(&s);
        return;
    }
    if (a[0] == b[0]) {
        prefix[plen] = a[0];
        uint_same_len(c, rule, prefix, plen + 1, a + 1, b + 1, n - 1);
        return;
    }
    char lo = a[0], hi = b[0];
    int a_zero = 1, b_nine = 1;
    for (int k = 1; k < n; k++) a_zero &= a[k] == '0', b_nine &= b[k] == '9';
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    if (!a_zero) {
        prefix[plen] = a[0];
        uint_same_len(c, rule, prefix, plen + 1, a + 1, nines, n - 1);
        lo++;
    }
    if (!b_nine) {
        prefix[plen] = b[0];
        uint_same_len(c, rule, prefix, plen + 1, zeros, b + 1, n - 1);
        hi--;
    }
    if (lo <= hi) {
        xg_seq s = {0};
        xg_seq_lit(c->b, &s, prefix, (size_t)plen);
        range_set(c->b, &s, lo, hi);
        if (n > 1) digits(c, &s, n - 1, n - 1);
        xg_add_alt(c->b, rule, &s);
        xg_seq_free(&s);
    }
}

/* alternatives for the decimal forms of [a, b], 0 <= a <= b */
static void uint_range(jc *c, int rule, long long a, long long b) {
    char sa[24], sb[24], prefix[24];
    for (;;) {
        int na = snprintf(sa, sizeof sa, "%lld", a);
        long long top = 9;
        for (int k = 1; k < na; k++) top = top * 10 + 9;
        const long long end = b < top ? b : top;
        snprintf(sb, sizeof sb, "%lld", end);
        uint_same_len(c, rule, prefix, 0, sa, sb, na);
        if (end == b) break;
        a = end + 1;
    }
}

static int int_range_rule(jc *c, long long lo, long long hi) {
    int r = xg_rule_new(c->b);
    if (lo < 0) { /* -m for m in [max(1, -hi), -lo] */
        int neg = xg_rule_new(c->b);
        uint_range(c, neg, hi < 0 ? -hi : 1, -lo);
        xg_seq s = {0};
        lit(c, &s, "-");
        xg_seq_ref(c->b, &s, neg);
        xg_add_alt(c->b, r, &s);
        xg_seq_free(&s);
    }
    if (hi >= 0) uint_range(c, r, lo > 0 ? lo : 0, hi);
    return r;
}

/* ---- schemas ---- */

static int schema_rule(jc *c, json_t *s);

/* string ws ":" ws value */
static void pair(jc *c, xg_seq *s, int value) {
    xg_seq_ref(c->b, s, string_rule(c, 0, -1));
    ws(c, s);
    lit(c, s, ":");
    ws(c, s);
    xg_seq_ref(c->b, s, value);
}

static int value_rule(jc *c) {
    if (c->value >= 0) return c->value;
    c->value = xg_rule_new(c->b);
    const int v = c->value;
    /* object ::= "{" ws ( member ( ws "," ws member )* )? ws "}" ; member ::= string ws ":" ws value */
    xg_seq s = {0}, m = {0};
    pair(c, &m, v);
    int member = xg_wrap(c->b, &m);
    m.n = 0;
    ws(c, &m);
    lit(c, &m, ",");
    ws(c, &m);
    xg_seq_ref(c->b, &m, member);
    int more = xg_rep(c->b, &m, 0, -1);
    m.n = 0;
    xg_seq_ref(c->b, &m, member);
    xg_seq_ref(c->b, &m, more);
    int members = xg_wrap(c->b, &m);
    m.n = 0;
    xg_seq_ref(c->b, &m, members);
    int opt = xg_rep(c->b, &m, 0, 1);
    lit(c, &s, "{");
    ws(c, &s);
    xg_seq_ref(c->b, &s, opt);
    ws(c, &s);
    lit(c, &s, "}");
    xg_add_alt(c->b, v, &s);
    /* array ::= "[" ws ( value ( ws "," ws value )* )? ws "]" */
    m.n = 0;
    ws(c, &m);
    lit(c, &m, ",");
    ws(c, &m);
    xg_seq_ref(c->b, &m, v);
    more = xg_rep(c->b, &m, 0, -1);
    m.n = 0;
    xg_seq_ref(c->b, &m, v);
    xg_seq_ref(c->b, &m, more);
    int items = xg_wrap(c->b, &m);
    m.n = 0;
    xg_seq_ref(c->b, &m, items);
    opt = xg_rep(c->b, &m, 0, 1);
    s.n = 0;
    lit(c, &s, "[");
    ws(c, &s);
    xg_seq_ref(c->b, &s, opt);
    ws(c, &s);
    lit(c, &s, "]");
    xg_add_alt(c->b, v, &s);
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        s.n = 0;
        lit(c, &s, words[k]);
        xg_add_alt(c->b, v, &s);
    }
    s.n = 0;
    xg_seq_ref(c->b, &s, string_rule(c, 0, -1));
    xg_add_alt(c->b, v, &s);
    s.n = 0;
    xg_seq_ref(c->b, &s, number_rule(c));
    xg_add_alt(c->b, v, &s);
    xg_seq_free(&s);
    xg_seq_free(&m);
    return v;
}

static void jc_init(jc *c, xg_build *b) {
    memset(c, 0, sizeof *c);
    c->b = b;
    c->ws = c->value = c->string = c->number = c->integer = -1;
}

static void jc_free(jc *c) {
    for (int i = 0; i < c->n_refs; i++) free(c->refs[i].path);
    free(c->refs);
}

int xg_compile_json_object(xg_build *b) {
    jc c;
    jc_init(&c, b);
    const int v = value_rule(&c);
    /* root ::= ws object: the value rule's first alternative is the object */
    xg_seq s = {0};
    ws(&c, &s);
    const xg_seq *obj = b->failed ? NULL : &b->rules[v].alts[0];
    if (obj) xg_seq_append(b, &s, obj);
    int r = b->failed ? -1 : xg_wrap(b, &s);
    xg_seq_free(&s);
    jc_free(&c);
    return r;
}

int xg_compile_choice(xg_build *b, const char *src, size_t len) {
    json_error_t je;
    json_t *a = json_loadb(src, len, 0, &je);
    if (!json_is_array(a) || !json_array_size(a)) {
        json_decref(a);
        return xg_fail(b, "choice: expected a non-empty array of strings");
    }
    int r = xg_rule_new(b);
    size_t i;
    json_t *v;
    xg_seq s = {0};
    json_array_foreach(a, i, v) {
        if (!json_is_string(v)) {
            xg_fail(b, "choice: item %zu is not a string", i);
            break;
        }
        s.n = 0;
        xg_seq_lit(b, &s, json_string_value(v), json_string_length(v));
        xg_add_alt(b, r, &s);
    }
    xg_seq_free(&s);
    json_decref(a);
    return b->failed ? -1 : r;
}

static int unsupported(jc *c, const char *kw) {
    return xg_fail(c->b, "json_schema: unsupported keyword '%s'", kw);
}

static int is_annotation(const char *k) {
    static const char *const ann[] = {"title", "description", "$schema", "$id", "$comment", "default",
                                      "examples", "deprecated", "readOnly", "writeOnly", "$defs",
                                      "definitions", "strict", "name", "id"};
    for (size_t i = 0; i < sizeof ann / sizeof ann[0]; i++)
        if (!strcmp(k, ann[i])) return 1;
    return 0;
}

static json_t *resolve(jc *c, const char *ref) {
    if (ref[0] != '#') return NULL;
    json_t *cur = c->doc;
    const char *p = ref + 1;
    while (*p == '/' && cur) {
        p++;
        char key[256];
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof key) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) key[k++] = p[1] == '0' ? '~' : '/', p += 2;
            else key[k++] = *p++;
        }
        key[k] = 0;
        cur = json_is_array(cur) ? json_array_get(cur, (size_t)strtoul(key, NULL, 10)) : json_object_get(cur, key);
    }
    return *p ? NULL : cur;
}

static int ref_rule(jc *c, const char *ref) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].path, ref)) return c->refs[i].rule;
    json_t *target = resolve(c, ref);
    if (!target) return xg_fail(c->b, "json_schema: $ref '%s' does not resolve (only local '#/...' references)", ref);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        jref *v = realloc(c->refs, (size_t)cap * sizeof *v);
        if (!v) return xg_fail(c->b, "json_schema: out of memory");
        c->refs = v;
        c->cap_refs = cap;
    }
    int r = xg_rule_new(c->b);
    char *path = strdup(ref);
    if (!path || r < 0) return free(path), xg_fail(c->b, "json_schema: out of memory");
    c->refs[c->n_refs++] = (jref){path, r};
    int t = schema_rule(c, target);
    xg_seq s = {0};
    xg_seq_ref(c->b, &s, t);
    xg_add_alt(c->b, r, &s);
    xg_seq_free(&s);
    return c->b->failed ? -1 : r;
}

static int literal_rule(jc *c, json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return xg_fail(c->b, "json_schema: out of memory");
    int r = rule_of_lit(c, t);
    free(t);
    return r;
}

static int object_rule(jc *c, json_t *s) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return xg_fail(c->b, "json_schema: 'properties' must be an object");
    if (req && !json_is_array(req)) return xg_fail(c->b, "json_schema: 'required' must be an array");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return xg_fail(c->b, "json_schema: 'additionalProperties' must be a boolean or a schema");
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v) if (!json_is_string(v) || !json_object_get(props, json_string_value(v)))
        return xg_fail(c->b, "json_schema: required property %s is not in 'properties'",
                       json_is_string(v) ? json_string_value(v) : "(not a string)");
    /* extra pairs: none with properties unless allowed; any without properties unless forbidden */
    int extra = -1;
    if (json_is_object(addl)) extra = schema_rule(c, addl);
    else if (json_is_true(addl) || (!props && !json_is_false(addl))) extra = value_rule(c);
    const size_t k = json_object_size(props);
    /* tail[i][first]: properties i.. with `first` meaning no comma is owed yet */
    int tail[2] = {-1, -1};
    xg_seq a = {0};
    for (int f = 0; f < 2; f++) {
        tail[f] = xg_rule_new(c->b);
        a.n = 0;
        if (extra >= 0) { /* ((sep)? pair (sep pair)*)? */
            xg_seq kv = {0}, sep = {0};
            pair(c, &kv, extra);
            ws(c, &sep);
            lit(c, &sep, ",");
            ws(c, &sep);
            xg_seq sp = {0};
            xg_seq_append(c->b, &sp, &sep);
            xg_seq_append(c->b, &sp, &kv);
            int more = xg_rep(c->b, &sp, 0, -1);
            xg_seq one = {0};
            if (!f) xg_seq_append(c->b, &one, &sep);
            xg_seq_append(c->b, &one, &kv);
            xg_seq_ref(c->b, &one, more);
            int some = xg_wrap(c->b, &one);
            one.n = 0;
            xg_seq_ref(c->b, &one, some);
            xg_seq_ref(c->b, &a, xg_rep(c->b, &one, 0, 1));
            xg_seq_free(&kv);
            xg_seq_free(&sep);
            xg_seq_free(&sp);
            xg_seq_free(&one);
        }
        xg_add_alt(c->b, tail[f], &a);
    }
    const char **keys = calloc(k + 1, sizeof *keys);
    json_t **vals = calloc(k + 1, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        xg_seq_free(&a);
        return xg_fail(c->b, "json_schema: out of memory");
    }
    size_t n = 0;
    const char *key;
    json_object_foreach(props, key, v) keys[n] = key, vals[n++] = v;
    for (size_t p = n; p-- > 0 && !c->b->failed;) {
        int required = 0;
        json_array_foreach(req, i, v) required |= !strcmp(json_string_value(v), keys[p]);
        json_t *ks = json_string(keys[p]);
        char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (!kt) {
            xg_fail(c->b, "json_schema: out of memory");
            break;
        }
        const int val = schema_rule(c, vals[p]);
        int nt[2];
        for (int f = 0; f < 2; f++) {
            nt[f] = xg_rule_new(c->b);
            a.n = 0;
            if (!f) {
                ws(c, &a);
                lit(c, &a, ",");
                ws(c, &a);
            }
            lit(c, &a, kt);
            ws(c, &a);
            lit(c, &a, ":");
            ws(c, &a);
            xg_seq_ref(c->b, &a, val);
            xg_seq_ref(c->b, &a, tail[0]);
            xg_add_alt(c->b, nt[f], &a);
            if (!required) {
                a.n = 0;
                xg_seq_ref(c->b, &a, tail[f]);
                xg_add_alt(c->b, nt[f], &a);
            }
        }
        free(kt);
        tail[0] = nt[0];
        tail[1] = nt[1];
    }
    free(keys);
    free(vals);
    a.n = 0;
    lit(c, &a, "{");
    ws(c, &a);
    xg_seq_ref(c->b, &a, tail[1]);
    ws(c, &a);
    lit(c, &a, "}");
    int r = xg_wrap(c->b, &a);
    xg_seq_free(&a);
    return r;
}

static int get_count(jc *c, json_t *s, const char *kw, int dflt) {
    json_t *v = json_object_get(s, kw);
    if (!v) return dflt;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 10000)
        return xg_fail(c->b, "json_schema: '%s' must be an integer in 0..10000", kw), dflt;
    return (int)json_integer_value(v);
}

static int array_rule(jc *c, json_t *s) {
    json_t *items = json_object_get(s, "items");
    if (items && !json_is_object(items) && !json_is_boolean(items)) return unsupported(c, "items (as an array)");
    if (json_is_true(json_object_get(s, "uniqueItems"))) return unsupported(c, "uniqueItems");
    const int min = get_count(c, s, "minItems", 0), max = get_count(c, s, "maxItems", -1);
    if (max >= 0 && max < min) return xg_fail(c->b, "json_schema: maxItems is below minItems");
    xg_seq a = {0};
    lit(c, &a, "[");
    ws(c, &a);
    if (max != 0) {
        const int it = items && !json_is_true(items) ? schema_rule(c, items) : value_rule(c);
        xg_seq more = {0}, first = {0};
        ws(c, &more);
        lit(c, &more, ",");
        ws(c, &more);
        xg_seq_ref(c->b, &more, it);
        xg_seq_ref(c->b, &first, it);
        xg_seq_ref(c->b, &first, xg_rep(c->b, &more, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1));
        if (min > 0) xg_seq_append(c->b, &a, &first);
        else xg_seq_ref(c->b, &a, xg_rep(c->b, &first, 0, 1));
        xg_seq_free(&more);
        xg_seq_free(&first);
    }
    ws(c, &a);
    lit(c, &a, "]");
    int r = xg_wrap(c->b, &a);
    xg_seq_free(&a);
    return r;
}

static int string_schema(jc *c, json_t *s) {
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    const int min = get_count(c, s, "minLength", 0), max = get_count(c, s, "maxLength", -1);
    if (max >= 0 && max < min) return xg_fail(c->b, "json_schema: maxLength is below minLength");
    static const char *const formats[][2] = {
        {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"},
        {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
        {"date-time", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
        {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
        {"email", "[A-Za-z0-9._%+-]{1,32}@[A-Za-z0-9-]{1,32}(\\.[A-Za-z0-9-]{1,16}){1,3}"},
    };
    const char *re = NULL;
    if (fmt) {
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (json_is_string(fmt) && !strcmp(json_string_value(fmt), formats[i][0])) re = formats[i][1];
        if (!re) return xg_fail(c->b, "json_schema: unsupported keyword 'format' (%s)", json_is_string(fmt) ? json_string_value(fmt) : "?");
        if (pat) return unsupported(c, "pattern (with format)");
    }
    if (pat) {
        if (!json_is_string(pat)) return xg_fail(c->b, "json_schema: 'pattern' must be a string");
        re = json_string_value(pat);
    }
    if (!re) return string_rule(c, min, max);
    if (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
        return unsupported(c, "minLength/maxLength (with pattern or format)");
    int body = xg_compile_regex(c->b, re, strlen(re), 1);
    xg_seq a = {0};
    lit(c, &a, "\"");
    xg_seq_ref(c->b, &a, body);
    lit(c, &a, "\"");
    int r = body < 0 ? -1 : xg_wrap(c->b, &a);
    xg_seq_free(&a);
    return r;
}

/* the bound keyword's value as a whole number for an integer range */
static int bound(jc *c, json_t *s, const char *kw, int upper, long long *out) {
    json_t *v = json_object_get(s, kw);
    if (!v) return 0;
    if (!json_is_number(v)) return xg_fail(c->b, "json_schema: '%s' must be a number", kw);
    double x = json_number_value(v);
    const int excl = !strncmp(kw, "exclusive", 9);
    if (fabs(x) > (double)XG_JSON_MAX_INT) return xg_fail(c->b, "json_schema: '%s' is beyond 15 digits", kw);
    double y = upper ? floor(x) : ceil(x);
    if (excl && y == x) y += upper ? -1 : 1;
    long long b = (long long)y;
    if (upper ? b < *out : b > *out) *out = b;
    return 1;
}

static int integer_schema(jc *c, json_t *s) {
    if (json_object_get(s, "multipleOf")) return unsupported(c, "multipleOf");
    long long lo = -XG_JSON_MAX_INT, hi = XG_JSON_MAX_INT;
    bound(c, s, "minimum", 0, &lo);
    bound(c, s, "exclusiveMinimum", 0, &lo);
    bound(c, s, "maximum", 1, &hi);
    bound(c, s, "exclusiveMaximum", 1, &hi);
    if (c->b->failed) return -1;
    if (lo > hi) return xg_fail(c->b, "json_schema: the integer range is empty");
    return int_range_rule(c, lo, hi);
}

static int number_schema(jc *c, json_t *s) {
    if (json_object_get(s, "multipleOf")) return unsupported(c, "multipleOf");
    if (json_object_get(s, "exclusiveMinimum")) return unsupported(c, "exclusiveMinimum (on a number)");
    if (json_object_get(s, "exclusiveMaximum")) return unsupported(c, "exclusiveMaximum (on a number)");
    json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    if (!mn && !mx) return number_rule(c);
    /* whole-number bounds with the minimum at 0 or above: k.frac for k in [lo, hi-1], or hi
     * itself (with zeros after the point) */
    if (!mn || !json_is_number(mn) || json_number_value(mn) < 0 || json_number_value(mn) != floor(json_number_value(mn)))
        return unsupported(c, "minimum (on a number: only whole numbers >= 0 are supported)");
    if (mx && (!json_is_number(mx) || json_number_value(mx) != floor(json_number_value(mx))))
        return unsupported(c, "maximum (on a number: only whole numbers are supported)");
    long long lo = -XG_JSON_MAX_INT, hi = XG_JSON_MAX_INT;
    bound(c, s, "minimum", 0, &lo);
    bound(c, s, "maximum", 1, &hi);
    if (c->b->failed) return -1;
    if (lo > hi) return xg_fail(c->b, "json_schema: the number range is empty");
    int r = xg_rule_new(c->b);
    xg_seq a = {0};
    if (lo < hi) {
        int ip = xg_rule_new(c->b);
        uint_range(c, ip, lo, hi - 1);
        xg_seq_ref(c->b, &a, ip);
        xg_seq_ref(c->b, &a, frac_rule(c));
        xg_add_alt(c->b, r, &a);
    }
    char top[24];
    snprintf(top, sizeof top, "%lld", hi);
    a.n = 0;
    lit(c, &a, top);
    xg_seq z = {0};
    lit(c, &z, ".");
    xg_seq zeros = {0};
    lit(c, &zeros, "0");
    xg_seq_ref(c->b, &z, xg_rep(c->b, &zeros, 1, XG_JSON_DIGITS));
    xg_seq_ref(c->b, &a, xg_rep(c->b, &z, 0, 1));
    xg_add_alt(c->b, r, &a);
    xg_seq_free(&a);
    xg_seq_free(&z);
    xg_seq_free(&zeros);
    return r;
}

static int type_rule(jc *c, json_t *s, const char *type) {
    if (!strcmp(type, "object")) return object_rule(c, s);
    if (!strcmp(type, "array")) return array_rule(c, s);
    if (!strcmp(type, "string")) return string_schema(c, s);
    if (!strcmp(type, "integer")) return integer_schema(c, s);
    if (!strcmp(type, "number")) return number_schema(c, s);
    if (!strcmp(type, "boolean")) {
        int r = rule_of_lit(c, "true");
        xg_seq a = {0};
        lit(c, &a, "false");
        xg_add_alt(c->b, r, &a);
        xg_seq_free(&a);
        return r;
    }
    if (!strcmp(type, "null")) return rule_of_lit(c, "null");
    return xg_fail(c->b, "json_schema: unknown type '%s'", type);
}

/* keywords each type honours (any other non-annotation keyword is an error) */
static int known_keyword(const char *k) {
    static const char *const kws[] = {"type", "properties", "required", "additionalProperties", "items",
                                      "minItems", "maxItems", "uniqueItems", "minLength", "maxLength",
                                      "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                      "exclusiveMaximum", "enum", "const", "anyOf", "oneOf", "allOf",
                                      "$ref", "multipleOf"};
    for (size_t i = 0; i < sizeof kws / sizeof kws[0]; i++)
        if (!strcmp(k, kws[i])) return 1;
    return 0;
}

static int alts_rule(jc *c, json_t *list, const char *kw) {
    if (!json_is_array(list) || !json_array_size(list)) return xg_fail(c->b, "json_schema: '%s' must be a non-empty array", kw);
    int r = xg_rule_new(c->b);
    size_t i;
    json_t *v;
    xg_seq a = {0};
    json_array_foreach(list, i, v) {
        a.n = 0;
        xg_seq_ref(c->b, &a, !strcmp(kw, "enum") ? literal_rule(c, v) : schema_rule(c, v));
        xg_add_alt(c->b, r, &a);
    }
    xg_seq_free(&a);
    return c->b->failed ? -1 : r;
}

static int schema_rule(jc *c, json_t *s) {
    if (c->b->failed) return -1;
    if (json_is_true(s)) return value_rule(c);
    if (!json_is_object(s)) return xg_fail(c->b, "json_schema: a schema must be an object or true");
    if (++c->depth > 64) return xg_fail(c->b, "json_schema: nested deeper than 64");
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v) if (!known_keyword(key) && !is_annotation(key)) return unsupported(c, key);
    int r;
    json_t *type = json_object_get(s, "type");
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v)) return xg_fail(c->b, "json_schema: '$ref' must be a string");
        r = ref_rule(c, json_string_value(v));
    } else if ((v = json_object_get(s, "const"))) r = literal_rule(c, v);
    else if ((v = json_object_get(s, "enum"))) r = alts_rule(c, v, "enum");
    else if ((v = json_object_get(s, "anyOf"))) r = alts_rule(c, v, "anyOf");
    else if ((v = json_object_get(s, "oneOf"))) r = alts_rule(c, v, "oneOf");
    else if ((v = json_object_get(s, "allOf"))) {
        if (!json_is_array(v) || json_array_size(v) != 1) return unsupported(c, "allOf (with more than one schema)");
        r = schema_rule(c, json_array_get(v, 0));
    } else if (json_is_string(type)) r = type_rule(c, s, json_string_value(type));
    else if (json_is_array(type)) {
        r = xg_rule_new(c->b);
        size_t i;
        json_t *t;
        xg_seq a = {0};
        json_array_foreach(type, i, t) {
            a.n = 0;
            if (!json_is_string(t)) {
                xg_fail(c->b, "json_schema: 'type' must be a string or an array of strings");
                break;
            }
            xg_seq_ref(c->b, &a, type_rule(c, s, json_string_value(t)));
            xg_add_alt(c->b, r, &a);
        }
        xg_seq_free(&a);
    } else if (type) return xg_fail(c->b, "json_schema: 'type' must be a string or an array of strings");
    else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties")) r = object_rule(c, s);
    else if (json_object_get(s, "items")) r = array_rule(c, s);
    else r = value_rule(c);
    /* a keyword combined with $ref/const/enum/anyOf would be ignored: refuse it */
    if (!c->b->failed && !type && (json_object_get(s, "$ref") || json_object_get(s, "const") ||
                                   json_object_get(s, "enum") || json_object_get(s, "anyOf") ||
                                   json_object_get(s, "oneOf") || json_object_get(s, "allOf"))) {
        int n = 0;
        json_object_foreach(s, key, v) n += !is_annotation(key);
        if (n > 1) return xg_fail(c->b, "json_schema: combining $ref, const, enum, anyOf, oneOf or allOf with other keywords is not supported");
    }
    c->depth--;
    return c->b->failed ? -1 : r;
}

int xg_compile_json_schema(xg_build *b, const char *src, size_t len) {
    json_error_t je;
    json_t *doc = json_loadb(src, len, 0, &je);
    if (!doc) return xg_fail(b, "json_schema: not valid JSON: %s", je.text);
    jc c;
    jc_init(&c, b);
    c.doc = doc;
    int r = schema_rule(&c, doc);
    jc_free(&c);
    json_decref(doc);
    return b->failed ? -1 : r;
}
