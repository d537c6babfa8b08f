/* jinja_eval: walks the AST with Jinja2's scoping (for and macro bodies get their own scope,
 * if does not), Python value semantics and the render limits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/jinja.h"

/* ==== scopes ============================================================================ */

static int push_frame(jctx *c) {
    if (c->n_frames == c->max_frames) {
        int cap = c->max_frames ? c->max_frames * 2 : 16;
        if (cap > 1 << 16) jerr(c, "too many nested scopes");
        jframe *f = jalloc(c, (size_t)cap * sizeof *f);
        if (c->n_frames) memcpy(f, c->frames, (size_t)c->n_frames * sizeof *f);
        c->frames = f;
        c->max_frames = cap;
    }
    jframe *f = &c->frames[c->n_frames];
    memset(f, 0, sizeof *f);
    return c->n_frames++;
}

static void frame_set(jctx *c, int fi, const char *name, jv v) {
    jframe *f = &c->frames[fi];
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        int cap = f->cap ? f->cap * 2 : 8;
        const char **names = jalloc(c, (size_t)cap * sizeof *names);
        jv *vals = jalloc(c, (size_t)cap * sizeof *vals);
        if (f->n) {
            memcpy(names, f->names, (size_t)f->n * sizeof *names);
            memcpy(vals, f->vals, (size_t)f->n * sizeof *vals);
        }
        f->names = names;
        f->vals = vals;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
}

static jv *frame_get(jframe *f, const char *name) {
    for (int i = f->n - 1; i >= 0; i--)
        if (!strcmp(f->names[i], name)) return &f->vals[i];
    return NULL;
}

static jv lookup(jctx *c, const char *name) {
    for (int i = c->n_frames - 1; i >= c->macro_base; i--) {
        jv *v = frame_get(&c->frames[i], name);
        if (v) return *v;
    }
    if (c->macro_base > 0) {
        jv *v = frame_get(&c->frames[0], name);
        if (v) return *v;
    }
    return jinja_global(c, name);
}

static void step(jctx *c) {
    if (++c->steps > c->lim.max_steps)
        jerr(c, "render takes more than %ld steps (an endless or huge loop?)", c->lim.max_steps);
}

void jinja_work(jctx *c, int64_t n) {
    /* Operations linear in their input (scans, sorts, repeats) cost a step per 64 elements,
     * so a loop that scans a big list each iteration cannot run unbounded. */
    c->steps += n >> 6;
    step(c);
}

/* ==== attribute and item access ========================================================= */

static jv loop_attr(jctx *c, const jloop *l, const char *name) {
    if (!strcmp(name, "index")) return jv_int(l->index0 + 1);
    if (!strcmp(name, "index0")) return jv_int(l->index0);
    if (!strcmp(name, "revindex")) return jv_int(l->length - l->index0);
    if (!strcmp(name, "revindex0")) return jv_int(l->length - l->index0 - 1);
    if (!strcmp(name, "first")) return jv_bool(l->index0 == 0);
    if (!strcmp(name, "last")) return jv_bool(l->index0 == l->length - 1);
    if (!strcmp(name, "length")) return jv_int(l->length);
    if (!strcmp(name, "previtem")) return l->prev;
    if (!strcmp(name, "nextitem")) return l->next;
    if (!strcmp(name, "depth")) return jv_int(1);
    if (!strcmp(name, "depth0")) return jv_int(0);
    (void)c;
    return jv_undef(name);
}

