/* jinja_lib: the filters, tests, str/dict methods and global functions chat templates use,
 * with the semantics of Jinja2 3.1 and Python's str (code-point indexing, Unicode whitespace,
 * case mapping through utf8proc). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "base/base.h"
#include "tokenizer/jinja.h"

/* ==== helpers =========================================================================== */

jv jarg(jargs *a, int i, const char *name) {
    if (i >= 0 && i < a->n) return a->pos[i];
    for (int k = 0; name && k < a->n_kw; k++)
        if (!strcmp(a->kw_names[k], name)) return a->kw[k];
    return jv_undef(name);
}

static int given(jv v) { return v.t != JV_UNDEF; }
static int is_intlike(jv v) { return v.t == JV_INT || v.t == JV_BOOL; }

static jstr *need_str(jctx *c, jv v, const char *what) {
    if (v.t != JV_STR) {
        if (v.t == JV_UNDEF) jerr(c, "'%s' is undefined", v.undef_name ? v.undef_name : "value");
        jerr(c, "%s: expected a string, got %s", what, jv_type_name(v));
    }
    return v.u.s;
}

static int64_t need_int(jctx *c, jv v, const char *what) {
    if (!is_intlike(v)) jerr(c, "%s: expected an integer, got %s", what, jv_type_name(v));
    return v.t == JV_INT ? v.u.i : v.u.b;
}

static jv buf_str(jctx *c, jbuf *b) { return jv_str(c, b->data ? b->data : "", b->len); }

int64_t jv_length(jctx *c, jv v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: {
        int64_t n = 0;
        for (size_t i = 0; i < v.u.s->len; i++) n += ((unsigned char)v.u.s->s[i] & 0xc0) != 0x80;
        return n;
    }
    case JV_LIST: return v.u.l->n;
    case JV_DICT: case JV_NS: return v.u.d->n;
    default: jerr(c, "object of type '%s' has no len()", jv_type_name(v));
    }
}

jv jv_iter_list(jctx *c, jv v) {
    if (v.t == JV_LIST) jinja_work(c, v.u.l->n);
    else if (v.t == JV_STR) jinja_work(c, (int64_t)v.u.s->len);
    switch (v.t) {
    case JV_LIST: return v;
    case JV_UNDEF: return jv_list(c, 0);
    case JV_DICT: {
        jv l = jv_list(c, v.u.d->n);
        for (int i = 0; i < v.u.d->n; i++) {
            jv k = {.t = JV_STR};
            k.u.s = v.u.d->keys[i];
            jlist_push(c, l, k);
        }
        return l;
    }
    case JV_STR: {
        jv l = jv_list(c, (int)v.u.s->len);
        const unsigned char *s = (const unsigned char *)v.u.s->s;
        for (size_t i = 0; i < v.u.s->len;) {
            size_t b = i;
            jutf8_next(s, v.u.s->len, &i);
            jlist_push(c, l, jv_str(c, v.u.s->s + b, i - b));
        }
        return l;
    }
    default: jerr(c, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* Python's str.isspace() code points. */
static int py_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* Does code point cp occur in chars (NULL: whitespace)? */
static int in_set(uint32_t cp, const jstr *chars) {
    if (!chars) return py_space(cp);
    const unsigned char *s = (const unsigned char *)chars->s;
    for (size_t i = 0; i < chars->len;)
        if (jutf8_next(s, chars->len, &i) == cp) return 1;
    return 0;
}

/* Start of the code point that ends before byte e. */
static size_t cp_back(const char *s, size_t e) {
    size_t b = e - 1;
    while (b > 0 && ((unsigned char)s[b] & 0xc0) == 0x80) b--;
    return b;
}

static jv strip(jctx *c, const jstr *s, const jstr *chars, int left, int right) {
    const unsigned char *u = (const unsigned char *)s->s;
    size_t b = 0, e = s->len;
    while (left && b < e) {
        size_t i = b;
        if (!in_set(jutf8_next(u, s->len, &i), chars)) break;
        b = i;
    }
    while (right && e > b) {
        size_t p = cp_back(s->s, e), i = p;
        if (!in_set(jutf8_next(u, s->len, &i), chars)) break;
        e = p;
    }
    return jv_str(c, s->s + b, e - b);
}

enum { CASE_LOWER, CASE_UPPER, CASE_CAPITALIZE, CASE_TITLE_WORDS, CASE_TITLE_PY };

/* Case mapping per code point. Title rules: Jinja's title filter starts a word after
 * whitespace, '-', '(', '{', '[' or '<'; Python's str.title after any uncased character. */
static jv recase(jctx *c, const jstr *s, int mode) {
    jbuf b = {0};
    const unsigned char *u = (const unsigned char *)s->s;
    int start = 1;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp = jutf8_next(u, s->len, &i);
        int up;
        switch (mode) {
        case CASE_LOWER: up = 0; break;
        case CASE_UPPER: up = 1; break;
        case CASE_CAPITALIZE: up = start; start = 0; break;
        default: up = start; break;
        }
        int32_t m = up ? utf8proc_toupper((int32_t)cp) : utf8proc_tolower((int32_t)cp);
        if (mode == CASE_TITLE_WORDS)
            start = py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        else if (mode == CASE_TITLE_PY) {
            int cat = utf8proc_category((int32_t)cp);
            start = !(cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                      cat == UTF8PROC_CATEGORY_LT);
        }
        unsigned char enc[4];
        jbuf_put(c, &b, (const char *)enc, (size_t)utf8proc_encode_char(m, enc));
    }
    return buf_str(c, &b);
}

/* Python's str.islower / str.isupper: at least one cased letter, none of the other case. */
static int case_is(const jstr *s, int upper) {
    const unsigned char *u = (const unsigned char *)s->s;
    int cased = 0;
    for (size_t i = 0; i < s->len;) {
        int cat = utf8proc_category((int32_t)jutf8_next(u, s->len, &i));
        if (cat == UTF8PROC_CATEGORY_LT) return 0;
        if (cat == (upper ? UTF8PROC_CATEGORY_LL : UTF8PROC_CATEGORY_LU)) return 0;
        cased |= cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL;
    }
    return cased;
}

static jv replace(jctx *c, const jstr *s, const jstr *old, const jstr *new_, int64_t count) {
    jbuf b = {0};
    size_t i = 0;
    if (old->len == 0) { /* Python inserts new between every character */
        const unsigned char *u = (const unsigned char *)s->s;
        while (count != 0) {
            jbuf_put(c, &b, new_->s, new_->len);
            count--;
            if (i >= s->len) break;
            size_t p = i;
            jutf8_next(u, s->len, &i);
            jbuf_put(c, &b, s->s + p, i - p);
        }
        jbuf_put(c, &b, s->s + i, s->len - i);
        return buf_str(c, &b);
    }
    while (count != 0) {
        const char *hit = memmem(s->s + i, s->len - i, old->s, old->len);
        if (!hit) break;
        size_t h = (size_t)(hit - s->s);
        jbuf_put(c, &b, s->s + i, h - i);
        jbuf_put(c, &b, new_->s, new_->len);
        i = h + old->len;
        count--;
    }
    jbuf_put(c, &b, s->s + i, s->len - i);
    return buf_str(c, &b);
}

/* Python str.split / str.rsplit. sep NULL: runs of whitespace, no empty pieces. */
static jv split(jctx *c, const jstr *s, const jstr *sep, int64_t maxsplit, int from_right) {
    if (sep && sep->len == 0) jerr(c, "split: empty separator");
    jv out = jv_list(c, 0);
    const unsigned char *u = (const unsigned char *)s->s;
    if (!from_right) {
        size_t i = 0;
        if (sep) {
            for (;;) {
                const char *hit = maxsplit != 0 ? memmem(s->s + i, s->len - i, sep->s, sep->len) : NULL;
                if (!hit) break;
                jlist_push(c, out, jv_str(c, s->s + i, (size_t)(hit - s->s) - i));
                i = (size_t)(hit - s->s) + sep->len;
                maxsplit--;
            }
            jlist_push(c, out, jv_str(c, s->s + i, s->len - i));
            return out;
        }
        for (;;) {
            while (i < s->len) { size_t p = i; if (!py_space(jutf8_next(u, s->len, &p))) break; i = p; }
            if (i >= s->len) break;
            if (maxsplit == 0) { /* the rest, trailing whitespace stripped */
                jv rest = strip(c, jstr_new(c, s->s + i, s->len - i), NULL, 0, 1);
                jlist_push(c, out, rest);
                break;
            }
            size_t b = i;
            while (i < s->len) { size_t p = i; if (py_space(jutf8_next(u, s->len, &p))) break; i = p; }
            jlist_push(c, out, jv_str(c, s->s + b, i - b));
            maxsplit--;
        }
        return out;
    }
    /* from the right: collect in reverse, then flip */
    size_t e = s->len;
    if (sep) {
        for (;;) {
            const char *hit = NULL;
            if (maxsplit != 0 && e >= sep->len)
                for (size_t p = e - sep->len + 1; p-- > 0;)
                    if (!memcmp(s->s + p, sep->s, sep->len)) { hit = s->s + p; break; }
            if (!hit) break;
            size_t h = (size_t)(hit - s->s);
            jlist_push(c, out, jv_str(c, s->s + h + sep->len, e - h - sep->len));
            e = h;
            maxsplit--;
        }
        jlist_push(c, out, jv_str(c, s->s, e));
    } else {
        for (;;) {
            while (e > 0) { size_t p = cp_back(s->s, e), q = p; if (!py_space(jutf8_next(u, s->len, &q))) break; e = p; }
            if (e == 0) break;
            if (maxsplit == 0) {
                jlist_push(c, out, strip(c, jstr_new(c, s->s, e), NULL, 1, 0));
                break;
            }
            size_t b = e;
            while (b > 0) { size_t p = cp_back(s->s, b), q = p; if (py_space(jutf8_next(u, s->len, &q))) break; b = p; }
            jlist_push(c, out, jv_str(c, s->s + b, e - b));
            e = b;
            maxsplit--;
        }
    }
    jlist *l = out.u.l;
    for (int i = 0; i < l->n / 2; i++) {
        jv t = l->items[i];
        l->items[i] = l->items[l->n - 1 - i];
        l->items[l->n - 1 - i] = t;
    }
    return out;
}

/* Attribute path "a.b.0" as Jinja's make_attrgetter resolves it. */
static jv attr_path(jctx *c, jv v, const jstr *path) {
    size_t b = 0;
    for (size_t i = 0; i <= path->len; i++) {
        if (i < path->len && path->s[i] != '.') continue;
        jstr *part = jstr_new(c, path->s + b, i - b);
        char *end;
        long long idx = strtoll(part->s, &end, 10);
        if (part->len && *end == 0) v = jinja_getitem(c, v, jv_int(idx));
        else {
            jv key = {.t = JV_STR};
            key.u.s = part;
            v = jinja_getitem(c, v, key);
        }
        b = i + 1;
    }
    return v;
}

/* Stable merge sort of items by keys (parallel arrays), ascending. */
static void sort_by_keys(jctx *c, jv *items, jv *keys, int n) {
    if (n < 2) return;
    jinja_work(c, (int64_t)n * 32); /* ~n log n */
    jv *ti = jalloc(c, (size_t)n * sizeof *ti), *tk = jalloc(c, (size_t)n * sizeof *tk);
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = XI_MIN(lo + w, n), hi = XI_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                if (jinja_order(c, keys[j], keys[i]) < 0) ti[k] = items[j], tk[k++] = keys[j++];
                else ti[k] = items[i], tk[k++] = keys[i++];
            }
            while (i < mid) ti[k] = items[i], tk[k++] = keys[i++];
            while (j < hi) ti[k] = items[j], tk[k++] = keys[j++];
        }
        memcpy(items, ti, (size_t)n * sizeof *ti);
        memcpy(keys, tk, (size_t)n * sizeof *tk);
    }
}

