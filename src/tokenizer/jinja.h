/* jinja: a small Jinja2 interpreter for chat templates (lexer → parser → AST → evaluator).
 *
 * It reproduces the environment transformers' apply_chat_template renders with: Jinja2's
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols extension
 * (break / continue), the {% generation %} tag (rendered as its body), the default Undefined
 * (prints as "", is falsy, iterates as empty, fails on attribute access or arithmetic), the
 * globals raise_exception(msg) and strftime_now(fmt), and transformers' own tojson filter
 * (Python json.dumps with ensure_ascii=False; indent, separators, sort_keys, ensure_ascii).
 *
 * Supported: {{ }}, {% %}, {# #}, whitespace control (-, +), raw; if/elif/else, for (tuple
 * targets, inline if filter, else, loop.*), set (incl. tuple targets, namespace attributes and
 * block set), with, macro, break/continue; the expression grammar of Jinja with Python
 * semantics for values (incl. printf-style %); the filters, tests and str/dict/list methods
 * real chat templates use (tables in jinja_lib.c), with Python's argument checks. Unknown tags
 * are parse errors; unknown filters and tests too, except inside an if or a conditional
 * expression, where (as in Jinja 3) they fail only when evaluated. Not supported: include,
 * extends, blocks, call blocks, filter blocks, recursive loops.
 *
 * Threads: a parsed template is immutable; any number of threads may render it at once. Each
 * render owns its memory (one arena, freed at the end) and is bounded by xi_jinja_limits.
 *
 * Errors: the evaluator reports runtime errors by longjmp to the render's entry point, which
 * returns NULL with the message; since every allocation lives in the render's arena, nothing
 * leaks on that path. That keeps each of the many fallible steps a single line. */
#ifndef XI_JINJA_H
#define XI_JINJA_H

#include <jansson.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

/* ==== public (to chat_template.c) ======================================================= */

typedef struct xi_jinja xi_jinja;

typedef struct xi_jinja_limits {
    size_t max_output;          /* bytes of rendered text (and of any one string value) */
    size_t max_memory;          /* bytes of the render's arena */
    long max_steps;             /* loop iterations + macro calls + statements */
    int max_depth;              /* nested macro calls */
} xi_jinja_limits;

void xi_jinja_limits_default(xi_jinja_limits *l); /* 16 MiB, 256 MiB, 2M steps, 64 deep */

/* All renders in progress together may hold at most this many bytes (default 1 GiB), so many
 * requests rendering at once cannot add up what each alone is allowed (max_memory); a render
 * that finds it full fails with a message that ends "retry later". Any thread. */
void xi_jinja_set_shared_budget(size_t bytes);
size_t xi_jinja_shared_in_use(void);

xi_jinja *xi_jinja_parse(const char *src, char *err, size_t errlen);
void xi_jinja_free(xi_jinja *t);

typedef struct xi_jinja_render_opts {
    const json_t *vars;         /* JSON object: the render's variables */
    int with_strftime_now;      /* define strftime_now(fmt); its date comes from env
                                   XINFER_TEMPLATE_DATE=YYYY-MM-DD when set, else local now */
    const xi_jinja_limits *limits; /* NULL: defaults */
} xi_jinja_render_opts;

/* Returns the rendered text (malloc'ed, NUL-terminated; *len its length when len != NULL) or
 * NULL with err ("line N: ..." for template errors; raise_exception's message as given). */
char *xi_jinja_render(const xi_jinja *t, const xi_jinja_render_opts *o, size_t *len, char *err,
                      size_t errlen);

/* ==== internal to jinja*.c ============================================================== */

/* ---- arena ---- */
typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t total, limit;        /* bytes handed out / allowed */
    int shared;                 /* a render's: its chunks also count against the process-wide
                                   budget of every render in progress */
    int shared_full;            /* the last failure was that budget's */
} jarena;

/* ---- values ---- */
typedef enum jv_type {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS,                      /* namespace(): a dict whose attributes `set` may assign */
    JV_FUNC,                    /* a global function or a macro */
    JV_LOOP,                    /* the `loop` object of a for */
} jv_type;

typedef struct jstr {
    size_t len;
    char s[];                   /* [len] bytes + NUL */
} jstr;