jv jinja_getattr(jctx *c, jv obj, const char *name) {
    switch (obj.t) {
    case JV_UNDEF:
        jerr(c, "'%s' is undefined", obj.undef_name ? obj.undef_name : "value");
    case JV_DICT: {
        /* Jinja's getattr tries the attribute first: d.items is the method even when d has
         * an "items" key (common in JSON schemas); d["items"] is the key. */
        static const jfunc methods[] = {
            {"clear", NULL, NULL}, {"copy", NULL, NULL}, {"fromkeys", NULL, NULL},
            {"get", NULL, NULL}, {"items", NULL, NULL}, {"keys", NULL, NULL},
            {"pop", NULL, NULL}, {"popitem", NULL, NULL}, {"setdefault", NULL, NULL},
            {"update", NULL, NULL}, {"values", NULL, NULL},
        };
        for (size_t i = 0; i < XI_ARRAY_LEN(methods); i++)
            if (!strcmp(methods[i].name, name)) {
                jv m = {.t = JV_FUNC};
                m.u.fn = (jfunc *)&methods[i];
                return m;
            }
        jv *v = jdict_get(obj.u.d, name, strlen(name));
        return v ? *v : jv_undef(name);
    }
    case JV_NS: {
        jv *v = jdict_get(obj.u.d, name, strlen(name));
        return v ? *v : jv_undef(name);
    }
    case JV_LOOP: return loop_attr(c, obj.u.loop, name);
    default: return jv_undef(name);
    }
}

/* Byte offsets of the code points of s: [n + 1] in the arena; returns n. */
static int64_t cp_offsets(jctx *c, const jstr *s, size_t **off) {
    size_t *o = jalloc(c, (s->len + 1) * sizeof *o);
    int64_t n = 0;
    for (size_t i = 0; i < s->len; i++)
        if (((unsigned char)s->s[i] & 0xc0) != 0x80) o[n++] = i;
    o[n] = s->len;
    *off = o;
    return n;
}

