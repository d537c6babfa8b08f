/* sample/grammar_gbnf: llama.cpp's GBNF grammar format compiled to grammar rules.
 *
 *   root  ::= "yes" | "no" | item+        # comments run to the end of the line
 *   item  ::= [a-z0-9_]{1,8} ("," ws)?    # literals, [classes], [^negated], ., groups,
 *   ws    ::= [ \t\n]*                    # * + ? {m} {m,} {m,n}
 *
 * Rules may be used before they are defined; `root` is the start. A rule ends at the end of
 * its line unless the next line continues it with '|' or a group is still open. Literals and
 * classes are over code points (UTF-8), with the escapes \n \r \t \\ \" \[ \] \- \xHH
 * \uHHHH \UHHHHHHHH. */
#include <stdlib.h>
#include <string.h>

#include "sample/grammar_internal.h"

typedef struct gp {
    xg_build *b;
    const char *s;
    size_t n, i;
    int depth;
} gp;

static int gfail(gp *p, const char *what) {
    int line = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) line += p->s[k] == '\n';
    return xg_fail(p->b, "grammar: %s (line %d)", what, line);
}

/* spaces and comments; newlines too when nl */
static void skip(gp *p, int nl) {
    while (p->i < p->n) {
        const char c = p->s[p->i];
        if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
        } else if (c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n')) p->i++;
        else break;
    }
}

static int is_name(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int rule_named(gp *p, const char *name, size_t len) {
    for (int r = 0; r < p->b->n_rules; r++) {
        const char *nm = p->b->rules[r].name;
        if (nm && strlen(nm) == len && !memcmp(nm, name, len)) return r;
    }
    int r = xg_rule_new(p->b);
    if (r < 0) return -1;
    char *nm = malloc(len + 1);
    if (!nm) return xg_fail(p->b, "grammar: out of memory");
    memcpy(nm, name, len);
    nm[len] = 0;
    p->b->rules[r].name = nm;
    return r;
}

static int hex(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One code point of a literal or class (escapes decoded); -1 on error. */
static int64_t char_at(gp *p) {
    const uint8_t *s = (const uint8_t *)p->s;
    if (p->i >= p->n) return -1;
    if (s[p->i] == '\\') {
        if (++p->i >= p->n) return -1;
        const char e = (char)s[p->i++];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = p->i < p->n ? hex(s[p->i]) : -1;
                if (h < 0) return -1;
                v = v * 16 + (uint32_t)h;
                p->i++;
            }
            return v > 0x10ffff ? -1 : (int64_t)v;
        }
        switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return e;
        default: return -1;
        }
    }
    return xg_utf8_next(p->s, p->n, &p->i);
}

static int parse_alternates(gp *p, int rule, int nested);

static int parse_class(gp *p, xg_seq *atom) {
    int negate = 0;
    if (p->i < p->n && p->s[p->i] == '^') negate = 1, p->i++;
    xg_cp_range *r = NULL;
    int n = 0, cap = 0;
    while (p->i < p->n && p->s[p->i] != ']') {
        int64_t lo = char_at(p), hi;
        if (lo < 0) break;
        hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            hi = char_at(p);
            if (hi < lo) {
                free(r);
                return gfail(p, "a bad range in a character class");
            }
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            xg_cp_range *v = realloc(r, (size_t)cap * sizeof *v);
            if (!v) return free(r), xg_fail(p->b, "grammar: out of memory");
            r = v;
        }
        r[n++] = (xg_cp_range){(uint32_t)lo, (uint32_t)hi};
    }
    if (p->i >= p->n || p->s[p->i] != ']') {
        free(r);
        return gfail(p, "an unterminated or bad character class");
    }
    p->i++;
    int rule = xg_cp_class(p->b, r, n, negate);
    free(r);
    if (rule < 0) return -1;
    xg_seq_ref(p->b, atom, rule);
    return 0;
}