typedef struct jv {
    int t;                      /* jv_type */
    union {
        int b;
        int64_t i;
        double f;
        jstr *s;
        struct jlist *l;
        struct jdict *d;        /* JV_DICT, JV_NS */
        struct jfunc *fn;
        struct jloop *loop;
    } u;
    const char *undef_name;     /* JV_UNDEF: what was missing, for messages */
} jv;

typedef struct jlist {
    int n, cap;
    int tuple;                  /* a tuple: prints as (a, b), unequal to a list */
    jv *items;                  /* [cap] in the arena */
} jlist;

typedef struct jdict {
    int n, cap;
    jstr **keys;                /* [cap] insertion order; keys are strings */
    jv *vals;                   /* [cap] */
} jdict;

typedef struct jloop {
    int64_t index0, length;
    jv prev, next;
    int depth0;
} jloop;

struct jnode;
struct jctx;
typedef struct jargs {
    int n;
    jv *pos;                    /* [n] positional */
    int n_kw;
    const char **kw_names;      /* [n_kw] */
    jv *kw;                     /* [n_kw] */
} jargs;

typedef jv (*jfunc_fn)(struct jctx *c, jargs *a);
typedef struct jfunc {
    const char *name;
    jfunc_fn fn;                /* builtin, or NULL for a macro */
    const struct jnode *macro;  /* S_MACRO; both NULL: a dict method looked up as d.name */
} jfunc;

static inline jv jv_undef(const char *name) { jv v = {.t = JV_UNDEF}; v.undef_name = name; return v; }
static inline jv jv_none(void) { jv v = {.t = JV_NONE}; return v; }
static inline jv jv_bool(int b) { jv v = {.t = JV_BOOL}; v.u.b = !!b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.t = JV_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.t = JV_FLOAT}; v.u.f = f; return v; }

/* ---- AST ---- */
typedef enum jnode_kind {
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NEG, E_POS, E_NOT,
    E_AND, E_OR, E_BIN, E_CMP, E_COND, E_LIST, E_TUPLE, E_DICT,
    /* statements */
    S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SET_BLOCK, S_MACRO, S_BREAK, S_CONTINUE, S_BODY, S_WITH,
} jnode_kind;

/* Binary operators (E_BIN) and comparisons (E_CMP). */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef jv (*jfilter_fn)(struct jctx *c, jv in, jargs *a);
typedef int (*jtest_fn)(struct jctx *c, jv in, jargs *a);

typedef struct jnode {
    int kind, line;
    int op;                     /* E_BIN / E_TEST negated flag */
    jv val;                     /* E_CONST, S_TEXT */
    const char *name;           /* E_NAME, E_ATTR, filter/test/macro name, S_SET_BLOCK target */
    struct jnode *a, *b, *c;    /* operands; S_FOR: a = iterable, b = filter condition */
    struct jnode **list;        /* [n] args, items, dict keys, compare operands, targets */
    int n;
    struct jnode **list2;       /* [n2] dict values, keyword values, macro defaults */
    int n2;
    const char **names;         /* [n_names] keyword names, macro params, for/set targets */
    int n_names;
    int *ops;                   /* E_CMP: [n - 1] operators */
    struct jnode **body;        /* [n_body] statements */
    int n_body;
    struct jnode **orelse;      /* [n_else] if-else / for-else statements */
    int n_else;
    jfilter_fn filter;          /* E_FILTER */
    jtest_fn test;              /* E_TEST */
    const char *params;         /* E_FILTER / E_TEST: jinja_filter_params / jinja_test_params */
} jnode;

struct xi_jinja {
    jarena ar;                  /* owns every node and constant */
    jnode *root;                /* S_BODY */
};

/* ---- render context ---- */
typedef struct jbuf {
    char *data;                 /* [cap] in the arena */
    size_t len, cap;
} jbuf;

typedef struct jframe {
    int n, cap;
    const char **names;         /* [cap] */
    jv *vals;                   /* [cap] */
} jframe;

