/* jinja_value: the render arena, values with Python semantics (truth, equality, str, repr),
 * conversion from JSON and json.dumps-compatible serialisation. */
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/jinja.h"

/* ==== arena ============================================================================= */

struct jarena_chunk {
    jarena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

static _Atomic size_t shared_in_use, shared_budget = (size_t)1 << 30;

void xi_jinja_set_shared_budget(size_t bytes) { atomic_store(&shared_budget, bytes); }
size_t xi_jinja_shared_in_use(void) { return atomic_load(&shared_in_use); }

void ja_init(jarena *a, size_t limit) {
    a->head = NULL;
    a->total = 0;
    a->limit = limit;
    a->shared = a->shared_full = 0;
}

void ja_free(jarena *a) {
    for (jarena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        if (a->shared) atomic_fetch_sub(&shared_in_use, c->size);
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (n > a->limit || a->total > a->limit - n) return NULL;
    jarena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        /* Chunks grow with the arena so a big render needs few mallocs. */
        size_t size = a->total < (1u << 20) ? 64u << 10 : 1u << 20;
        if (size < n) size = n;
        if (a->shared && atomic_fetch_add(&shared_in_use, size) + size > atomic_load(&shared_budget)) {
            atomic_fetch_sub(&shared_in_use, size);
            a->shared_full = 1;
            return NULL;
        }
        c = malloc(sizeof *c + size);
        if (!c) {
            if (a->shared) atomic_fetch_sub(&shared_in_use, size);
            return NULL;
        }
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->total += n;
    return p;
}

/* ==== errors and allocation inside a render ============================================= */

void jerr(jctx *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->line > 0) xi_errf(c->err, c->errlen, "chat template line %d: %s", c->line, msg);
    else xi_errf(c->err, c->errlen, "chat template: %s", msg);
    longjmp(c->jb, 1);
}

void *jalloc(jctx *c, size_t n) {
    void *p = ja_alloc(&c->ar, n);
    if (!p && c->ar.shared_full)
        jerr(c, "the renders in progress on this server hold all of their %zu MiB; retry later",
             atomic_load(&shared_budget) >> 20);
    if (!p) jerr(c, "render needs more than %zu bytes of memory", c->lim.max_memory);
    return p;
}

jstr *jstr_new(jctx *c, const char *s, size_t len) {
    if (len > c->lim.max_output) jerr(c, "a string of %zu bytes exceeds the limit", len);
    jstr *r = jalloc(c, sizeof *r + len + 1);
    r->len = len;
    if (len) memcpy(r->s, s, len);
    r->s[len] = 0;
    return r;
}

jv jv_str(jctx *c, const char *s, size_t len) {
    jv v = {.t = JV_STR};
    v.u.s = jstr_new(c, s, len);
    return v;
}

jv jv_strz(jctx *c, const char *s) { return jv_str(c, s, strlen(s)); }

jv jv_list(jctx *c, int cap) {
    jv v = {.t = JV_LIST};
    v.u.l = jalloc(c, sizeof *v.u.l);
    v.u.l->n = 0;
    v.u.l->tuple = 0;
    v.u.l->cap = cap > 0 ? cap : 4;
    v.u.l->items = jalloc(c, (size_t)v.u.l->cap * sizeof(jv));
    return v;
}

void jlist_push(jctx *c, jv list, jv item) {
    jlist *l = list.u.l;
    if (l->n == l->cap) {
        if (l->cap > (1 << 26)) jerr(c, "list too long");
        jv *items = jalloc(c, (size_t)l->cap * 2 * sizeof(jv));
        memcpy(items, l->items, (size_t)l->n * sizeof(jv));
        l->items = items;
        l->cap *= 2;
    }
    l->items[l->n++] = item;
}

jv jv_dict(jctx *c, int cap) {
    jv v = {.t = JV_DICT};
    v.u.d = jalloc(c, sizeof *v.u.d);
    v.u.d->n = 0;
    v.u.d->cap = cap > 0 ? cap : 4;
    v.u.d->keys = jalloc(c, (size_t)v.u.d->cap * sizeof(jstr *));
    v.u.d->vals = jalloc(c, (size_t)v.u.d->cap * sizeof(jv));
    return v;
}

jv *jdict_get(const jdict *d, const char *key, size_t len) {
    /* Linear: template dicts (messages, tool schemas) are small. */
    for (int i = 0; i < d->n; i++)
        if (d->keys[i]->len == len && memcmp(d->keys[i]->s, key, len) == 0) return &d->vals[i];
    return NULL;
}

void jdict_set(jctx *c, jdict *d, jstr *key, jv val) {
    jv *old = jdict_get(d, key->s, key->len);
    if (old) {
        *old = val;
        return;
    }
    if (d->n == d->cap) {
        if (d->cap > (1 << 24)) jerr(c, "dict too large");
        jstr **keys = jalloc(c, (size_t)d->cap * 2 * sizeof *keys);
        jv *vals = jalloc(c, (size_t)d->cap * 2 * sizeof *vals);
        memcpy(keys, d->keys, (size_t)d->n * sizeof *keys);
        memcpy(vals, d->vals, (size_t)d->n * sizeof *vals);
        d->keys = keys;
        d->vals = vals;
        d->cap *= 2;
    }
    d->keys[d->n] = key;
    d->vals[d->n++] = val;
}

jv jv_from_json(jctx *c, const json_t *j, int depth) {
    if (depth > 256) jerr(c, "input JSON nested deeper than 256");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = jv_dict(c, (int)json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v)
            jdict_set(c, d.u.d, jstr_new(c, k, strlen(k)), jv_from_json(c, v, depth + 1));
        return d;
    }
    case JSON_ARRAY: {
        jv l = jv_list(c, (int)json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++)
            jlist_push(c, l, jv_from_json(c, json_array_get(j, i), depth + 1));
        return l;
    }
    case JSON_STRING: return jv_str(c, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int(json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(1);
    case JSON_FALSE: return jv_bool(0);
    default: return jv_none();
    }
}

/* ==== Python semantics ================================================================== */

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s->len > 0;
    case JV_LIST: return v.u.l->n > 0;
    case JV_DICT: return v.u.d->n > 0;
    default: return 1;
    }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num_f(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }

int jv_equal(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return (a.t == JV_INT ? a.u.i : a.u.b) == (b.t == JV_INT ? b.u.i : b.u.b);
        return num_f(a) == num_f(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
        for (int i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->items[i], b.u.l->items[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (int i = 0; i < a.u.d->n; i++) {
            jv *o = jdict_get(b.u.d, a.u.d->keys[i]->s, a.u.d->keys[i]->len);
            if (!o || !jv_equal(a.u.d->vals[i], *o)) return 0;
        }
        return 1;
    case JV_NS: return a.u.d == b.u.d;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return 0;
    }
}

const char *jv_type_name(jv v) {
    static const char *names[] = {"Undefined", "NoneType", "bool", "int", "float", "str",
                                  "list", "dict", "Namespace", "function", "LoopContext"};
    return names[v.t];
}

/* ==== text output ======================================================================= */

void jbuf_put(jctx *c, jbuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (b->len + n > c->lim.max_output)
        jerr(c, "output exceeds the limit of %zu bytes", c->lim.max_output);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = jalloc(c, cap);
        if (b->len) memcpy(d, b->data, b->len);
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void jbuf_putz(jctx *c, jbuf *b, const char *s) { jbuf_put(c, b, s, strlen(s)); }

void jfloat_repr(double f, char *out, size_t n) {
    if (isnan(f)) { snprintf(out, n, "nan"); return; }
    if (isinf(f)) { snprintf(out, n, f < 0 ? "-inf" : "inf"); return; }
    /* Shortest digits that round-trip, laid out as Python's repr: fixed notation for
     * decimal exponents in [-4, 16), scientific with a two-digit exponent otherwise. */
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    const char *p = buf;
    int neg = *p == '-';
    if (neg) p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char res[64];
    size_t k = 0;
    if (neg) res[k++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) res[k++] = i < nd ? digits[i] : '0';
            res[k++] = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++) res[k++] = digits[i];
            else
                res[k++] = '0';
        } else {
            res[k++] = '0';
            res[k++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) res[k++] = '0';
            for (int i = 0; i < nd; i++) res[k++] = digits[i];
        }
        res[k] = 0;
    } else {
        res[k++] = digits[0];
        if (nd > 1) {
            res[k++] = '.';
            for (int i = 1; i < nd; i++) res[k++] = digits[i];
        }
        snprintf(res + k, sizeof res - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(out, n, "%s", res);
}

void jv_write_str(jctx *c, jbuf *b, jv v) {
    char num[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_putz(c, b, "None"); return;
    case JV_BOOL: jbuf_putz(c, b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); jbuf_putz(c, b, num); return;
    case JV_FLOAT: jfloat_repr(v.u.f, num, sizeof num); jbuf_putz(c, b, num); return;
    case JV_STR: jbuf_put(c, b, v.u.s->s, v.u.s->len); return;
    default: jv_write_repr(c, b, v, 0); return;
    }
}

static void write_str_repr(jctx *c, jbuf *b, const jstr *s) {
    char q = '\'';
    if (memchr(s->s, '\'', s->len) && !memchr(s->s, '"', s->len)) q = '"';
    jbuf_put(c, b, &q, 1);
    for (size_t i = 0; i < s->len; i++) {
        unsigned char ch = (unsigned char)s->s[i];
        char e[8];
        if (ch == '\\' || ch == (unsigned char)q) { e[0] = '\\'; e[1] = (char)ch; jbuf_put(c, b, e, 2); }
        else if (ch == '\n') jbuf_putz(c, b, "\\n");
        else if (ch == '\r') jbuf_putz(c, b, "\\r");
        else if (ch == '\t') jbuf_putz(c, b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) { snprintf(e, sizeof e, "\\x%02x", ch); jbuf_putz(c, b, e); }
        else jbuf_put(c, b, (const char *)&ch, 1);
    }
    jbuf_put(c, b, &q, 1);
}

void jv_write_repr(jctx *c, jbuf *b, jv v, int depth) {
    if (depth > 256) jerr(c, "value nested deeper than 256 (a namespace holding itself?)");
    switch (v.t) {
    case JV_STR: write_str_repr(c, b, v.u.s); return;
    case JV_LIST:
        jbuf_putz(c, b, v.u.l->tuple ? "(" : "[");
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_putz(c, b, ", ");
            jv_write_repr(c, b, v.u.l->items[i], depth + 1);
        }
        jbuf_putz(c, b, !v.u.l->tuple ? "]" : v.u.l->n == 1 ? ",)" : ")");
        return;
    case JV_DICT: case JV_NS:
        jbuf_putz(c, b, v.t == JV_NS ? "<Namespace {" : "{");
        for (int i = 0; i < v.u.d->n; i++) {
            if (i) jbuf_putz(c, b, ", ");
            write_str_repr(c, b, v.u.d->keys[i]);
            jbuf_putz(c, b, ": ");
            jv_write_repr(c, b, v.u.d->vals[i], depth + 1);
        }
        jbuf_putz(c, b, v.t == JV_NS ? "}>" : "}");
        return;
    case JV_FUNC:
        jbuf_putz(c, b, v.u.fn->fn || v.u.fn->macro ? "<function " : "<built-in method ");
        jbuf_putz(c, b, v.u.fn->name);
        jbuf_putz(c, b, v.u.fn->fn || v.u.fn->macro ? ">" : " of dict object>");
        return;
    case JV_LOOP: jbuf_putz(c, b, "<LoopContext>"); return;
    case JV_UNDEF: jbuf_putz(c, b, "Undefined"); return;
    default: jv_write_str(c, b, v); return;
    }
}

jv jv_to_str(jctx *c, jv v) {
    if (v.t == JV_STR) return v;
    jbuf b = {0};
    jv_write_str(c, &b, v);
    return jv_str(c, b.data ? b.data : "", b.len);
}

/* ==== json.dumps ======================================================================== */

/* Decode one UTF-8 sequence at s[*i] (len n); invalid bytes decode as U+FFFD. */
uint32_t jutf8_next(const unsigned char *s, size_t n, size_t *i) {
    unsigned char c0 = s[*i];
    int len = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || *i + (size_t)len > n) { (*i)++; return 0xfffd; }
    uint32_t cp = len == 1 ? c0 : c0 & (0x7f >> len);
    for (int k = 1; k < len; k++) {
        if ((s[*i + k] & 0xc0) != 0x80) { (*i)++; return 0xfffd; }
        cp = (cp << 6) | (s[*i + k] & 0x3f);
    }
    *i += len;
    return cp;
}