static int parse_sequence(gp *p, xg_seq *seq, int nested) {
    for (;;) {
        skip(p, nested);
        if (p->i >= p->n || p->b->failed) break;
        const char c = p->s[p->i];
        if (c == '|' || c == ')' || c == '\n') break;
        xg_seq atom = {0};
        if (c == '"') {
            p->i++;
            while (p->i < p->n && p->s[p->i] != '"') {
                int64_t cp = char_at(p);
                if (cp < 0) return xg_seq_free(&atom), gfail(p, "a bad character in a string literal");
                xg_seq_cp(p->b, &atom, (uint32_t)cp);
            }
            if (p->i >= p->n) return xg_seq_free(&atom), gfail(p, "an unterminated string literal");
            p->i++;
        } else if (c == '[') {
            p->i++;
            if (parse_class(p, &atom)) return xg_seq_free(&atom), -1;
        } else if (c == '.') {
            p->i++;
            xg_cp_range all = {0, 0x10ffff};
            xg_seq_ref(p->b, &atom, xg_cp_class(p->b, &all, 1, 0));
        } else if (c == '(') {
            p->i++;
            if (++p->depth > 100) return gfail(p, "groups nested too deep");
            int r = xg_rule_new(p->b);
            if (parse_alternates(p, r, 1)) return xg_seq_free(&atom), -1;
            p->depth--;
            skip(p, 1);
            if (p->i >= p->n || p->s[p->i] != ')') return xg_seq_free(&atom), gfail(p, "a missing ')'");
            p->i++;
            xg_seq_ref(p->b, &atom, r);
        } else if (is_name(c)) {
            size_t j = p->i;
            while (j < p->n && is_name(p->s[j])) j++;
            /* the next rule's "name ::=" ends this one */
            size_t k = j;
            while (k < p->n && (p->s[k] == ' ' || p->s[k] == '\t')) k++;
            if (k + 2 < p->n && !memcmp(p->s + k, "::=", 3)) break;
            int r = rule_named(p, p->s + p->i, j - p->i);
            p->i = j;
            if (r < 0) return -1;
            xg_seq_ref(p->b, &atom, r);
        } else {
            return gfail(p, "an unexpected character");
        }
        for (;;) { /* quantifiers */
            if (p->i >= p->n) break;
            const char q = p->s[p->i];
            int min, max;
            if (q == '*') min = 0, max = -1;
            else if (q == '+') min = 1, max = -1;
            else if (q == '?') min = 0, max = 1;
            else if (q == '{') {
                size_t j = p->i + 1;
                long a = 0, bnd = -1;
                int d = 0;
                while (j < p->n && p->s[j] == ' ') j++;
                while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && a < 100000) a = a * 10 + (p->s[j++] - '0'), d++;
                while (j < p->n && p->s[j] == ' ') j++;
                if (!d) return xg_seq_free(&atom), gfail(p, "a bad {m,n} repetition");
                if (j < p->n && p->s[j] == ',') {
                    j++;
                    while (j < p->n && p->s[j] == ' ') j++;
                    if (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
                        bnd = 0;
                        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && bnd < 100000) bnd = bnd * 10 + (p->s[j++] - '0');
                    }
                    while (j < p->n && p->s[j] == ' ') j++;
                } else bnd = a;
                if (j >= p->n || p->s[j] != '}') return xg_seq_free(&atom), gfail(p, "a bad {m,n} repetition");
                p->i = j;
                min = (int)a;
                max = (int)bnd;
            } else break;
            p->i++;
            int r = xg_rep(p->b, &atom, min, max);
            if (r < 0) return xg_seq_free(&atom), -1;
            atom.n = 0;
            xg_seq_ref(p->b, &atom, r);
        }
        xg_seq_append(p->b, seq, &atom);
        xg_seq_free(&atom);
    }
    return p->b->failed ? -1 : 0;
}

static int parse_alternates(gp *p, int rule, int nested) {
    xg_seq s = {0};
    for (;;) {
        s.n = 0;
        if (parse_sequence(p, &s, nested) || xg_add_alt(p->b, rule, &s)) break;
        /* a '|' may continue the rule on the next line */
        size_t save = p->i;
        skip(p, 1);
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        p->i = save;
        break;
    }
    xg_seq_free(&s);
    return p->b->failed ? -1 : 0;
}

int xg_compile_gbnf(xg_build *b, const char *src, size_t len) {
    gp p = {.b = b, .s = src, .n = len};
    for (;;) {
        skip(&p, 1);
        if (p.i >= p.n || b->failed) break;
        size_t j = p.i;
        while (j < p.n && is_name(p.s[j])) j++;
        if (j == p.i) return gfail(&p, "expected a rule name");
        int r = rule_named(&p, p.s + p.i, j - p.i);
        if (r < 0) return -1;
        if (b->rules[r].defined) return gfail(&p, "a rule defined twice");
        p.i = j;
        skip(&p, 0);
        if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3)) return gfail(&p, "expected '::='");
        p.i += 3;
        skip(&p, 1);
        if (parse_alternates(&p, r, 0)) return -1;
        skip(&p, 0);
        if (p.i < p.n && p.s[p.i] != '\n') return gfail(&p, "unexpected text after a rule");
    }
    if (b->failed) return -1;
    int root = -1;
    for (int r = 0; r < b->n_rules; r++) {
        const char *nm = b->rules[r].name;
        if (!nm) continue;
        if (!b->rules[r].defined) return xg_fail(b, "grammar: rule '%s' is used but not defined", nm);
        if (!strcmp(nm, "root")) root = r;
    }
    if (root < 0) return xg_fail(b, "grammar: no 'root' rule");
    return root;
}