typedef struct jctx {
    jarena ar;
    jmp_buf jb;
    char *err;
    size_t errlen;
    xi_jinja_limits lim;
    int with_strftime_now;
    jframe *frames;             /* [max_depth * 8 + 16] frames[0]: variables; then scopes */
    int n_frames, max_frames;
    int macro_base;             /* first frame visible to the running macro (0 outside) */
    jbuf *out;                  /* where output goes now (a macro call captures its own) */
    size_t out_total;           /* bytes written to any buffer */
    long steps;
    int depth;                  /* nested macro calls */
    int line;                   /* line being evaluated, for messages */
    int ctl;                    /* 1 break, 2 continue pending */
    int loop_depth;             /* for loops open in the running macro (or the template) */
    int c_depth;                /* nested jinja_eval / exec calls: bounds the C stack */
} jctx;

/* jinja_value.c */
void ja_init(jarena *a, size_t limit);
void ja_free(jarena *a);
void *ja_alloc(jarena *a, size_t n); /* NULL past the limit or out of memory */
__attribute__((noreturn, format(printf, 2, 3))) void jerr(jctx *c, const char *fmt, ...);
void *jalloc(jctx *c, size_t n);     /* ja_alloc or jerr */
jstr *jstr_new(jctx *c, const char *s, size_t len);
jv jv_str(jctx *c, const char *s, size_t len);
jv jv_strz(jctx *c, const char *s);
jv jv_list(jctx *c, int cap);
void jlist_push(jctx *c, jv list, jv item);
jv jv_dict(jctx *c, int cap);
void jdict_set(jctx *c, jdict *d, jstr *key, jv val);
jv *jdict_get(const jdict *d, const char *key, size_t len);
jv jv_from_json(jctx *c, const json_t *j, int depth);
int jv_truthy(jv v);
int jv_equal(jv a, jv b);
const char *jv_type_name(jv v);
void jbuf_put(jctx *c, jbuf *b, const char *s, size_t n);
void jbuf_putz(jctx *c, jbuf *b, const char *s);
/* Python str(v) / repr(v) appended to b. */
void jv_write_str(jctx *c, jbuf *b, jv v);
void jv_write_repr(jctx *c, jbuf *b, jv v, int depth);
jv jv_to_str(jctx *c, jv v);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent NULL = none. */
typedef struct jjson_opts {
    int ensure_ascii, sort_keys;
    const char *indent;         /* NULL: single line */
    const char *item_sep, *key_sep;
} jjson_opts;
void jv_write_json(jctx *c, jbuf *b, jv v, const jjson_opts *o, int level);
void jfloat_repr(double f, char *out, size_t n); /* Python repr of a float */
/* Next code point of UTF-8 s [n] at *i (advanced); invalid bytes decode as U+FFFD. */
uint32_t jutf8_next(const unsigned char *s, size_t n, size_t *i);

/* jinja_parse.c */
jnode *jinja_parse_source(jarena *ar, const char *src, char *err, size_t errlen);

/* jinja_lib.c: filters, tests, methods and globals */
/* A filter / test by name, or NULL; *params (when params != NULL) gets its parameter names
 * ("a,b"; "" none; NULL: any arguments). */
jfilter_fn jinja_find_filter(const char *name, const char **params);
jtest_fn jinja_find_test(const char *name, const char **params);
/* Python's argument checks: too many positional or an unknown keyword is an error. */
void jinja_check_args(jctx *c, const char *what, const char *name, const char *params, const jargs *a);
int jinja_call_method(jctx *c, jv obj, const char *name, jargs *a, jv *out);
jv jinja_global(jctx *c, const char *name);
jv jarg(jargs *a, int i, const char *name);     /* JV_UNDEF when absent */
int64_t jv_length(jctx *c, jv v);
/* Python's printf-style `fmt % args` (args: one value or a tuple), for % and |format. */
jv jinja_percent_format(jctx *c, const jstr *fmt, jv args);
/* Iterate a value as Jinja's for does: list items, dict keys, string characters. */
jv jv_iter_list(jctx *c, jv v);

/* jinja_eval.c */
jv jinja_eval(jctx *c, const jnode *e);
jv jinja_call(jctx *c, jv fn, jargs *a);
jv jinja_getattr(jctx *c, jv obj, const char *name);
jv jinja_getitem(jctx *c, jv obj, jv key);
int jinja_contains(jctx *c, jv hay, jv needle);
/* Charge n elementary operations against the step limit. */
void jinja_work(jctx *c, int64_t n);
/* Python ordering of numbers, strings and lists: <0, 0, >0; other types are an error. */
int jinja_order(jctx *c, jv a, jv b);

#endif