/* Sort/compare key: the attribute when given, lower-cased when case-insensitive. */
static jv sort_key(jctx *c, jv v, jv attribute, int case_sensitive) {
    if (given(attribute) && attribute.t != JV_NONE)
        v = attribute.t == JV_STR ? attr_path(c, v, attribute.u.s) : jinja_getitem(c, v, attribute);
    if (!case_sensitive && v.t == JV_STR) return recase(c, v.u.s, CASE_LOWER);
    return v;
}

jv jinja_percent_format(jctx *c, const jstr *fmt, jv args) {
    int n_args = 1;
    const jv *argv = &args;
    if (args.t == JV_LIST && args.u.l->tuple) n_args = args.u.l->n, argv = args.u.l->items;
    int used = 0;
    jbuf b = {0};
    for (size_t i = 0; i < fmt->len; i++) {
        if (fmt->s[i] != '%') {
            jbuf_put(c, &b, fmt->s + i, 1);
            continue;
        }
        /* %[flags][width][.precision]conv, the subset templates use */
        size_t j = i + 1;
        char spec[32] = "%";
        size_t k = 1;
        while (j < fmt->len && k < 20 && strchr("-+ 0#123456789.", fmt->s[j])) spec[k++] = fmt->s[j++];
        if (j >= fmt->len) jerr(c, "format: incomplete format");
        char conv = fmt->s[j];
        i = j;
        if (conv == '%') {
            jbuf_putz(c, &b, "%");
            continue;
        }
        if (used >= n_args) jerr(c, "format: not enough arguments for format string");
        jv v = argv[used++];
        char out[128];
        if (conv == 's' || conv == 'r') {
            jbuf tmp = {0};
            if (conv == 's') jv_write_str(c, &tmp, v);
            else jv_write_repr(c, &tmp, v, 0);
            spec[k++] = 's';
            spec[k] = 0;
            if (k == 2) jbuf_put(c, &b, tmp.data ? tmp.data : "", tmp.len);
            else {
                snprintf(out, sizeof out, spec, tmp.data ? tmp.data : "");
                jbuf_putz(c, &b, out);
            }
        } else if (strchr("dixXo", conv)) {
            if (!(v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT))
                jerr(c, "format: %%%c needs a number, not %s", conv, jv_type_name(v));
            long long x = v.t == JV_FLOAT ? (long long)v.u.f : v.t == JV_INT ? v.u.i : v.u.b;
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = conv == 'i' ? 'd' : conv;
            spec[k] = 0;
            snprintf(out, sizeof out, spec, x);
            jbuf_putz(c, &b, out);
        } else if (strchr("eEfFgG", conv)) {
            if (!(v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT))
                jerr(c, "format: %%%c needs a number, not %s", conv, jv_type_name(v));
            double x = v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b;
            spec[k++] = conv;
            spec[k] = 0;
            snprintf(out, sizeof out, spec, x);
            jbuf_putz(c, &b, out);
        } else {
            jerr(c, "format: unsupported format character '%c'", conv);
        }
    }
    if (used < n_args && !(n_args == 1 && (args.t == JV_DICT)))
        jerr(c, "format: not all arguments converted during string formatting");
    return buf_str(c, &b);
}