static void write_json_str(jctx *c, jbuf *b, const char *s, size_t n, int ensure_ascii) {
    jbuf_putz(c, b, "\"");
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        /* copy plain bytes in runs: what json.dumps leaves alone */
        while (run < n && u[run] >= 0x20 && u[run] != '"' && u[run] != '\\' &&
               (u[run] < 0x80 || !ensure_ascii))
            run++;
        jbuf_put(c, b, s + i, run - i);
        i = run;
        if (i >= n) break;
        char e[16];
        unsigned char ch = u[i];
        if (ch == '"') { jbuf_putz(c, b, "\\\""); i++; }
        else if (ch == '\\') { jbuf_putz(c, b, "\\\\"); i++; }
        else if (ch == '\n') { jbuf_putz(c, b, "\\n"); i++; }
        else if (ch == '\r') { jbuf_putz(c, b, "\\r"); i++; }
        else if (ch == '\t') { jbuf_putz(c, b, "\\t"); i++; }
        else if (ch == '\b') { jbuf_putz(c, b, "\\b"); i++; }
        else if (ch == '\f') { jbuf_putz(c, b, "\\f"); i++; }
        else if (ch < 0x20) { snprintf(e, sizeof e, "\\u%04x", ch); jbuf_putz(c, b, e); i++; }
        else {
            uint32_t cp = jutf8_next(u, n, &i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(e, sizeof e, "\\u%04x", cp);
            }
            jbuf_putz(c, b, e);
        }
    }
    jbuf_putz(c, b, "\"");
}