static int is_intlike(jv v) { return v.t == JV_INT || v.t == JV_BOOL; }
static int64_t as_int(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

jv jinja_getitem(jctx *c, jv obj, jv key) {
    switch (obj.t) {
    case JV_UNDEF:
        jerr(c, "'%s' is undefined", obj.undef_name ? obj.undef_name : "value");
    case JV_LIST: {
        if (!is_intlike(key)) return jv_undef("item");
        int64_t i = as_int(key), n = obj.u.l->n;
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.u.l->items[i] : jv_undef("item");
    }
    case JV_STR: {
        if (!is_intlike(key)) return jv_undef("item");
        size_t *off;
        int64_t n = cp_offsets(c, obj.u.s, &off), i = as_int(key);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return jv_undef("item");
        return jv_str(c, obj.u.s->s + off[i], off[i + 1] - off[i]);
    }
    case JV_DICT: case JV_NS: {
        if (key.t != JV_STR) return jv_undef("item");
        jv *v = jdict_get(obj.u.d, key.u.s->s, key.u.s->len);
        return v ? *v : jv_undef(key.u.s->s);
    }
    case JV_LOOP:
        return key.t == JV_STR ? loop_attr(c, obj.u.loop, key.u.s->s) : jv_undef("item");
    default: return jv_undef("item");
    }
}

/* Python slice bounds for length n. */
static void slice_bounds(jctx *c, jv lo, jv hi, jv st, int64_t n, int64_t *b, int64_t *e, int64_t *s) {
    int64_t step = 1;
    if (st.t != JV_NONE && st.t != JV_UNDEF) {
        if (!is_intlike(st)) jerr(c, "slice step must be an integer");
        step = as_int(st);
        if (step == 0) jerr(c, "slice step cannot be zero");
    }
    int64_t dlo = step > 0 ? 0 : n - 1, dhi = step > 0 ? n : -1;
    int64_t vals[2] = {dlo, dhi};
    jv in[2] = {lo, hi};
    for (int k = 0; k < 2; k++) {
        if (in[k].t == JV_NONE || in[k].t == JV_UNDEF) continue;
        if (!is_intlike(in[k])) jerr(c, "slice indices must be integers");
        int64_t v = as_int(in[k]);
        if (v < 0) {
            v += n;
            if (v < 0) v = step > 0 ? 0 : -1;
        } else if (v >= n) {
            v = step > 0 ? n : n - 1;
        }
        vals[k] = v;
    }
    *b = vals[0];
    *e = vals[1];
    *s = step;
}

static jv eval_slice(jctx *c, const jnode *e) {
    jv obj = jinja_eval(c, e->a);
    jv parts[3];
    for (int k = 0; k < 3; k++) parts[k] = e->list[k] ? jinja_eval(c, e->list[k]) : jv_none();
    int64_t b, en, st;
    if (obj.t == JV_LIST) {
        slice_bounds(c, parts[0], parts[1], parts[2], obj.u.l->n, &b, &en, &st);
        jv r = jv_list(c, 0);
        r.u.l->tuple = obj.u.l->tuple;
        for (int64_t i = b; st > 0 ? i < en : i > en; i += st) jlist_push(c, r, obj.u.l->items[i]);
        return r;
    }
    if (obj.t == JV_STR) {
        size_t *off;
        int64_t n = cp_offsets(c, obj.u.s, &off);
        slice_bounds(c, parts[0], parts[1], parts[2], n, &b, &en, &st);
        jbuf out = {0};
        for (int64_t i = b; st > 0 ? i < en : i > en; i += st)
            jbuf_put(c, &out, obj.u.s->s + off[i], off[i + 1] - off[i]);
        return jv_str(c, out.data ? out.data : "", out.len);
    }
    if (obj.t == JV_UNDEF) jerr(c, "'%s' is undefined", obj.undef_name ? obj.undef_name : "value");
    jerr(c, "'%s' object is not subscriptable", jv_type_name(obj));
}

/* ==== operators ========================================================================= */

static void need_defined(jctx *c, jv v) {
    if (v.t == JV_UNDEF) jerr(c, "'%s' is undefined", v.undef_name ? v.undef_name : "value");
}

static int is_number(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double as_f(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)as_int(v); }

static const char *op_sym(int op) {
    static const char *s[] = {"+", "-", "*", "/", "//", "%", "**", "~",
                              "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    return s[op];
}

static jv repeat(jctx *c, jv seq, int64_t k) {
    if (k < 0) k = 0;
    jinja_work(c, k);
    if (seq.t == JV_STR) {
        if (k && seq.u.s->len > c->lim.max_output / (size_t)k)
            jerr(c, "string repetition exceeds the output limit");
        jbuf b = {0};
        for (int64_t i = 0; i < k; i++) jbuf_put(c, &b, seq.u.s->s, seq.u.s->len);
        return jv_str(c, b.data ? b.data : "", b.len);
    }
    if (k && seq.u.l->n > (1 << 24) / k) jerr(c, "list repetition too large");
    jv r = jv_list(c, (int)(seq.u.l->n * k));
    r.u.l->tuple = seq.u.l->tuple;
    for (int64_t i = 0; i < k; i++)
        for (int j = 0; j < seq.u.l->n; j++) jlist_push(c, r, seq.u.l->items[j]);
    return r;
}

static jv arith(jctx *c, int op, jv a, jv b) {
    if (op == OP_CONCAT) {
        jbuf s = {0};
        jv_write_str(c, &s, a);
        jv_write_str(c, &s, b);
        return jv_str(c, s.data ? s.data : "", s.len);
    }
    need_defined(c, a);
    need_defined(c, b);
    if (is_number(a) && is_number(b)) {
        int ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
        int64_t x = as_int(a), y = as_int(b), r;
        double fx = as_f(a), fy = as_f(b);
        switch (op) {
        case OP_ADD:
            if (!ints) return jv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) jerr(c, "integer overflow in +");
            return jv_int(r);
        case OP_SUB:
            if (!ints) return jv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) jerr(c, "integer overflow in -");
            return jv_int(r);
        case OP_MUL:
            if (!ints) return jv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) jerr(c, "integer overflow in *");
            return jv_int(r);
        case OP_DIV:
            if (fy == 0) jerr(c, "division by zero");
            return jv_float(fx / fy);
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0) jerr(c, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) jerr(c, "integer overflow in //");
                r = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) r--;
                return jv_int(r);
            }
            if (fy == 0) jerr(c, "float floor division by zero");
            return jv_float(floor(fx / fy));
        case OP_MOD:
            if (ints) {
                if (y == 0) jerr(c, "integer division or modulo by zero");
                if (y == -1) return jv_int(0);
                r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
                return jv_int(r);
            }
            if (fy == 0) jerr(c, "float modulo by zero");
            {
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return jv_float(m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                r = 1;
                for (int64_t i = 0; i < y; i++)
                    if (__builtin_mul_overflow(r, x, &r)) jerr(c, "integer overflow in **");
                return jv_int(r);
            }
            return jv_float(pow(fx, fy));
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        jbuf s = {0};
        jbuf_put(c, &s, a.u.s->s, a.u.s->len);
        jbuf_put(c, &s, b.u.s->s, b.u.s->len);
        return jv_str(c, s.data ? s.data : "", s.len);
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        jv r = jv_list(c, a.u.l->n + b.u.l->n);
        r.u.l->tuple = a.u.l->tuple;
        for (int i = 0; i < a.u.l->n; i++) jlist_push(c, r, a.u.l->items[i]);
        for (int i = 0; i < b.u.l->n; i++) jlist_push(c, r, b.u.l->items[i]);
        return r;
    }
    if (op == OP_MOD && a.t == JV_STR) return jinja_percent_format(c, a.u.s, b);
    if (op == OP_MUL && (a.t == JV_STR || a.t == JV_LIST) && is_intlike(b)) return repeat(c, a, as_int(b));
    if (op == OP_MUL && (b.t == JV_STR || b.t == JV_LIST) && is_intlike(a)) return repeat(c, b, as_int(a));
    jerr(c, "unsupported operand types for %s: '%s' and '%s'", op_sym(op), jv_type_name(a),
         jv_type_name(b));
}