/* ==== filters =========================================================================== */

static jv f_abs(jctx *c, jv in, jargs *a) {
    (void)a;
    if (in.t == JV_FLOAT) return jv_float(fabs(in.u.f));
    int64_t i = need_int(c, in, "abs");
    if (i == INT64_MIN) jerr(c, "abs: integer overflow");
    return jv_int(i < 0 ? -i : i);
}

static jv f_attr(jctx *c, jv in, jargs *a) {
    return jinja_getattr(c, in, need_str(c, jarg(a, 0, "name"), "attr")->s);
}

static jv f_capitalize(jctx *c, jv in, jargs *a) {
    (void)a;
    return recase(c, jv_to_str(c, in).u.s, CASE_CAPITALIZE);
}

static jv f_default(jctx *c, jv in, jargs *a) {
    jv d = jarg(a, 0, "default_value");
    if (!given(d)) d = jv_strz(c, "");
    if (in.t == JV_UNDEF || (jv_truthy(jarg(a, 1, "boolean")) && !jv_truthy(in))) return d;
    return in;
}

static jv f_dictsort(jctx *c, jv in, jargs *a) {
    if (in.t != JV_DICT) jerr(c, "dictsort: expected a mapping, got %s", jv_type_name(in));
    int cs = jv_truthy(jarg(a, 0, "case_sensitive"));
    jv by = jarg(a, 1, "by");
    int by_value = given(by) && by.t == JV_STR && !strcmp(by.u.s->s, "value");
    int n = in.u.d->n;
    jv *items = jalloc(c, (size_t)(n + 1) * sizeof *items), *keys = jalloc(c, (size_t)(n + 1) * sizeof *keys);
    for (int i = 0; i < n; i++) {
        jv pair = jv_list(c, 2), k = {.t = JV_STR};
        pair.u.l->tuple = 1;
        k.u.s = in.u.d->keys[i];
        jlist_push(c, pair, k);
        jlist_push(c, pair, in.u.d->vals[i]);
        items[i] = pair;
        keys[i] = sort_key(c, by_value ? in.u.d->vals[i] : k, jv_undef(NULL), cs);
    }
    sort_by_keys(c, items, keys, n);
    jv out = jv_list(c, n);
    int rev = jv_truthy(jarg(a, 2, "reverse"));
    for (int i = 0; i < n; i++) jlist_push(c, out, items[rev ? n - 1 - i : i]);
    return out;
}

static jv f_escape(jctx *c, jv in, jargs *a) {
    (void)a;
    jstr *s = jv_to_str(c, in).u.s;
    jbuf b = {0};
    for (size_t i = 0; i < s->len; i++) {
        switch (s->s[i]) {
        case '&': jbuf_putz(c, &b, "&amp;"); break;
        case '<': jbuf_putz(c, &b, "&lt;"); break;
        case '>': jbuf_putz(c, &b, "&gt;"); break;
        case '"': jbuf_putz(c, &b, "&#34;"); break;
        case '\'': jbuf_putz(c, &b, "&#39;"); break;
        default: jbuf_put(c, &b, s->s + i, 1);
        }
    }
    return buf_str(c, &b);
}

static jv f_first(jctx *c, jv in, jargs *a) {
    (void)a;
    jv l = jv_iter_list(c, in);
    return l.u.l->n ? l.u.l->items[0] : jv_undef("first");
}

static jv f_last(jctx *c, jv in, jargs *a) {
    (void)a;
    jv l = jv_iter_list(c, in);
    return l.u.l->n ? l.u.l->items[l.u.l->n - 1] : jv_undef("last");
}

static jv f_float(jctx *c, jv in, jargs *a) {
    jv d = jarg(a, 0, "default");
    if (in.t == JV_FLOAT) return in;
    if (is_intlike(in)) return jv_float((double)need_int(c, in, "float"));
    if (in.t == JV_STR) {
        char *end;
        double f = strtod(in.u.s->s, &end);
        while (*end && py_space((unsigned char)*end)) end++;
        if (end != in.u.s->s && *end == 0) return jv_float(f);
    }
    return given(d) ? d : jv_float(0);
}

static jv f_int(jctx *c, jv in, jargs *a) {
    jv d = jarg(a, 0, "default");
    jv base = jarg(a, 1, "base");
    if (is_intlike(in)) return jv_int(need_int(c, in, "int"));
    if (in.t == JV_FLOAT) {
        if (!isfinite(in.u.f) || fabs(in.u.f) >= 9.2e18) return given(d) ? d : jv_int(0);
        return jv_int((int64_t)in.u.f);
    }
    if (in.t == JV_STR) {
        char *end;
        int b = given(base) ? (int)need_int(c, base, "int base") : 10;
        long long v = strtoll(in.u.s->s, &end, b);
        while (*end && py_space((unsigned char)*end)) end++;
        if (end != in.u.s->s && *end == 0) return jv_int(v);
        double f = strtod(in.u.s->s, &end); /* Jinja falls back to int(float(s)) */
        while (*end && py_space((unsigned char)*end)) end++;
        if (end != in.u.s->s && *end == 0 && isfinite(f) && fabs(f) < 9.2e18) return jv_int((int64_t)f);
    }
    return given(d) ? d : jv_int(0);
}

static jv f_format(jctx *c, jv in, jargs *a) {
    jv args = jv_list(c, a->n);
    args.u.l->tuple = 1;
    for (int i = 0; i < a->n; i++) jlist_push(c, args, a->pos[i]);
    return jinja_percent_format(c, need_str(c, in, "format"), args);
}