static void json_newline(jctx *c, jbuf *b, const jjson_opts *o, int level) {
    jbuf_putz(c, b, "\n");
    for (int i = 0; i < level; i++) jbuf_putz(c, b, o->indent);
}

static int key_cmp(const void *pa, const void *pb) {
    const jstr *a = *(jstr *const *)pa, *b = *(jstr *const *)pb;
    int r = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return r ? r : (a->len > b->len) - (a->len < b->len);
}

void jv_write_json(jctx *c, jbuf *b, jv v, const jjson_opts *o, int level) {
    if (level > 256) jerr(c, "tojson: value nested deeper than 256");
    char num[64];
    switch (v.t) {
    case JV_NONE: jbuf_putz(c, b, "null"); return;
    case JV_BOOL: jbuf_putz(c, b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); jbuf_putz(c, b, num); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jbuf_putz(c, b, "NaN");
        else if (isinf(v.u.f)) jbuf_putz(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else { jfloat_repr(v.u.f, num, sizeof num); jbuf_putz(c, b, num); }
        return;
    case JV_STR: write_json_str(c, b, v.u.s->s, v.u.s->len, o->ensure_ascii); return;
    case JV_LIST:
        if (v.u.l->n == 0) { jbuf_putz(c, b, "[]"); return; }
        jbuf_putz(c, b, "[");
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_putz(c, b, o->item_sep);
            if (o->indent) json_newline(c, b, o, level + 1);
            jv_write_json(c, b, v.u.l->items[i], o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jbuf_putz(c, b, "]");
        return;
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (d->n == 0) { jbuf_putz(c, b, "{}"); return; }
        jstr **keys = d->keys;
        if (o->sort_keys) {
            keys = jalloc(c, (size_t)d->n * sizeof *keys);
            memcpy(keys, d->keys, (size_t)d->n * sizeof *keys);
            qsort(keys, (size_t)d->n, sizeof *keys, key_cmp);
        }
        jbuf_putz(c, b, "{");
        for (int i = 0; i < d->n; i++) {
            if (i) jbuf_putz(c, b, o->item_sep);
            if (o->indent) json_newline(c, b, o, level + 1);
            write_json_str(c, b, keys[i]->s, keys[i]->len, o->ensure_ascii);
            jbuf_putz(c, b, o->key_sep);
            jv_write_json(c, b, *jdict_get(d, keys[i]->s, keys[i]->len), o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jbuf_putz(c, b, "}");
        return;
    }
    default: jerr(c, "Object of type %s is not JSON serializable", jv_type_name(v));
    }
}
