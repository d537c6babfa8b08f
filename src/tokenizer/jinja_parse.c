/* jinja_parse: template source → tokens → AST, with Jinja2's lexer rules as transformers
 * configures them (trim_blocks, lstrip_blocks, newlines normalised to \n, one trailing newline
 * dropped) and Jinja2's operator precedence. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/jinja.h"

#define MAX_NESTING 200 /* expression and block nesting: deep input must not blow the C stack */

/* ==== tokens ============================================================================ */

enum { T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT,
       T_FLOAT, T_OP, T_EOF };

typedef struct tok {
    int t, line;
    const char *s;              /* T_TEXT / T_STRING (decoded) / T_NAME / T_OP text */
    size_t len;
    int64_t i;
    double f;
} tok;

typedef struct parser {
    jarena *ar;
    char *err;
    size_t errlen;
    jmp_buf jb;
    tok *toks;                  /* [n] (malloc'ed, freed after parsing) */
    int n, cap, pos;
    int depth;
    const char *src;            /* normalised source, in the arena */
    size_t src_len;
} parser;

__attribute__((noreturn, format(printf, 3, 4))) static void perr(parser *P, int line,
                                                                  const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    xi_errf(P->err, P->errlen, "chat template line %d: %s", line, msg);
    longjmp(P->jb, 1);
}

static void *palloc(parser *P, size_t n) {
    void *p = ja_alloc(P->ar, n);
    if (!p) perr(P, 0, "out of memory");
    memset(p, 0, n);
    return p;
}

static char *pstrdup(parser *P, const char *s, size_t n) {
    char *d = palloc(P, n + 1);
    memcpy(d, s, n);
    return d;
}

static tok *push_tok(parser *P, int t, int line, const char *s, size_t len) {
    if (P->n == P->cap) {
        int cap = P->cap ? P->cap * 2 : 256;
        tok *toks = realloc(P->toks, (size_t)cap * sizeof *toks);
        if (!toks) perr(P, line, "out of memory");
        P->toks = toks;
        P->cap = cap;
    }
    tok *k = &P->toks[P->n++];
    memset(k, 0, sizeof *k);
    k->t = t;
    k->line = line;
    k->s = s;
    k->len = len;
    return k;
}