static jv f_indent(jctx *c, jv in, jargs *a) {
    jstr *s = jv_to_str(c, in).u.s;
    jv w = jarg(a, 0, "width");
    int first = jv_truthy(jarg(a, 1, "first")), blank = jv_truthy(jarg(a, 2, "blank"));
    jstr *pad;
    if (!given(w)) pad = jstr_new(c, "    ", 4);
    else if (w.t == JV_STR) pad = w.u.s;
    else {
        int64_t n = need_int(c, w, "indent width");
        if (n < 0 || n > 1024) jerr(c, "indent: width %lld out of range", (long long)n);
        char *sp = jalloc(c, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        pad = jstr_new(c, sp, (size_t)n);
    }
    jbuf b = {0};
    size_t i = 0;
    int line = 0;
    while (i <= s->len) {
        const char *nl = memchr(s->s + i, '\n', s->len - i);
        size_t e = nl ? (size_t)(nl - s->s) : s->len;
        int is_blank = 1;
        for (size_t k = i; k < e; k++) is_blank &= py_space((unsigned char)s->s[k]);
        if ((line > 0 || first) && (blank || !is_blank)) jbuf_put(c, &b, pad->s, pad->len);
        jbuf_put(c, &b, s->s + i, e - i);
        if (!nl) break;
        jbuf_putz(c, &b, "\n");
        i = e + 1;
        line++;
    }
    return buf_str(c, &b);
}

static jv f_items(jctx *c, jv in, jargs *a) {
    (void)a;
    if (in.t == JV_UNDEF) return jv_list(c, 0);
    if (in.t != JV_DICT && in.t != JV_NS) jerr(c, "items: expected a mapping, got %s", jv_type_name(in));
    jv out = jv_list(c, in.u.d->n);
    for (int i = 0; i < in.u.d->n; i++) {
        jv pair = jv_list(c, 2), k = {.t = JV_STR};
        pair.u.l->tuple = 1;
        k.u.s = in.u.d->keys[i];
        jlist_push(c, pair, k);
        jlist_push(c, pair, in.u.d->vals[i]);
        jlist_push(c, out, pair);
    }
    return out;
}

static jv f_join(jctx *c, jv in, jargs *a) {
    jv l = jv_iter_list(c, in), sep = jarg(a, 0, "d"), attribute = jarg(a, 1, "attribute");
    jbuf b = {0};
    for (int i = 0; i < l.u.l->n; i++) {
        if (i && given(sep)) jv_write_str(c, &b, sep);
        jv item = l.u.l->items[i];
        if (given(attribute)) item = sort_key(c, item, attribute, 1);
        jv_write_str(c, &b, item);
    }
    return buf_str(c, &b);
}

static jv f_length(jctx *c, jv in, jargs *a) {
    (void)a;
    return jv_int(jv_length(c, in));
}

static jv f_list(jctx *c, jv in, jargs *a) {
    (void)a;
    jv l = jv_iter_list(c, in), out = jv_list(c, l.u.l->n);
    for (int i = 0; i < l.u.l->n; i++) jlist_push(c, out, l.u.l->items[i]);
    return out;
}

static jv f_lower(jctx *c, jv in, jargs *a) {
    (void)a;
    return recase(c, jv_to_str(c, in).u.s, CASE_LOWER);
}

static jv f_upper(jctx *c, jv in, jargs *a) {
    (void)a;
    return recase(c, jv_to_str(c, in).u.s, CASE_UPPER);
}

static jv f_title(jctx *c, jv in, jargs *a) {
    (void)a;
    return recase(c, jv_to_str(c, in).u.s, CASE_TITLE_WORDS);
}

static jv f_map(jctx *c, jv in, jargs *a) {
    jv l = jv_iter_list(c, in), out = jv_list(c, l.u.l->n);
    jv attribute = jarg(a, -1, "attribute");
    if (given(attribute)) {
        jv dflt = jarg(a, -1, "default");
        for (int i = 0; i < l.u.l->n; i++) {
            jv v = sort_key(c, l.u.l->items[i], attribute, 1);
            jlist_push(c, out, v.t == JV_UNDEF && given(dflt) ? dflt : v);
        }
        return out;
    }
    jstr *name = need_str(c, jarg(a, 0, NULL), "map");
    jfilter_fn f = jinja_find_filter(name->s, NULL);
    if (!f) jerr(c, "map: no filter named '%s'", name->s);
    jargs rest = {a->n - 1, a->pos + 1, a->n_kw, a->kw_names, a->kw};
    for (int i = 0; i < l.u.l->n; i++) jlist_push(c, out, f(c, l.u.l->items[i], &rest));
    return out;
}

static jv minmax(jctx *c, jv in, jargs *a, int want_max) {
    jv l = jv_iter_list(c, in), attribute = jarg(a, 1, "attribute");
    int cs = jv_truthy(jarg(a, 0, "case_sensitive"));
    if (!l.u.l->n) return jv_undef(want_max ? "max" : "min");
    jv best = l.u.l->items[0], bk = sort_key(c, best, attribute, cs);
    for (int i = 1; i < l.u.l->n; i++) {
        jv k = sort_key(c, l.u.l->items[i], attribute, cs);
        int r = jinja_order(c, k, bk);
        if (want_max ? r > 0 : r < 0) best = l.u.l->items[i], bk = k;
    }
    return best;
}

static jv f_max(jctx *c, jv in, jargs *a) { return minmax(c, in, a, 1); }
static jv f_min(jctx *c, jv in, jargs *a) { return minmax(c, in, a, 0); }

static jv f_replace(jctx *c, jv in, jargs *a) {
    jv count = jarg(a, 2, "count");
    return replace(c, jv_to_str(c, in).u.s, jv_to_str(c, jarg(a, 0, "old")).u.s,
                   jv_to_str(c, jarg(a, 1, "new")).u.s,
                   given(count) && count.t != JV_NONE ? need_int(c, count, "replace count") : -1);
}

static jv f_reverse(jctx *c, jv in, jargs *a) {
    (void)a;
    jv l = jv_iter_list(c, in), out = jv_list(c, l.u.l->n);
    for (int i = l.u.l->n - 1; i >= 0; i--) jlist_push(c, out, l.u.l->items[i]);
    if (in.t != JV_STR) return out;
    jbuf b = {0};
    for (int i = 0; i < out.u.l->n; i++) jv_write_str(c, &b, out.u.l->items[i]);
    return buf_str(c, &b);
}

static jv f_round(jctx *c, jv in, jargs *a) {
    jv p = jarg(a, 0, "precision"), m = jarg(a, 1, "method");
    int64_t prec = given(p) ? need_int(c, p, "round precision") : 0;
    if (in.t != JV_FLOAT && prec >= 0 && !given(m)) return jv_int(need_int(c, in, "round"));
    double x = in.t == JV_FLOAT ? in.u.f : (double)need_int(c, in, "round");
    double scale = pow(10, (double)prec);
    const char *method = given(m) ? need_str(c, m, "round method")->s : "common";
    double v = x * scale;
    if (!strcmp(method, "common")) v = round(v); /* half away from zero, as Jinja */
    else if (!strcmp(method, "ceil")) v = ceil(v);
    else if (!strcmp(method, "floor")) v = floor(v);
    else jerr(c, "round: method must be common, ceil or floor");
    return jv_float(v / scale);
}

static jv f_safe(jctx *c, jv in, jargs *a) {
    (void)c, (void)a;
    return in;
}

static jv f_sort(jctx *c, jv in, jargs *a) {
    jv l = jv_iter_list(c, in);
    int rev = jv_truthy(jarg(a, 0, "reverse")), cs = jv_truthy(jarg(a, 1, "case_sensitive"));
    jv attribute = jarg(a, 2, "attribute");
    int n = l.u.l->n;
    jv *items = jalloc(c, (size_t)(n + 1) * sizeof *items), *keys = jalloc(c, (size_t)(n + 1) * sizeof *keys);
    for (int i = 0; i < n; i++) {
        items[i] = l.u.l->items[i];
        keys[i] = sort_key(c, items[i], attribute, cs);
    }
    sort_by_keys(c, items, keys, n);
    jv out = jv_list(c, n);
    for (int i = 0; i < n; i++) jlist_push(c, out, items[rev ? n - 1 - i : i]);
    return out;
}

static jv f_string(jctx *c, jv in, jargs *a) {
    (void)a;
    return jv_to_str(c, in);
}

static jv f_sum(jctx *c, jv in, jargs *a) {
    jv l = jv_iter_list(c, in), attribute = jarg(a, 0, "attribute"), acc = jarg(a, 1, "start");
    if (!given(acc)) acc = jv_int(0);
    for (int i = 0; i < l.u.l->n; i++) {
        jv v = given(attribute) ? sort_key(c, l.u.l->items[i], attribute, 1) : l.u.l->items[i];
        if (!((acc.t == JV_INT || acc.t == JV_FLOAT || acc.t == JV_BOOL) &&
              (v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL)))
            jerr(c, "sum: unsupported operand types '%s' and '%s'", jv_type_name(acc), jv_type_name(v));
        if (acc.t == JV_FLOAT || v.t == JV_FLOAT)
            acc = jv_float((acc.t == JV_FLOAT ? acc.u.f : (double)need_int(c, acc, "sum")) +
                           (v.t == JV_FLOAT ? v.u.f : (double)need_int(c, v, "sum")));
        else {
            int64_t r;
            if (__builtin_add_overflow(need_int(c, acc, "sum"), need_int(c, v, "sum"), &r))
                jerr(c, "sum: integer overflow");
            acc = jv_int(r);
        }
    }
    return acc;
}

static jv f_tojson(jctx *c, jv in, jargs *a) {
    jjson_opts o = {0};
    o.ensure_ascii = jv_truthy(jarg(a, 0, "ensure_ascii"));
    o.sort_keys = jv_truthy(jarg(a, 3, "sort_keys"));
    jv indent = jarg(a, 1, "indent"), seps = jarg(a, 2, "separators");
    if (given(indent) && indent.t != JV_NONE) {
        if (indent.t == JV_STR) o.indent = indent.u.s->s;
        else {
            int64_t n = need_int(c, indent, "tojson indent");
            if (n > 64) jerr(c, "tojson: indent %lld too large", (long long)n);
            char *sp = jalloc(c, (size_t)(n > 0 ? n : 0) + 1);
            memset(sp, ' ', (size_t)(n > 0 ? n : 0));
            sp[n > 0 ? n : 0] = 0;
            o.indent = sp;
        }
    }
    /* json.dumps: (', ', ': ') by default, (',', ': ') once indent is set */
    o.item_sep = o.indent ? "," : ", ";
    o.key_sep = ": ";
    if (given(seps) && seps.t != JV_NONE) {
        if (seps.t != JV_LIST || seps.u.l->n != 2)
            jerr(c, "tojson: separators must be a pair of strings");
        o.item_sep = need_str(c, seps.u.l->items[0], "tojson separators")->s;
        o.key_sep = need_str(c, seps.u.l->items[1], "tojson separators")->s;
    }
    jbuf b = {0};
    jv_write_json(c, &b, in, &o, 0);
    return buf_str(c, &b);
}

static jv f_trim(jctx *c, jv in, jargs *a) {
    jv chars = jarg(a, 0, "chars");
    return strip(c, jv_to_str(c, in).u.s,
                 given(chars) && chars.t != JV_NONE ? need_str(c, chars, "trim chars") : NULL, 1, 1);
}

static jv f_unique(jctx *c, jv in, jargs *a) {
    jv l = jv_iter_list(c, in), out = jv_list(c, 0), seen = jv_list(c, 0);
    int cs = jv_truthy(jarg(a, 0, "case_sensitive"));
    jv attribute = jarg(a, 1, "attribute");
    for (int i = 0; i < l.u.l->n; i++) {
        jv k = sort_key(c, l.u.l->items[i], attribute, cs);
        if (jinja_contains(c, seen, k)) continue;
        jlist_push(c, seen, k);
        jlist_push(c, out, l.u.l->items[i]);
    }
    return out;
}

static jv f_wordcount(jctx *c, jv in, jargs *a) {
    (void)a;
    jstr *s = jv_to_str(c, in).u.s;
    const unsigned char *u = (const unsigned char *)s->s;
    int64_t n = 0;
    int inword = 0;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp = jutf8_next(u, s->len, &i);
        int cat = utf8proc_category((int32_t)cp);
        int w = cp == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
        n += w && !inword;
        inword = w;
    }
    return jv_int(n);
}