/* <0, 0, >0 for ordered comparisons (numbers, strings, lists), as Python orders them. */
int jinja_order(jctx *c, jv a, jv b) {
    const int op = OP_LT;
    if (is_number(a) && is_number(b)) {
        double x = as_f(a), y = as_f(b);
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (as_int(a) > as_int(b)) - (as_int(a) < as_int(b));
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int r = memcmp(a.u.s->s, b.u.s->s, n);
        return r ? r : (a.u.s->len > b.u.s->len) - (a.u.s->len < b.u.s->len);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        int n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (int i = 0; i < n; i++)
            if (!jv_equal(a.u.l->items[i], b.u.l->items[i]))
                return jinja_order(c, a.u.l->items[i], b.u.l->items[i]);
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    need_defined(c, a);
    need_defined(c, b);
    jerr(c, "'%s' not supported between instances of '%s' and '%s'", op_sym(op), jv_type_name(a),
         jv_type_name(b));
}

int jinja_contains(jctx *c, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR) jerr(c, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (needle.u.s->len == 0) return 1;
        jinja_work(c, (int64_t)hay.u.s->len);
        return memmem(hay.u.s->s, hay.u.s->len, needle.u.s->s, needle.u.s->len) != NULL;
    case JV_LIST:
        jinja_work(c, hay.u.l->n);
        for (int i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->items[i], needle)) return 1;
        return 0;
    case JV_DICT: case JV_NS:
        return needle.t == JV_STR && jdict_get(hay.u.d, needle.u.s->s, needle.u.s->len) != NULL;
    case JV_UNDEF: return 0;
    default: jerr(c, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

static int compare(jctx *c, int op, jv a, jv b) {
    switch (op) {
    case OP_EQ: return jv_equal(a, b);
    case OP_NE: return !jv_equal(a, b);
    case OP_LT: return jinja_order(c, a, b) < 0;
    case OP_LE: return jinja_order(c, a, b) <= 0;
    case OP_GT: return jinja_order(c, a, b) > 0;
    case OP_GE: return jinja_order(c, a, b) >= 0;
    case OP_IN: return jinja_contains(c, b, a);
    default: return !jinja_contains(c, b, a);
    }
}

/* ==== calls ============================================================================= */

static void eval_args(jctx *c, const jnode *e, jargs *a) {
    a->n = e->n;
    a->pos = e->n ? jalloc(c, (size_t)e->n * sizeof(jv)) : NULL;
    for (int i = 0; i < e->n; i++) a->pos[i] = jinja_eval(c, e->list[i]);
    a->n_kw = e->n_names;
    a->kw_names = e->names;
    a->kw = e->n_names ? jalloc(c, (size_t)e->n_names * sizeof(jv)) : NULL;
    for (int i = 0; i < e->n_names; i++) a->kw[i] = jinja_eval(c, e->list2[i]);
}

static void exec_body(jctx *c, jnode *const *body, int n);

static jv call_macro(jctx *c, const jnode *m, jargs *a) {
    if (c->depth >= c->lim.max_depth)
        jerr(c, "macro calls nested deeper than %d (endless recursion?)", c->lim.max_depth);
    if (a->n > m->n_names)
        jerr(c, "macro '%s' takes not more than %d argument(s)", m->name, m->n_names);
    int saved_base = c->macro_base, saved_frames = c->n_frames, saved_ctl = c->ctl;
    int saved_loops = c->loop_depth;
    jbuf *saved_out = c->out;
    int line = c->line;
    int fi = push_frame(c);
    c->macro_base = fi;
    for (int i = 0; i < a->n_kw; i++) {
        int known = 0;
        for (int p = 0; p < m->n_names; p++) known |= !strcmp(m->names[p], a->kw_names[i]);
        if (!known) jerr(c, "macro '%s' has no parameter '%s'", m->name, a->kw_names[i]);
    }
    for (int p = 0; p < m->n_names; p++) {
        jv v = jv_undef(m->names[p]);
        int set = 0;
        if (p < a->n) v = a->pos[p], set = 1;
        for (int i = 0; i < a->n_kw; i++)
            if (!strcmp(m->names[p], a->kw_names[i])) v = a->kw[i], set = 1;
        if (!set && m->list2[p]) v = jinja_eval(c, m->list2[p]);
        frame_set(c, fi, m->names[p], v);
    }
    jbuf out = {0};
    c->out = &out;
    c->depth++;
    c->loop_depth = 0;
    exec_body(c, m->body, m->n_body);
    c->depth--;
    c->out = saved_out;
    c->ctl = saved_ctl;
    c->loop_depth = saved_loops;
    c->n_frames = saved_frames;
    c->macro_base = saved_base;
    c->line = line;
    return jv_str(c, out.data ? out.data : "", out.len);
}

jv jinja_call(jctx *c, jv fn, jargs *a) {
    if (fn.t == JV_FUNC) {
        step(c);
        if (!fn.u.fn->fn && !fn.u.fn->macro)
            jerr(c, "bound method '%s' can only be called where it is looked up", fn.u.fn->name);
        return fn.u.fn->fn ? fn.u.fn->fn(c, a) : call_macro(c, fn.u.fn->macro, a);
    }
    need_defined(c, fn);
    jerr(c, "'%s' object is not callable", jv_type_name(fn));
}

static jv eval_call(jctx *c, const jnode *e) {
    jargs a;
    if (e->a->kind == E_ATTR) {
        jv obj = jinja_eval(c, e->a->a);
        eval_args(c, e, &a);
        jv out;
        if (jinja_call_method(c, obj, e->a->name, &a, &out)) return out;
        jv fn = jinja_getattr(c, obj, e->a->name);
        if (fn.t == JV_UNDEF)
            jerr(c, "'%s' object has no attribute '%s'", jv_type_name(obj), e->a->name);
        return jinja_call(c, fn, &a);
    }
    jv fn = jinja_eval(c, e->a);
    eval_args(c, e, &a);
    return jinja_call(c, fn, &a);
}

/* ==== expressions ======================================================================= */

/* Nested evaluation bound: 200 levels per macro body times 64 macro levels could need
 * megabytes of C stack (an HTTP thread's, perhaps); frames are at most ~650 bytes (gcc
 * -fstack-usage), so 1000 levels stay under 1 MiB. */
#define MAX_C_DEPTH 1000

static jv eval(jctx *c, const jnode *e);

jv jinja_eval(jctx *c, const jnode *e) {
    if (++c->c_depth > MAX_C_DEPTH) jerr(c, "template evaluation nests deeper than %d", MAX_C_DEPTH);
    jv v = eval(c, e);
    c->c_depth--;
    return v;
}

static jv eval(jctx *c, const jnode *e) {
    switch (e->kind) {
    case E_CONST: return e->val;
    case E_NAME: {
        jv v = lookup(c, e->name);
        if (v.t == JV_UNDEF) v.undef_name = e->name;
        return v;
    }
    case E_ATTR: return jinja_getattr(c, jinja_eval(c, e->a), e->name);
    case E_ITEM: return jinja_getitem(c, jinja_eval(c, e->a), jinja_eval(c, e->b));
    case E_SLICE: return eval_slice(c, e);
    case E_CALL: return eval_call(c, e);
    case E_FILTER: {
        if (!e->filter) jerr(c, "no filter named '%s'", e->name);
        jv in = jinja_eval(c, e->a);
        jargs a;
        eval_args(c, e, &a);
        jinja_check_args(c, "filter", e->name, e->params, &a);
        return e->filter(c, in, &a);
    }
    case E_TEST: {
        if (!e->test) jerr(c, "no test named '%s'", e->name);
        jv in = jinja_eval(c, e->a);
        jargs a;
        eval_args(c, e, &a);
        jinja_check_args(c, "test", e->name, e->params, &a);
        return jv_bool(e->test(c, in, &a) ^ e->op);
    }
    case E_NEG: case E_POS: {
        jv v = jinja_eval(c, e->a);
        need_defined(c, v);
        if (e->kind == E_POS && is_number(v)) return v.t == JV_BOOL ? jv_int(v.u.b) : v;
        if (v.t == JV_FLOAT) return jv_float(-v.u.f);
        if (is_intlike(v)) {
            if (as_int(v) == INT64_MIN) jerr(c, "integer overflow in unary -");
            return jv_int(-as_int(v));
        }
        jerr(c, "bad operand type for unary %c: '%s'", e->kind == E_NEG ? '-' : '+', jv_type_name(v));
    }
    case E_NOT: return jv_bool(!jv_truthy(jinja_eval(c, e->a)));
    case E_AND: {
        jv a = jinja_eval(c, e->a);
        return jv_truthy(a) ? jinja_eval(c, e->b) : a;
    }
    case E_OR: {
        jv a = jinja_eval(c, e->a);
        return jv_truthy(a) ? a : jinja_eval(c, e->b);
    }
    case E_BIN: return arith(c, e->op, jinja_eval(c, e->a), jinja_eval(c, e->b));
    case E_CMP: {
        jv left = jinja_eval(c, e->list[0]);
        for (int i = 1; i < e->n; i++) {
            jv right = jinja_eval(c, e->list[i]);
            if (!compare(c, e->ops[i - 1], left, right)) return jv_bool(0);
            left = right;
        }
        return jv_bool(1);
    }
    case E_COND:
        if (jv_truthy(jinja_eval(c, e->b))) return jinja_eval(c, e->a);
        return e->c ? jinja_eval(c, e->c) : jv_undef("conditional");
    case E_LIST: case E_TUPLE: {
        jv l = jv_list(c, e->n);
        l.u.l->tuple = e->kind == E_TUPLE;
        for (int i = 0; i < e->n; i++) jlist_push(c, l, jinja_eval(c, e->list[i]));
        return l;
    }
    case E_DICT: {
        jv d = jv_dict(c, e->n);
        for (int i = 0; i < e->n; i++) {
            jv k = jinja_eval(c, e->list[i]);
            if (k.t != JV_STR) jerr(c, "dict keys must be strings, not %s", jv_type_name(k));
            jdict_set(c, d.u.d, k.u.s, jinja_eval(c, e->list2[i]));
        }
        return d;
    }
    default: jerr(c, "internal: statement evaluated as an expression");
    }
}

/* ==== statements ======================================================================== */

static void bind_targets(jctx *c, int fi, const char *const *names, int n, jv v) {
    if (n == 1) {
        frame_set(c, fi, names[0], v);
        return;
    }
    jv l = jv_iter_list(c, v);
    if (l.u.l->n != n)
        jerr(c, "cannot unpack %d values into %d names", l.u.l->n, n);
    for (int i = 0; i < n; i++) frame_set(c, fi, names[i], l.u.l->items[i]);
}

static void exec_for(jctx *c, const jnode *s) {
    jv seq = jv_iter_list(c, jinja_eval(c, s->a));
    int fi = push_frame(c);
    if (s->b) { /* `for x in xs if cond`: filter first, so loop.length counts survivors */
        jv kept = jv_list(c, 0);
        for (int i = 0; i < seq.u.l->n; i++) {
            step(c);
            c->frames[fi].n = 0;
            bind_targets(c, fi, s->names, s->n_names, seq.u.l->items[i]);
            if (jv_truthy(jinja_eval(c, s->b))) jlist_push(c, kept, seq.u.l->items[i]);
        }
        seq = kept;
    }
    jloop *loop = jalloc(c, sizeof *loop);
    jv lv = {.t = JV_LOOP};
    lv.u.loop = loop;
    int n = seq.u.l->n;
    loop->length = n;
    c->loop_depth++;
    for (int i = 0; i < n; i++) {
        step(c);
        c->frames[fi].n = 0;
        loop->index0 = i;
        loop->prev = i > 0 ? seq.u.l->items[i - 1] : jv_undef("previtem");
        loop->next = i + 1 < n ? seq.u.l->items[i + 1] : jv_undef("nextitem");
        bind_targets(c, fi, s->names, s->n_names, seq.u.l->items[i]);
        frame_set(c, fi, "loop", lv);
        exec_body(c, s->body, s->n_body);
        if (c->ctl == 1) {
            c->ctl = 0;
            break;
        }
        c->ctl = 0;
    }
    c->loop_depth--;
    c->n_frames = fi;
    if (n == 0) exec_body(c, s->orelse, s->n_else);
}

static void exec_one(jctx *c, const jnode *s);

static void exec(jctx *c, const jnode *s) {
    if (++c->c_depth > MAX_C_DEPTH) jerr(c, "template evaluation nests deeper than %d", MAX_C_DEPTH);
    exec_one(c, s);
    c->c_depth--;
}

static void exec_one(jctx *c, const jnode *s) {
    c->line = s->line;
    step(c);
    switch (s->kind) {
    case S_TEXT: jbuf_put(c, c->out, s->val.u.s->s, s->val.u.s->len); return;
    case S_OUT: jv_write_str(c, c->out, jinja_eval(c, s->a)); return;
    case S_IF:
        if (jv_truthy(jinja_eval(c, s->a))) exec_body(c, s->body, s->n_body);
        else exec_body(c, s->orelse, s->n_else);
        return;
    case S_FOR: exec_for(c, s); return;
    case S_SET: {
        jv v = jinja_eval(c, s->a);
        if (s->op) { /* ns.attr = v */
            jv ns = lookup(c, s->name);
            if (ns.t != JV_NS) jerr(c, "cannot assign attribute on non-namespace object '%s'", s->name);
            jdict_set(c, ns.u.d, jstr_new(c, s->names[0], strlen(s->names[0])), v);
            return;
        }
        bind_targets(c, c->n_frames - 1, s->names, s->n_names, v);
        return;
    }
    case S_SET_BLOCK: {
        jbuf *saved = c->out, out = {0};
        c->out = &out;
        exec_body(c, s->body, s->n_body);
        c->out = saved;
        frame_set(c, c->n_frames - 1, s->name, jv_str(c, out.data ? out.data : "", out.len));
        return;
    }
    case S_MACRO: {
        jfunc *f = jalloc(c, sizeof *f);
        f->name = s->name;
        f->fn = NULL;
        f->macro = s;
        jv v = {.t = JV_FUNC};
        v.u.fn = f;
        frame_set(c, c->n_frames - 1, s->name, v);
        return;
    }
    case S_BREAK: case S_CONTINUE:
        if (!c->loop_depth) jerr(c, "'%s' outside a loop", s->kind == S_BREAK ? "break" : "continue");
        c->ctl = s->kind == S_BREAK ? 1 : 2;
        return;
    case S_BODY: exec_body(c, s->body, s->n_body); return;
    case S_WITH: {
        jv *vals = s->n ? jalloc(c, (size_t)s->n * sizeof *vals) : NULL;
        for (int i = 0; i < s->n; i++) vals[i] = jinja_eval(c, s->list[i]); /* outer scope */
        int saved = c->n_frames, fi = push_frame(c);
        for (int i = 0; i < s->n; i++) frame_set(c, fi, s->names[i], vals[i]);
        exec_body(c, s->body, s->n_body);
        c->n_frames = saved;
        return;
    }
    default: jerr(c, "internal: expression executed as a statement");
    }
}

static void exec_body(jctx *c, jnode *const *body, int n) {
    for (int i = 0; i < n && !c->ctl; i++) exec(c, body[i]);
}

/* ==== entry points ====================================================================== */

void xi_jinja_limits_default(xi_jinja_limits *l) {
    l->max_output = 16u << 20;
    l->max_memory = 256u << 20;
    l->max_steps = 2000000;
    l->max_depth = 64;
}

xi_jinja *xi_jinja_parse(const char *src, char *err, size_t errlen) {
    if (!src) return xi_errf(err, errlen, "chat template: no source"), NULL;
    xi_jinja *t = calloc(1, sizeof *t);
    if (!t) return xi_errf(err, errlen, "chat template: out of memory"), NULL;
    ja_init(&t->ar, 256u << 20);
    t->root = jinja_parse_source(&t->ar, src, err, errlen);
    if (!t->root) {
        xi_jinja_free(t);
        return NULL;
    }
    return t;
}

void xi_jinja_free(xi_jinja *t) {
    if (!t) return;
    ja_free(&t->ar);
    free(t);
}

char *xi_jinja_render(const xi_jinja *t, const xi_jinja_render_opts *o, size_t *len, char *err,
                      size_t errlen) {
    /* The context is on the heap: jmp_buf and friends are large, and the caller may be an
     * HTTP thread with a modest stack. */
    jctx *c = calloc(1, sizeof *c);
    if (!c) return xi_errf(err, errlen, "chat template: out of memory"), NULL;
    if (o->limits) c->lim = *o->limits;
    else xi_jinja_limits_default(&c->lim);
    c->err = err;
    c->errlen = errlen;
    c->with_strftime_now = o->with_strftime_now;
    ja_init(&c->ar, c->lim.max_memory);
    c->ar.shared = 1;
    if (setjmp(c->jb)) {
        ja_free(&c->ar);
        free(c);
        return NULL;
    }
    int root = push_frame(c);
    if (o->vars) {
        if (!json_is_object(o->vars)) jerr(c, "variables must be a JSON object");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)o->vars, k, v) {
            char *name = jalloc(c, strlen(k) + 1);
            strcpy(name, k);
            frame_set(c, root, name, jv_from_json(c, v, 0));
        }
    }
    jbuf out = {0};
    c->out = &out;
    exec_body(c, t->root->body, t->root->n_body);
    char *r = malloc(out.len + 1);
    if (!r) jerr(c, "out of memory for the output");
    if (out.len) memcpy(r, out.data, out.len);
    r[out.len] = 0;
    if (len) *len = out.len;
    ja_free(&c->ar);
    free(c);
    return r;
}