/* ==== lexer ============================================================================= */

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static int is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Python's unicode-escape decoding of a string literal's body (Jinja's rule). */
static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t lex_string(parser *P, size_t p, int line, tok *k) {
    const char *s = P->src;
    char q = s[p++];
    size_t start = p;
    while (p < P->src_len && s[p] != q) p += s[p] == '\\' ? 2 : 1;
    if (p >= P->src_len) perr(P, line, "unterminated string literal");
    char *o = palloc(P, (p - start) * 4 + 1); /* \xNN → ≤ 2 bytes; \UXXXXXXXX → ≤ 4 */
    size_t n = 0;
    for (size_t i = start; i < p; i++) {
        if (s[i] != '\\') { o[n++] = s[i]; continue; }
        char e = s[++i];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        switch (e) {
        case 'n': o[n++] = '\n'; break;
        case 't': o[n++] = '\t'; break;
        case 'r': o[n++] = '\r'; break;
        case 'a': o[n++] = '\a'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'v': o[n++] = '\v'; break;
        case '\\': case '\'': case '"': o[n++] = e; break;
        case '\n': break; /* line continuation */
        default:
            if (digits) {
                uint32_t cp = 0;
                for (int d = 1; d <= digits; d++) {
                    int h = i + d < p ? hexval(s[i + d]) : -1;
                    if (h < 0) perr(P, line, "truncated \\%c escape in string literal", e);
                    cp = cp * 16 + (uint32_t)h;
                }
                if (cp > 0x10ffff) perr(P, line, "escape \\%c beyond U+10FFFF", e);
                i += (size_t)digits;
                n += put_utf8(o + n, cp);
            } else if (e >= '0' && e <= '7') {
                uint32_t cp = 0;
                int d = 0;
                for (; d < 3 && i + d < p && s[i + d] >= '0' && s[i + d] <= '7'; d++)
                    cp = cp * 8 + (uint32_t)(s[i + d] - '0');
                i += (size_t)d - 1;
                n += put_utf8(o + n, cp);
            } else {
                o[n++] = '\\'; /* unknown escapes stay as written */
                o[n++] = e;
            }
        }
    }
    o[n] = 0;
    k->s = o;
    k->len = n;
    return p + 1;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-*/%~<>=()[]{},.:|";

/* Tokens of one {{ }} or {% %} up to its end marker; returns the position after it and sets
 * *strip_after ('-' or '+' or 0) and *end_line. */
static size_t lex_tag(parser *P, size_t p, int *line, int var, int *strip_after) {
    const char *s = P->src;
    int depth = 0;
    for (;;) {
        while (p < P->src_len && is_ws(s[p])) *line += s[p++] == '\n';
        if (p >= P->src_len) perr(P, *line, "unexpected end of template inside a %s tag", var ? "{{ }}" : "{% %}");
        char end = var ? '}' : '%';
        if (depth == 0) {
            int sign = (s[p] == '-' || s[p] == '+') ? s[p] : 0;
            size_t q = p + (sign ? 1 : 0);
            if (q + 1 < P->src_len && s[q] == end && s[q + 1] == '}' && !(var && sign == '+')) {
                *strip_after = sign;
                push_tok(P, var ? T_VAR_END : T_BLOCK_END, *line, NULL, 0);
                return q + 2;
            }
        }
        char c = s[p];
        if (is_name0(c)) {
            size_t b = p;
            while (p < P->src_len && (is_name0(s[p]) || is_digit(s[p]))) p++;
            push_tok(P, T_NAME, *line, s + b, p - b);
        } else if (is_digit(c)) {
            size_t b = p;
            int is_float = 0;
            while (p < P->src_len && (is_digit(s[p]) || s[p] == '_')) p++;
            if (p + 1 < P->src_len && s[p] == '.' && is_digit(s[p + 1])) {
                is_float = 1;
                p++;
                while (p < P->src_len && (is_digit(s[p]) || s[p] == '_')) p++;
            }
            if (p < P->src_len && (s[p] == 'e' || s[p] == 'E')) {
                size_t q = p + 1;
                if (q < P->src_len && (s[q] == '+' || s[q] == '-')) q++;
                if (q < P->src_len && is_digit(s[q])) {
                    is_float = 1;
                    p = q;
                    while (p < P->src_len && is_digit(s[p])) p++;
                }
            }
            char buf[64];
            size_t n = 0;
            for (size_t i = b; i < p && n < sizeof buf - 1; i++)
                if (s[i] != '_') buf[n++] = s[i];
            buf[n] = 0;
            tok *k = push_tok(P, is_float ? T_FLOAT : T_INT, *line, s + b, p - b);
            if (is_float) k->f = strtod(buf, NULL);
            else {
                errno = 0;
                unsigned long long v = strtoull(buf, NULL, 10);
                if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
                    perr(P, *line, "integer literal %s is too large", buf);
                k->i = (int64_t)v;
            }
        } else if (c == '\'' || c == '"') {
            tok *k = push_tok(P, T_STRING, *line, NULL, 0);
            int l0 = *line;
            size_t q = lex_string(P, p, l0, k);
            *line += count_lines(s + p, q - p);
            p = q;
        } else {
            size_t oplen = 0;
            for (size_t i = 0; i < XI_ARRAY_LEN(OPS2); i++)
                if (p + 1 < P->src_len && s[p] == OPS2[i][0] && s[p + 1] == OPS2[i][1]) oplen = 2;
            if (!oplen && strchr(OPS1, c) && c) oplen = 1;
            if (!oplen) perr(P, *line, "unexpected character '%c'", c);
            if (c == '(' || c == '[' || c == '{') depth++;
            if ((c == ')' || c == ']' || c == '}') && oplen == 1) {
                if (depth == 0) perr(P, *line, "unbalanced '%c'", c);
                depth--;
            }
            push_tok(P, T_OP, *line, s + p, oplen);
            p += oplen;
        }
    }
}

/* "{% raw %}" seen: copy text verbatim up to "{% endraw %}" (with optional - / +). */
static size_t lex_raw(parser *P, size_t p, int *line) {
    const char *s = P->src;
    for (size_t q = p; q + 1 < P->src_len; q++) {
        if (s[q] != '{' || s[q + 1] != '%') continue;
        size_t r = q + 2;
        int strip_before = r < P->src_len && s[r] == '-';
        if (r < P->src_len && (s[r] == '-' || s[r] == '+')) r++;
        while (r < P->src_len && is_ws(s[r])) r++;
        if (strncmp(s + r, "endraw", 6) != 0) continue;
        r += 6;
        while (r < P->src_len && is_ws(s[r])) r++;
        int sign = (r < P->src_len && (s[r] == '-' || s[r] == '+')) ? s[r] : 0;
        if (sign) r++;
        if (r + 1 >= P->src_len || s[r] != '%' || s[r + 1] != '}') continue;
        size_t end = q;
        if (strip_before)
            while (end > p && is_ws(s[end - 1])) end--;
        if (end > p) push_tok(P, T_TEXT, *line, s + p, end - p);
        *line += count_lines(s + p, r + 2 - p);
        r += 2;
        if (sign == '-')
            while (r < P->src_len && is_ws(s[r])) *line += s[r++] == '\n';
        else if (sign != '+' && r < P->src_len && s[r] == '\n')
            r++, (*line)++;
        return r;
    }
    perr(P, *line, "{%% raw %%} without {%% endraw %%}");
}

static void lex(parser *P) {
    const char *s = P->src;
    size_t pos = 0;
    int line = 1;
    while (pos <= P->src_len) {
        size_t p = pos;
        int kind = 0;
        for (; p + 1 < P->src_len; p++)
            if (s[p] == '{' && (s[p + 1] == '{' || s[p + 1] == '%' || s[p + 1] == '#')) {
                kind = s[p + 1];
                break;
            }
        if (!kind) {
            if (P->src_len > pos) push_tok(P, T_TEXT, line, s + pos, P->src_len - pos);
            break;
        }
        char sign = (p + 2 < P->src_len && (s[p + 2] == '-' || s[p + 2] == '+')) ? s[p + 2] : 0;
        if (kind == '{' && sign == '+') sign = 0; /* {{+ is not a marker */
        /* Whitespace before the tag: '-' strips all of it; lstrip_blocks strips the spaces
         * between a line start and a block or comment tag unless the tag says '+'. */
        size_t end = p;
        if (sign == '-') {
            while (end > pos && is_ws(s[end - 1])) end--;
        } else if (sign != '+' && kind != '{') {
            size_t l = end;
            while (l > pos && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r' ||
                               s[l - 1] == '\f' || s[l - 1] == '\v'))
                l--;
            int at_line_start = l > pos ? s[l - 1] == '\n' : (pos == 0 || s[pos - 1] == '\n');
            if (at_line_start) end = l;
        }
        if (end > pos) push_tok(P, T_TEXT, line, s + pos, end - pos);
        line += count_lines(s + pos, p - pos);
        size_t q = p + 2 + (sign ? 1 : 0);
        int after = 0;
        if (kind == '#') {
            const char *c = NULL;
            for (size_t i = q; i + 1 < P->src_len; i++)
                if (s[i] == '#' && s[i + 1] == '}') { c = s + i; break; }
            if (!c) perr(P, line, "unterminated comment");
            size_t ce = (size_t)(c - s);
            after = (ce > q && (s[ce - 1] == '-' || s[ce - 1] == '+')) ? s[ce - 1] : 0;
            line += count_lines(s + p, ce + 2 - p);
            q = ce + 2;
        } else {
            int var = kind == '{';
            int first = P->n;
            push_tok(P, var ? T_VAR_BEGIN : T_BLOCK_BEGIN, line, NULL, 0);
            q = lex_tag(P, q, &line, var, &after);
            if (!var && P->n == first + 3 && P->toks[first + 1].t == T_NAME &&
                P->toks[first + 1].len == 3 && !memcmp(P->toks[first + 1].s, "raw", 3)) {
                P->n = first; /* the raw tag leaves no tokens, only its text */
                if (after == '-')
                    while (q < P->src_len && is_ws(s[q])) line += s[q++] == '\n';
                else if (after != '+' && q < P->src_len && s[q] == '\n')
                    q++, line++;
                pos = lex_raw(P, q, &line);
                continue;
            }
            if (var) after = after == '-' ? '-' : 0;
        }
        /* Whitespace after: '-' strips all; trim_blocks drops one newline after a block or
         * comment tag unless it ends with '+'. */
        if (after == '-') {
            while (q < P->src_len && is_ws(s[q])) line += s[q++] == '\n';
        } else if (after != '+' && kind != '{' && q < P->src_len && s[q] == '\n') {
            q++;
            line++;
        }
        pos = q;
    }
    push_tok(P, T_EOF, line, NULL, 0);
}

/* ==== parser helpers ==================================================================== */

static tok *cur(parser *P) { return &P->toks[P->pos]; }
static tok *peek(parser *P, int k) {
    int i = P->pos + k;
    return &P->toks[i < P->n ? i : P->n - 1];
}
static int tok_is(const tok *k, int t, const char *s) {
    return k->t == t && (!s || (k->len == strlen(s) && !memcmp(k->s, s, k->len)));
}
static int is_op(parser *P, const char *s) { return tok_is(cur(P), T_OP, s); }
static int is_name(parser *P, const char *s) { return tok_is(cur(P), T_NAME, s); }
static int accept_op(parser *P, const char *s) {
    if (!is_op(P, s)) return 0;
    P->pos++;
    return 1;
}
static int accept_name(parser *P, const char *s) {
    if (!is_name(P, s)) return 0;
    P->pos++;
    return 1;
}

static const char *tok_desc(parser *P, const tok *k) {
    switch (k->t) {
    case T_EOF: return "end of template";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_END: return "'%}'";
    case T_STRING: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    default: {
        char *d = palloc(P, k->len + 3);
        snprintf(d, k->len + 3, "'%.*s'", (int)k->len, k->s);
        return d;
    }
    }
}

static void expect_op(parser *P, const char *s) {
    if (!accept_op(P, s)) perr(P, cur(P)->line, "expected '%s', found %s", s, tok_desc(P, cur(P)));
}

static const char *expect_name(parser *P) {
    tok *k = cur(P);
    if (k->t != T_NAME) perr(P, k->line, "expected a name, found %s", tok_desc(P, k));
    P->pos++;
    return pstrdup(P, k->s, k->len);
}

static void expect_block_end(parser *P) {
    if (cur(P)->t != T_BLOCK_END)
        perr(P, cur(P)->line, "expected '%%}', found %s", tok_desc(P, cur(P)));
    P->pos++;
}

static jnode *node(parser *P, int kind, int line) {
    jnode *n = palloc(P, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

/* Growable node-pointer list built during parsing. */
typedef struct nlist {
    jnode **v;
    int n, cap;
} nlist;

static void nl_push(parser *P, nlist *l, jnode *x) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        jnode **v = palloc(P, (size_t)cap * sizeof *v);
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

typedef struct slist {
    const char **v;
    int n, cap;
} slist;

static void sl_push(parser *P, slist *l, const char *x) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        const char **v = palloc(P, (size_t)cap * sizeof *v);
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static void enter(parser *P) {
    if (++P->depth > MAX_NESTING) perr(P, cur(P)->line, "nesting deeper than %d", MAX_NESTING);
}

/* ==== expressions ======================================================================= */

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, int with_filter);

static jnode *parse_tuple(parser *P, int with_cond) {
    int line = cur(P)->line;
    jnode *first = with_cond ? parse_expr(P) : parse_or(P);
    if (!is_op(P, ",")) return first;
    nlist items = {0};
    nl_push(P, &items, first);
    while (accept_op(P, ",")) {
        tok *k = cur(P);
        if (k->t == T_BLOCK_END || k->t == T_VAR_END || tok_is(k, T_OP, ")") ||
            tok_is(k, T_NAME, "if") || tok_is(k, T_OP, "="))
            break;
        nl_push(P, &items, with_cond ? parse_expr(P) : parse_or(P));
    }
    jnode *t = node(P, E_TUPLE, line);
    t->list = items.v;
    t->n = items.n;
    return t;
}

/* Call arguments after '(' up to ')': positional into list, keywords into names/list2. */
static void parse_args(parser *P, jnode *call) {
    nlist pos = {0}, kwv = {0};
    slist kwn = {0};
    while (!accept_op(P, ")")) {
        if (pos.n + kwv.n) expect_op(P, ",");
        if (accept_op(P, ")")) break; /* trailing comma */
        if (cur(P)->t == T_NAME && tok_is(peek(P, 1), T_OP, "=")) {
            sl_push(P, &kwn, expect_name(P));
            P->pos++;
            nl_push(P, &kwv, parse_expr(P));
        } else {
            if (kwv.n) perr(P, cur(P)->line, "positional argument after keyword argument");
            nl_push(P, &pos, parse_expr(P));
        }
    }
    call->list = pos.v;
    call->n = pos.n;
    call->names = kwn.v;
    call->n_names = kwn.n;
    call->list2 = kwv.v;
    call->n2 = kwv.n;
}

static jnode *parse_primary(parser *P) {
    tok *k = cur(P);
    jnode *n;
    enter(P);
    switch (k->t) {
    case T_NAME: {
        P->pos++;
        static const char *const consts[] = {"true", "True", "false", "False", "none", "None"};
        for (int i = 0; i < 6; i++)
            if (tok_is(k, T_NAME, consts[i])) {
                n = node(P, E_CONST, k->line);
                n->val = i < 2 ? jv_bool(1) : i < 4 ? jv_bool(0) : jv_none();
                P->depth--;
                return n;
            }
        n = node(P, E_NAME, k->line);
        n->name = pstrdup(P, k->s, k->len);
        break;
    }
    case T_STRING: {
        /* adjacent literals concatenate, as in Python */
        size_t len = 0;
        int e = P->pos;
        while (P->toks[e].t == T_STRING) len += P->toks[e++].len;
        jstr *s = palloc(P, sizeof *s + len + 1);
        for (; P->pos < e; P->pos++) {
            memcpy(s->s + s->len, cur(P)->s, cur(P)->len);
            s->len += cur(P)->len;
        }
        n = node(P, E_CONST, k->line);
        n->val.t = JV_STR;
        n->val.u.s = s;
        break;
    }
    case T_INT: P->pos++; n = node(P, E_CONST, k->line); n->val = jv_int(k->i); break;
    case T_FLOAT: P->pos++; n = node(P, E_CONST, k->line); n->val = jv_float(k->f); break;
    case T_OP:
        if (accept_op(P, "(")) {
            if (accept_op(P, ")")) {
                n = node(P, E_TUPLE, k->line);
                break;
            }
            n = parse_tuple(P, 1);
            expect_op(P, ")");
            break;
        }
        if (accept_op(P, "[")) {
            nlist items = {0};
            while (!accept_op(P, "]")) {
                if (items.n) expect_op(P, ",");
                if (accept_op(P, "]")) break;
                nl_push(P, &items, parse_expr(P));
            }
            n = node(P, E_LIST, k->line);
            n->list = items.v;
            n->n = items.n;
            break;
        }
        if (accept_op(P, "{")) {
            nlist keys = {0}, vals = {0};
            while (!accept_op(P, "}")) {
                if (keys.n) expect_op(P, ",");
                if (accept_op(P, "}")) break;
                nl_push(P, &keys, parse_expr(P));
                expect_op(P, ":");
                nl_push(P, &vals, parse_expr(P));
            }
            n = node(P, E_DICT, k->line);
            n->list = keys.v;
            n->n = keys.n;
            n->list2 = vals.v;
            n->n2 = vals.n;
            break;
        }
        /* fallthrough */
    default: perr(P, k->line, "unexpected %s", tok_desc(P, k));
    }
    P->depth--;
    return n;
}

static jnode *parse_postfix(parser *P, jnode *n) {
    for (;;) {
        int line = cur(P)->line;
        if (accept_op(P, ".")) {
            tok *k = cur(P);
            if (k->t == T_INT) { /* x.0 is x[0] */
                P->pos++;
                jnode *it = node(P, E_ITEM, line);
                it->a = n;
                it->b = node(P, E_CONST, line);
                it->b->val = jv_int(k->i);
                n = it;
                continue;
            }
            jnode *at = node(P, E_ATTR, line);
            at->a = n;
            at->name = expect_name(P);
            n = at;
        } else if (accept_op(P, "[")) {
            jnode *lo = NULL, *hi = NULL, *step = NULL;
            int slice = 0;
            if (!is_op(P, ":")) lo = parse_expr(P);
            if (accept_op(P, ":")) {
                slice = 1;
                if (!is_op(P, "]") && !is_op(P, ":")) hi = parse_expr(P);
                if (accept_op(P, ":") && !is_op(P, "]")) step = parse_expr(P);
            }
            expect_op(P, "]");
            jnode *it = node(P, slice ? E_SLICE : E_ITEM, line);
            it->a = n;
            if (slice) {
                it->list = palloc(P, 3 * sizeof(jnode *));
                it->list[0] = lo;
                it->list[1] = hi;
                it->list[2] = step;
                it->n = 3;
            } else {
                it->b = lo;
            }
            n = it;
        } else if (accept_op(P, "(")) {
            jnode *call = node(P, E_CALL, line);
            call->a = n;
            parse_args(P, call);
            n = call;
        } else {
            return n;
        }
    }
}

static jnode *parse_filters(parser *P, jnode *n) {
    for (;;) {
        int line = cur(P)->line;
        if (accept_op(P, "|")) {
            jnode *f = node(P, E_FILTER, line);
            f->a = n;
            f->name = expect_name(P);
            f->filter = jinja_find_filter(f->name, &f->params); /* NULL: see check_names */
            if (accept_op(P, "(")) parse_args(P, f);
            n = f;
        } else if (accept_name(P, "is")) {
            jnode *t = node(P, E_TEST, line);
            t->op = accept_name(P, "not");
            t->a = n;
            t->name = expect_name(P);
            t->test = jinja_find_test(t->name, &t->params);
            tok *k = cur(P);
            if (accept_op(P, "(")) {
                parse_args(P, t);
            } else if ((k->t == T_NAME || k->t == T_STRING || k->t == T_INT || k->t == T_FLOAT ||
                        tok_is(k, T_OP, "[") || tok_is(k, T_OP, "{")) &&
                       !tok_is(k, T_NAME, "else") && !tok_is(k, T_NAME, "or") &&
                       !tok_is(k, T_NAME, "and") && !tok_is(k, T_NAME, "is") &&
                       !tok_is(k, T_NAME, "if") && !tok_is(k, T_NAME, "in") &&
                       !tok_is(k, T_NAME, "not")) {
                t->list = palloc(P, sizeof(jnode *));
                t->list[0] = parse_postfix(P, parse_primary(P));
                t->n = 1;
            }
            n = t;
        } else {
            return n;
        }
    }
}

static jnode *parse_unary(parser *P, int with_filter) {
    int line = cur(P)->line;
    jnode *n;
    enter(P);
    if (accept_op(P, "-")) {
        n = node(P, E_NEG, line);
        n->a = parse_unary(P, 0);
    } else if (accept_op(P, "+")) {
        n = node(P, E_POS, line);
        n->a = parse_unary(P, 0);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filters(P, n);
    P->depth--;
    return n;
}

static jnode *binary(parser *P, int op, jnode *a, jnode *b, int line) {
    jnode *n = node(P, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *n = parse_unary(P, 1);
    while (is_op(P, "**")) {
        int line = cur(P)->line;
        P->pos++;
        n = binary(P, OP_POW, n, parse_unary(P, 1), line);
    }
    return n;
}

static jnode *parse_math2(parser *P) {
    jnode *n = parse_pow(P);
    for (;;) {
        int line = cur(P)->line, op;
        if (accept_op(P, "*")) op = OP_MUL;
        else if (accept_op(P, "/")) op = OP_DIV;
        else if (accept_op(P, "//")) op = OP_FLOORDIV;
        else if (accept_op(P, "%")) op = OP_MOD;
        else return n;
        n = binary(P, op, n, parse_pow(P), line);
    }
}

static jnode *parse_concat(parser *P) {
    jnode *n = parse_math2(P);
    while (is_op(P, "~")) {
        int line = cur(P)->line;
        P->pos++;
        n = binary(P, OP_CONCAT, n, parse_math2(P), line);
    }
    return n;
}

static jnode *parse_math1(parser *P) {
    jnode *n = parse_concat(P);
    for (;;) {
        int line = cur(P)->line, op;
        if (accept_op(P, "+")) op = OP_ADD;
        else if (accept_op(P, "-")) op = OP_SUB;
        else return n;
        n = binary(P, op, n, parse_concat(P), line);
    }
}

static jnode *parse_compare(parser *P) {
    int line = cur(P)->line;
    jnode *first = parse_math1(P);
    nlist operands = {0};
    int ops[64], n_ops = 0;
    for (;;) {
        int op = -1;
        static const char *const syms[] = {"==", "!=", "<", "<=", ">", ">="};
        static const int codes[] = {OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
        for (int i = 0; i < 6; i++)
            if (is_op(P, syms[i])) op = codes[i];
        if (op >= 0) P->pos++;
        else if (accept_name(P, "in")) op = OP_IN;
        else if (is_name(P, "not") && tok_is(peek(P, 1), T_NAME, "in")) {
            P->pos += 2;
            op = OP_NOTIN;
        } else break;
        if (n_ops == 64) perr(P, line, "comparison chain too long");
        if (!operands.n) nl_push(P, &operands, first);
        ops[n_ops++] = op;
        nl_push(P, &operands, parse_math1(P));
    }
    if (!n_ops) return first;
    jnode *n = node(P, E_CMP, line);
    n->list = operands.v;
    n->n = operands.n;
    n->ops = palloc(P, (size_t)n_ops * sizeof(int));
    memcpy(n->ops, ops, (size_t)n_ops * sizeof(int));
    return n;
}

static jnode *parse_not(parser *P) {
    int line = cur(P)->line;
    if (accept_name(P, "not")) {
        enter(P);
        jnode *n = node(P, E_NOT, line);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P) {
    jnode *n = parse_not(P);
    while (is_name(P, "and")) {
        jnode *a = node(P, E_AND, cur(P)->line);
        P->pos++;
        a->a = n;
        a->b = parse_not(P);
        n = a;
    }
    return n;
}

static jnode *parse_or(parser *P) {
    jnode *n = parse_and(P);
    while (is_name(P, "or")) {
        jnode *o = node(P, E_OR, cur(P)->line);
        P->pos++;
        o->a = n;
        o->b = parse_and(P);
        n = o;
    }
    return n;
}

static jnode *parse_expr(parser *P) {
    enter(P);
    jnode *n = parse_or(P);
    while (is_name(P, "if")) {
        jnode *c = node(P, E_COND, cur(P)->line);
        P->pos++;
        c->a = n;
        c->b = parse_or(P);
        if (accept_name(P, "else")) c->c = parse_expr(P);
        n = c;
    }
    P->depth--;
    return n;
}

/* ==== statements ======================================================================== */

static jnode *parse_body(parser *P, const char *const *stop, int n_stop, const char **found);

/* Names of assignment targets: `a`, `a, b`, or `(a, b)`. */
static void parse_targets(parser *P, slist *names) {
    int paren = accept_op(P, "(");
    do {
        sl_push(P, names, expect_name(P));
    } while (accept_op(P, ","));
    if (paren) expect_op(P, ")");
}

static jnode *parse_if(parser *P, int line) {
    jnode *n = node(P, S_IF, line);
    n->a = parse_tuple(P, 1);
    expect_block_end(P);
    static const char *const stop[] = {"elif", "else", "endif"};
    const char *found;
    jnode *body = parse_body(P, stop, 3, &found);
    n->body = body->body;
    n->n_body = body->n_body;
    if (!strcmp(found, "elif")) {
        n->orelse = palloc(P, sizeof(jnode *));
        enter(P); /* an elif chain recurses */
        n->orelse[0] = parse_if(P, cur(P)->line);
        n->n_else = 1;
        P->depth--;
        return n; /* the innermost elif consumed endif */
    }
    if (!strcmp(found, "else")) {
        expect_block_end(P);
        static const char *const stop2[] = {"endif"};
        jnode *e = parse_body(P, stop2, 1, &found);
        n->orelse = e->body;
        n->n_else = e->n_body;
    }
    expect_block_end(P);
    return n;
}

static jnode *parse_statement(parser *P) {
    int line = cur(P)->line;
    const char *kw = expect_name(P);
    const char *found;
    if (!strcmp(kw, "if")) return parse_if(P, line);
    if (!strcmp(kw, "for")) {
        jnode *n = node(P, S_FOR, line);
        slist names = {0};
        parse_targets(P, &names);
        n->names = names.v;
        n->n_names = names.n;
        if (!accept_name(P, "in")) perr(P, line, "expected 'in' in for");
        n->a = parse_tuple(P, 0);
        if (accept_name(P, "if")) n->b = parse_expr(P);
        if (accept_name(P, "recursive")) perr(P, line, "recursive for loops are not supported");
        expect_block_end(P);
        static const char *const stop[] = {"endfor", "else"};
        jnode *body = parse_body(P, stop, 2, &found);
        n->body = body->body;
        n->n_body = body->n_body;
        if (!strcmp(found, "else")) {
            expect_block_end(P);
            static const char *const stop2[] = {"endfor"};
            jnode *e = parse_body(P, stop2, 1, &found);
            n->orelse = e->body;
            n->n_else = e->n_body;
        }
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "set")) {
        slist names = {0};
        const char *first = expect_name(P);
        if (accept_op(P, ".")) { /* set ns.attr = value */
            jnode *n = node(P, S_SET, line);
            n->name = first;
            sl_push(P, &names, expect_name(P));
            n->names = names.v;
            n->n_names = 1;
            n->op = 1;
            expect_op(P, "=");
            n->a = parse_tuple(P, 1);
            expect_block_end(P);
            return n;
        }
        sl_push(P, &names, first);
        while (accept_op(P, ",")) sl_push(P, &names, expect_name(P));
        if (cur(P)->t == T_BLOCK_END && names.n == 1) { /* {% set x %}...{% endset %} */
            P->pos++;
            jnode *n = node(P, S_SET_BLOCK, line);
            n->name = first;
            static const char *const stop[] = {"endset"};
            jnode *body = parse_body(P, stop, 1, &found);
            n->body = body->body;
            n->n_body = body->n_body;
            expect_block_end(P);
            return n;
        }
        jnode *n = node(P, S_SET, line);
        n->names = names.v;
        n->n_names = names.n;
        expect_op(P, "=");
        n->a = parse_tuple(P, 1);
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "macro")) {
        jnode *n = node(P, S_MACRO, line);
        n->name = expect_name(P);
        expect_op(P, "(");
        slist params = {0};
        nlist defaults = {0};
        while (!accept_op(P, ")")) {
            if (params.n) expect_op(P, ",");
            if (accept_op(P, ")")) break;
            sl_push(P, &params, expect_name(P));
            if (accept_op(P, "=")) nl_push(P, &defaults, parse_expr(P));
            else if (defaults.n) perr(P, line, "macro %s: parameter without default after one with", n->name);
            else nl_push(P, &defaults, NULL);
        }
        n->names = params.v;
        n->n_names = params.n;
        n->list2 = defaults.v;
        n->n2 = defaults.n;
        expect_block_end(P);
        static const char *const stop[] = {"endmacro"};
        jnode *body = parse_body(P, stop, 1, &found);
        n->body = body->body;
        n->n_body = body->n_body;
        if (cur(P)->t == T_NAME) P->pos++; /* {% endmacro name %} */
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        expect_block_end(P);
        return node(P, kw[0] == 'b' ? S_BREAK : S_CONTINUE, line);
    }
    if (!strcmp(kw, "with")) { /* {% with a = 1, b = 2 %}...{% endwith %}: a scope */
        jnode *n = node(P, S_WITH, line);
        slist names = {0};
        nlist vals = {0};
        while (cur(P)->t != T_BLOCK_END) {
            if (names.n) expect_op(P, ",");
            sl_push(P, &names, expect_name(P));
            expect_op(P, "=");
            nl_push(P, &vals, parse_expr(P));
        }
        expect_block_end(P);
        n->names = names.v;
        n->n_names = names.n;
        n->list = vals.v;
        n->n = vals.n;
        static const char *const stop[] = {"endwith"};
        jnode *body = parse_body(P, stop, 1, &found);
        n->body = body->body;
        n->n_body = body->n_body;
        expect_block_end(P);
        return n;
    }
    if (!strcmp(kw, "generation")) { /* transformers' assistant-mask marker: just its body */
        expect_block_end(P);
        static const char *const stop[] = {"endgeneration"};
        jnode *body = parse_body(P, stop, 1, &found);
        expect_block_end(P);
        return body;
    }
    perr(P, line, "unknown or unsupported tag '%s'", kw);
}

/* Statements until a block tag named in stop (left after its name, *found = the name) or
 * the end of the template (only when stop is empty). */
static jnode *parse_body(parser *P, const char *const *stop, int n_stop, const char **found) {
    jnode *b = node(P, S_BODY, cur(P)->line);
    nlist items = {0};
    enter(P);
    for (;;) {
        tok *k = cur(P);
        if (k->t == T_EOF) {
            if (n_stop) perr(P, k->line, "unexpected end of template: expected '%s'", stop[0]);
            break;
        }
        if (k->t == T_TEXT) {
            jnode *t = node(P, S_TEXT, k->line);
            t->val.t = JV_STR;
            jstr *s = palloc(P, sizeof *s + k->len + 1);
            memcpy(s->s, k->s, k->len);
            s->len = k->len;
            t->val.u.s = s;
            nl_push(P, &items, t);
            P->pos++;
        } else if (k->t == T_VAR_BEGIN) {
            P->pos++;
            jnode *o = node(P, S_OUT, k->line);
            o->a = parse_tuple(P, 1);
            if (cur(P)->t != T_VAR_END)
                perr(P, cur(P)->line, "expected '}}', found %s", tok_desc(P, cur(P)));
            P->pos++;
            nl_push(P, &items, o);
        } else if (k->t == T_BLOCK_BEGIN) {
            tok *name = peek(P, 1);
            int stopped = 0;
            for (int i = 0; i < n_stop; i++)
                if (tok_is(name, T_NAME, stop[i])) {
                    *found = stop[i];
                    P->pos += 2;
                    stopped = 1;
                }
            if (stopped) break;
            if (name->t == T_NAME && name->len > 3 && !memcmp(name->s, "end", 3))
                perr(P, name->line, "unexpected '%.*s'%s%s", (int)name->len, name->s,
                     n_stop ? ", expected " : "", n_stop ? stop[0] : "");
            if (name->t == T_NAME && (tok_is(name, T_NAME, "elif") || tok_is(name, T_NAME, "else")))
                perr(P, name->line, "unexpected '%.*s'", (int)name->len, name->s);
            P->pos++;
            nl_push(P, &items, parse_statement(P));
        } else {
            perr(P, k->line, "unexpected %s", tok_desc(P, k));
        }
    }
    P->depth--;
    b->body = items.v;
    b->n_body = items.n;
    return b;
}

/* Unknown filters and tests are compile-time errors in Jinja, except inside an if (test or
 * branches) or a conditional expression, where they fail only if evaluated: templates may
 * guard optional filters there. for, macro, with and block-set bodies start a hard scope. */
static void check_names(parser *P, const jnode *n, int soft, int depth) {
    if (!n) return;
    /* operator chains (a + b + ...) deepen the tree without nesting; bound the walk here and
     * evaluation later */
    if (depth > 2000) perr(P, n->line, "expression or nesting deeper than 2000 nodes");
    if (!soft && n->kind == E_FILTER && !n->filter) perr(P, n->line, "no filter named '%s'", n->name);
    if (!soft && n->kind == E_TEST && !n->test) perr(P, n->line, "no test named '%s'", n->name);
    int inner = soft;
    if (n->kind == S_IF || n->kind == E_COND) inner = 1;
    int body_soft = (n->kind == S_FOR || n->kind == S_MACRO || n->kind == S_WITH ||
                     n->kind == S_SET_BLOCK) ? 0 : inner;
    check_names(P, n->a, inner, depth + 1);
    check_names(P, n->b, n->kind == S_FOR ? 0 : inner, depth + 1);
    check_names(P, n->c, inner, depth + 1);
    for (int i = 0; i < n->n; i++) check_names(P, n->list[i], inner, depth + 1);
    for (int i = 0; i < n->n2; i++) check_names(P, n->list2[i], n->kind == S_MACRO ? 0 : inner, depth + 1);
    for (int i = 0; i < n->n_body; i++) check_names(P, n->body[i], body_soft, depth + 1);
    for (int i = 0; i < n->n_else; i++) check_names(P, n->orelse[i], body_soft, depth + 1);
}

jnode *jinja_parse_source(jarena *ar, const char *src, char *err, size_t errlen) {
    parser P = {.ar = ar, .err = err, .errlen = errlen};
    if (setjmp(P.jb)) {
        free(P.toks);
        return NULL;
    }
    /* Jinja normalises \r\n and \r to \n and drops one trailing newline. */
    size_t n = strlen(src);
    char *s = palloc(&P, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k > 0 && s[k - 1] == '\n') k--;
    s[k] = 0;
    P.src = s;
    P.src_len = k;
    lex(&P);
    const char *found = NULL;
    jnode *root = parse_body(&P, NULL, 0, &found);
    check_names(&P, root, 0, 0);
    free(P.toks);
    return root;
}