/* select / reject / selectattr / rejectattr share one loop. */
static jv select_common(jctx *c, jv in, jargs *a, int by_attr, int reject) {
    jv l = jv_iter_list(c, in), out = jv_list(c, 0);
    int k = 0;
    jstr *attr = by_attr ? need_str(c, jarg(a, k++, NULL), "selectattr attribute") : NULL;
    jtest_fn test = NULL;
    if (k < a->n) {
        jstr *name = need_str(c, a->pos[k++], "select test");
        test = jinja_find_test(name->s, NULL);
        if (!test) jerr(c, "no test named '%s'", name->s);
    }
    /* a->pos is NULL when the filter got no positional arguments */
    jargs rest = {a->n - k, a->pos ? a->pos + k : NULL, a->n_kw, a->kw_names, a->kw};
    for (int i = 0; i < l.u.l->n; i++) {
        jv v = attr ? attr_path(c, l.u.l->items[i], attr) : l.u.l->items[i];
        int ok = test ? test(c, v, &rest) : jv_truthy(v);
        if (ok != reject) jlist_push(c, out, l.u.l->items[i]);
    }
    return out;
}

static jv f_select(jctx *c, jv in, jargs *a) { return select_common(c, in, a, 0, 0); }
static jv f_reject(jctx *c, jv in, jargs *a) { return select_common(c, in, a, 0, 1); }
static jv f_selectattr(jctx *c, jv in, jargs *a) { return select_common(c, in, a, 1, 0); }
static jv f_rejectattr(jctx *c, jv in, jargs *a) { return select_common(c, in, a, 1, 1); }

/* params: the parameter names in order ("" none, NULL any), for Python's argument checks */
static const struct {
    const char *name;
    jfilter_fn fn;
    const char *params;
} FILTERS[] = {
    {"abs", f_abs, ""},
    {"attr", f_attr, "name"},
    {"capitalize", f_capitalize, ""},
    {"count", f_length, ""},
    {"d", f_default, "default_value,boolean"},
    {"default", f_default, "default_value,boolean"},
    {"dictsort", f_dictsort, "case_sensitive,by,reverse"},
    {"e", f_escape, ""},
    {"escape", f_escape, ""},
    {"first", f_first, ""},
    {"float", f_float, "default"},
    {"format", f_format, NULL},
    {"indent", f_indent, "width,first,blank"},
    {"int", f_int, "default,base"},
    {"items", f_items, ""},
    {"join", f_join, "d,attribute"},
    {"last", f_last, ""},
    {"length", f_length, ""},
    {"list", f_list, ""},
    {"lower", f_lower, ""},
    {"map", f_map, NULL},
    {"max", f_max, "case_sensitive,attribute"},
    {"min", f_min, "case_sensitive,attribute"},
    {"reject", f_reject, NULL},
    {"rejectattr", f_rejectattr, NULL},
    {"replace", f_replace, "old,new,count"},
    {"reverse", f_reverse, ""},
    {"round", f_round, "precision,method"},
    {"safe", f_safe, ""},
    {"select", f_select, NULL},
    {"selectattr", f_selectattr, NULL},
    {"sort", f_sort, "reverse,case_sensitive,attribute"},
    {"string", f_string, ""},
    {"sum", f_sum, "attribute,start"},
    {"title", f_title, ""},
    {"tojson", f_tojson, "ensure_ascii,indent,separators,sort_keys"},
    {"trim", f_trim, "chars"},
    {"unique", f_unique, "case_sensitive,attribute"},
    {"upper", f_upper, ""},
    {"wordcount", f_wordcount, ""},
};

jfilter_fn jinja_find_filter(const char *name, const char **params) {
    for (size_t i = 0; i < XI_ARRAY_LEN(FILTERS); i++) {
        if (strcmp(FILTERS[i].name, name)) continue;
        if (params) *params = FILTERS[i].params;
        return FILTERS[i].fn;
    }
    return NULL;
}

/* ==== tests ============================================================================= */

static int t_defined(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t != JV_UNDEF; }
static int t_undefined(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_UNDEF; }
static int t_none(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_NONE; }
static int t_boolean(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_BOOL; }
static int t_true(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_BOOL && v.u.b; }
static int t_false(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_BOOL && !v.u.b; }
static int t_integer(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_INT; }
static int t_float(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_FLOAT; }
static int t_number(jctx *c, jv v, jargs *a) {
    (void)c, (void)a;
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}
static int t_string(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_STR; }
static int t_mapping(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_DICT; }
/* Jinja's Undefined iterates (as empty) and has len(), so it is iterable and a sequence. */
static int t_iterable(jctx *c, jv v, jargs *a) {
    (void)c, (void)a;
    return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF || v.t == JV_LOOP;
}
static int t_sequence(jctx *c, jv v, jargs *a) {
    (void)c, (void)a;
    return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
}
static int t_callable(jctx *c, jv v, jargs *a) { (void)c, (void)a; return v.t == JV_FUNC; }
static int t_eq(jctx *c, jv v, jargs *a) { (void)c; return jv_equal(v, jarg(a, 0, "other")); }
static int t_ne(jctx *c, jv v, jargs *a) { (void)c; return !jv_equal(v, jarg(a, 0, "other")); }
static int t_lt(jctx *c, jv v, jargs *a) { return jinja_order(c, v, jarg(a, 0, "other")) < 0; }
static int t_le(jctx *c, jv v, jargs *a) { return jinja_order(c, v, jarg(a, 0, "other")) <= 0; }
static int t_gt(jctx *c, jv v, jargs *a) { return jinja_order(c, v, jarg(a, 0, "other")) > 0; }
static int t_ge(jctx *c, jv v, jargs *a) { return jinja_order(c, v, jarg(a, 0, "other")) >= 0; }
static int t_in(jctx *c, jv v, jargs *a) { return jinja_contains(c, jarg(a, 0, "seq"), v); }
static int t_sameas(jctx *c, jv v, jargs *a) {
    (void)c;
    jv o = jarg(a, 0, "other");
    if (v.t != o.t) return 0;
    switch (v.t) {
    case JV_STR: return v.u.s == o.u.s;
    case JV_LIST: return v.u.l == o.u.l;
    case JV_DICT: case JV_NS: return v.u.d == o.u.d;
    default: return jv_equal(v, o);
    }
}
/* value % n in Python terms, for the parity and divisibility tests */
static double py_mod(jctx *c, jv v, jv n, const char *what) {
    double x = v.t == JV_FLOAT ? v.u.f : (double)need_int(c, v, what);
    double y = n.t == JV_FLOAT ? n.u.f : (double)need_int(c, n, what);
    if (y == 0) jerr(c, "%s: division by zero", what);
    double r = fmod(x, y);
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
static int t_even(jctx *c, jv v, jargs *a) { (void)a; return py_mod(c, v, jv_int(2), "even") == 0; }
static int t_odd(jctx *c, jv v, jargs *a) { (void)a; return py_mod(c, v, jv_int(2), "odd") == 1; }
static int t_divisibleby(jctx *c, jv v, jargs *a) {
    return py_mod(c, v, jarg(a, 0, "num"), "divisibleby") == 0;
}
static int t_lower(jctx *c, jv v, jargs *a) { (void)a; return case_is(jv_to_str(c, v).u.s, 0); }
static int t_upper(jctx *c, jv v, jargs *a) { (void)a; return case_is(jv_to_str(c, v).u.s, 1); }
static int t_filter(jctx *c, jv v, jargs *a) {
    (void)a;
    return v.t == JV_STR && jinja_find_filter(need_str(c, v, "filter test")->s, NULL) != NULL;
}
static int t_test(jctx *c, jv v, jargs *a) {
    (void)a;
    return v.t == JV_STR && jinja_find_test(need_str(c, v, "test test")->s, NULL) != NULL;
}

static const struct {
    const char *name;
    jtest_fn fn;
    const char *params;
} TESTS[] = {
    {"defined", t_defined, ""},
    {"undefined", t_undefined, ""},
    {"none", t_none, ""},
    {"boolean", t_boolean, ""},
    {"true", t_true, ""},
    {"false", t_false, ""},
    {"integer", t_integer, ""},
    {"float", t_float, ""},
    {"number", t_number, ""},
    {"string", t_string, ""},
    {"mapping", t_mapping, ""},
    {"iterable", t_iterable, ""},
    {"sequence", t_sequence, ""},
    {"callable", t_callable, ""},
    {"sameas", t_sameas, "other"},
    {"eq", t_eq, "other"},
    {"equalto", t_eq, "other"},
    {"==", t_eq, "other"},
    {"ne", t_ne, "other"},
    {"!=", t_ne, "other"},
    {"lt", t_lt, "other"},
    {"lessthan", t_lt, "other"},
    {"<", t_lt, "other"},
    {"le", t_le, "other"},
    {"<=", t_le, "other"},
    {"gt", t_gt, "other"},
    {"greaterthan", t_gt, "other"},
    {">", t_gt, "other"},
    {"ge", t_ge, "other"},
    {">=", t_ge, "other"},
    {"in", t_in, "seq"},
    {"even", t_even, ""},
    {"odd", t_odd, ""},
    {"divisibleby", t_divisibleby, "num"},
    {"lower", t_lower, ""},
    {"upper", t_upper, ""},
    {"filter", t_filter, ""},
    {"test", t_test, ""},
};

jtest_fn jinja_find_test(const char *name, const char **params) {
    for (size_t i = 0; i < XI_ARRAY_LEN(TESTS); i++) {
        if (strcmp(TESTS[i].name, name)) continue;
        if (params) *params = TESTS[i].params;
        return TESTS[i].fn;
    }
    return NULL;
}

void jinja_check_args(jctx *c, const char *what, const char *name, const char *params, const jargs *a) {
    if (!params) return;
    int n = 0;
    for (const char *p = params; *p; p++) n += *p == ',';
    n += *params != 0;
    if (a->n > n) jerr(c, "%s '%s' takes at most %d argument(s), %d given", what, name, n, a->n);
    for (int k = 0; k < a->n_kw; k++) {
        size_t len = strlen(a->kw_names[k]);
        const char *p = params;
        int found = 0;
        while (*p && !found) {
            const char *e = strchr(p, ',');
            size_t pl = e ? (size_t)(e - p) : strlen(p);
            found = pl == len && !memcmp(p, a->kw_names[k], len);
            p += pl + (e ? 1 : 0);
        }
        if (!found) jerr(c, "%s '%s' got an unexpected keyword argument '%s'", what, name, a->kw_names[k]);
    }
}

/* ==== methods =========================================================================== */

static int64_t cp_index(const jstr *s, size_t byte) {
    int64_t n = 0;
    for (size_t i = 0; i < byte; i++) n += ((unsigned char)s->s[i] & 0xc0) != 0x80;
    return n;
}

static int affix_match(jctx *c, const jstr *s, jv arg, int suffix) {
    if (arg.t == JV_LIST) {
        for (int i = 0; i < arg.u.l->n; i++)
            if (affix_match(c, s, arg.u.l->items[i], suffix)) return 1;
        return 0;
    }
    const jstr *p = need_str(c, arg, suffix ? "endswith" : "startswith");
    if (p->len > s->len) return 0;
    return !memcmp(s->s + (suffix ? s->len - p->len : 0), p->s, p->len);
}

static int str_method(jctx *c, const jstr *s, const char *m, jargs *a, jv *out) {
    jv a0 = jarg(a, 0, NULL), a1 = jarg(a, 1, NULL);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        const jstr *chars = given(a0) && a0.t != JV_NONE ? need_str(c, a0, m) : NULL;
        *out = strip(c, s, chars, m[0] != 'r', m[0] != 'l');
    } else if (!strcmp(m, "lower")) *out = recase(c, s, CASE_LOWER);
    else if (!strcmp(m, "upper")) *out = recase(c, s, CASE_UPPER);
    else if (!strcmp(m, "capitalize")) *out = recase(c, s, CASE_CAPITALIZE);
    else if (!strcmp(m, "title")) *out = recase(c, s, CASE_TITLE_PY);
    else if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        *out = jv_bool(affix_match(c, s, a0, m[0] == 'e'));
    else if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = jarg(a, 0, "sep"), ms = jarg(a, 1, "maxsplit");
        *out = split(c, s, given(sep) && sep.t != JV_NONE ? need_str(c, sep, m) : NULL,
                     given(ms) ? need_int(c, ms, m) : -1, m[0] == 'r');
    } else if (!strcmp(m, "splitlines")) {
        jv l = jv_list(c, 0);
        size_t i = 0;
        while (i < s->len) {
            size_t e = i;
            while (e < s->len && s->s[e] != '\n' && s->s[e] != '\r') e++;
            jlist_push(c, l, jv_str(c, s->s + i, e - i));
            if (e < s->len && s->s[e] == '\r' && e + 1 < s->len && s->s[e + 1] == '\n') e++;
            i = e + 1;
        }
        *out = l;
    } else if (!strcmp(m, "replace")) {
        *out = replace(c, s, need_str(c, a0, m), need_str(c, a1, m),
                       given(jarg(a, 2, NULL)) ? need_int(c, jarg(a, 2, NULL), m) : -1);
    } else if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "count")) {
        const jstr *sub = need_str(c, a0, m);
        const char *hit = NULL;
        int64_t count = 0;
        if (m[0] == 'r') {
            for (size_t p = s->len >= sub->len ? s->len - sub->len + 1 : 0; p-- > 0;)
                if (!memcmp(s->s + p, sub->s, sub->len)) { hit = s->s + p; break; }
        } else {
            hit = memmem(s->s, s->len, sub->s, sub->len);
            if (m[0] == 'c') {
                if (sub->len == 0) count = jv_length(c, (jv){.t = JV_STR, .u.s = (jstr *)s}) + 1;
                else
                    for (const char *h = hit; h; h = memmem(h + sub->len, s->len - (size_t)(h - s->s) - sub->len, sub->s, sub->len))
                        count++;
                *out = jv_int(count);
                return 1;
            }
        }
        if (!hit && m[0] == 'i') jerr(c, "substring not found");
        *out = jv_int(hit ? cp_index(s, (size_t)(hit - s->s)) : -1);
    } else if (!strcmp(m, "join")) {
        jv l = jv_iter_list(c, a0);
        jbuf b = {0};
        for (int i = 0; i < l.u.l->n; i++) {
            if (i) jbuf_put(c, &b, s->s, s->len);
            jstr *item = need_str(c, l.u.l->items[i], "join");
            jbuf_put(c, &b, item->s, item->len);
        }
        *out = buf_str(c, &b);
    } else if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        const jstr *p = need_str(c, a0, m);
        int suffix = m[6] == 's';
        if (affix_match(c, s, a0, suffix)) *out = jv_str(c, s->s + (suffix ? 0 : p->len), s->len - p->len);
        else *out = jv_str(c, s->s, s->len);
    } else if (!strcmp(m, "isspace") || !strcmp(m, "isdigit") || !strcmp(m, "isalpha") ||
               !strcmp(m, "isalnum")) {
        const unsigned char *u = (const unsigned char *)s->s;
        int ok = s->len > 0;
        for (size_t i = 0; i < s->len && ok;) {
            uint32_t cp = jutf8_next(u, s->len, &i);
            int cat = utf8proc_category((int32_t)cp);
            int alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
            int digit = cat == UTF8PROC_CATEGORY_ND;
            ok = m[2] == 's' ? py_space(cp) : m[2] == 'd' ? digit : !strcmp(m, "isalpha") ? alpha : alpha || digit;
        }
        *out = jv_bool(ok);
    } else if (!strcmp(m, "islower") || !strcmp(m, "isupper")) {
        *out = jv_bool(case_is(s, m[2] == 'u'));
    } else {
        return 0;
    }
    return 1;
}

int jinja_call_method(jctx *c, jv obj, const char *m, jargs *a, jv *out) {
    switch (obj.t) {
    case JV_UNDEF: jerr(c, "'%s' is undefined", obj.undef_name ? obj.undef_name : "value");
    case JV_STR: return str_method(c, obj.u.s, m, a, out);
    case JV_DICT:
        if (!strcmp(m, "get")) {
            jv k = jarg(a, 0, NULL), d = jarg(a, 1, NULL);
            jv *v = k.t == JV_STR ? jdict_get(obj.u.d, k.u.s->s, k.u.s->len) : NULL;
            *out = v ? *v : given(d) ? d : jv_none();
            return 1;
        }
        if (!strcmp(m, "items")) { *out = f_items(c, obj, a); return 1; }
        if (!strcmp(m, "keys")) { *out = f_list(c, obj, a); return 1; }
        if (!strcmp(m, "values")) {
            jv l = jv_list(c, obj.u.d->n);
            for (int i = 0; i < obj.u.d->n; i++) jlist_push(c, l, obj.u.d->vals[i]);
            *out = l;
            return 1;
        }
        if (!strcmp(m, "update") || !strcmp(m, "pop") || !strcmp(m, "setdefault") ||
            !strcmp(m, "clear") || !strcmp(m, "popitem"))
            jerr(c, "access to attribute '%s' of 'dict' object is unsafe (templates are immutable)", m);
        return 0;
    case JV_LIST:
        if (!strcmp(m, "count")) {
            int64_t n = 0;
            for (int i = 0; i < obj.u.l->n; i++) n += jv_equal(obj.u.l->items[i], jarg(a, 0, NULL));
            *out = jv_int(n);
            return 1;
        }
        if (!strcmp(m, "index")) {
            for (int i = 0; i < obj.u.l->n; i++)
                if (jv_equal(obj.u.l->items[i], jarg(a, 0, NULL))) { *out = jv_int(i); return 1; }
            jerr(c, "list.index(x): x not in list");
        }
        if (!strcmp(m, "append") || !strcmp(m, "extend") || !strcmp(m, "pop") || !strcmp(m, "insert") ||
            !strcmp(m, "remove") || !strcmp(m, "sort") || !strcmp(m, "reverse") || !strcmp(m, "clear"))
            jerr(c, "access to attribute '%s' of 'list' object is unsafe (templates are immutable)", m);
        return 0;
    case JV_LOOP:
        if (!strcmp(m, "cycle")) {
            if (a->n == 0) jerr(c, "loop.cycle needs at least one argument");
            *out = a->pos[obj.u.loop->index0 % a->n];
            return 1;
        }
        return 0;
    default: return 0;
    }
}

/* ==== globals =========================================================================== */

static jv g_range(jctx *c, jargs *a) {
    int64_t start = 0, stop, stepv = 1;
    if (a->n == 1) stop = need_int(c, a->pos[0], "range");
    else if (a->n == 2 || a->n == 3) {
        start = need_int(c, a->pos[0], "range");
        stop = need_int(c, a->pos[1], "range");
        if (a->n == 3) stepv = need_int(c, a->pos[2], "range");
    } else jerr(c, "range expected 1 to 3 arguments, got %d", a->n);
    if (stepv == 0) jerr(c, "range() arg 3 must not be zero");
    double count = ceil(((double)stop - (double)start) / (double)stepv);
    if (count > 1e6) jerr(c, "range of %.0f items exceeds the limit of 1000000", count);
    jinja_work(c, count > 0 ? (int64_t)count : 0);
    jv l = jv_list(c, count > 0 ? (int)count : 0);
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) jlist_push(c, l, jv_int(i));
    return l;
}

static jv g_namespace(jctx *c, jargs *a) {
    jv ns = jv_dict(c, 4);
    ns.t = JV_NS;
    for (int i = 0; i < a->n; i++) {
        if (a->pos[i].t != JV_DICT) jerr(c, "namespace: positional arguments must be mappings");
        for (int k = 0; k < a->pos[i].u.d->n; k++)
            jdict_set(c, ns.u.d, a->pos[i].u.d->keys[k], a->pos[i].u.d->vals[k]);
    }
    for (int i = 0; i < a->n_kw; i++)
        jdict_set(c, ns.u.d, jstr_new(c, a->kw_names[i], strlen(a->kw_names[i])), a->kw[i]);
    return ns;
}

static jv g_dict(jctx *c, jargs *a) {
    jv d = g_namespace(c, a);
    d.t = JV_DICT;
    return d;
}

static jv g_raise_exception(jctx *c, jargs *a) {
    jv msg = jv_to_str(c, jarg(a, 0, "message"));
    c->line = 0; /* the template's own words, as transformers reports them */
    jerr(c, "%s", msg.u.s->s);
}

static jv g_strftime_now(jctx *c, jargs *a) {
    const jstr *fmt = need_str(c, jarg(a, 0, "format"), "strftime_now");
    struct tm tm;
    const char *fixed = getenv("XINFER_TEMPLATE_DATE");
    if (fixed && *fixed) {
        int y, m, d;
        char tail;
        if (sscanf(fixed, "%d-%d-%d%c", &y, &m, &d, &tail) != 3 || m < 1 || m > 12 || d < 1 || d > 31)
            jerr(c, "XINFER_TEMPLATE_DATE=%s is not YYYY-MM-DD", fixed);
        memset(&tm, 0, sizeof tm);
        tm.tm_year = y - 1900;
        tm.tm_mon = m - 1;
        tm.tm_mday = d;
        tm.tm_hour = 12; /* noon: mktime's normalisation cannot shift the day */
        tm.tm_isdst = -1;
        time_t t = mktime(&tm);
        localtime_r(&t, &tm);
        tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    } else {
        time_t now = time(NULL);
        localtime_r(&now, &tm);
    }
    char out[512];
    size_t n = fmt->len ? strftime(out, sizeof out, fmt->s, &tm) : 0;
    if (fmt->len && n == 0) jerr(c, "strftime_now: format produces no text or more than 511 bytes");
    return jv_str(c, out, n);
}

static const jfunc GLOBALS[] = {
    {"range", g_range, NULL}, {"namespace", g_namespace, NULL}, {"dict", g_dict, NULL},
    {"raise_exception", g_raise_exception, NULL}, {"strftime_now", g_strftime_now, NULL},
};

jv jinja_global(jctx *c, const char *name) {
    for (size_t i = 0; i < XI_ARRAY_LEN(GLOBALS); i++) {
        if (strcmp(GLOBALS[i].name, name)) continue;
        if (GLOBALS[i].fn == g_strftime_now && !c->with_strftime_now) break;
        jv v = {.t = JV_FUNC};
        v.u.fn = (jfunc *)&GLOBALS[i];
        return v;
    }
    return jv_undef(name);
}
