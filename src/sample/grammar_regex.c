/* sample/grammar_regex: a regular expression compiled to grammar rules (an automaton
 * compiler, not a matcher: the engine's grammar matcher runs the result). The syntax is the
 * common subset of Python's re, ECMAScript and PCRE that guided_regex and JSON Schema's
 * "pattern" use: | ( ) (?: ) named groups, * + ? {m} {m,} {m,n} (lazy forms match the same
 * language), . [classes] \d \w \s and their negations, escapes \n \t \r \f \v \xHH \uHHHH,
 * anchors ^ $ at the ends. Backreferences, lookaround, word boundaries, flags and possessive
 * quantifiers are errors naming the construct. The pattern matches the whole output.
 *
 * json_string: the pattern describes a JSON string's value and the output is its body, so
 * '"', '\' and control characters come out escaped. */
#include <stdlib.h>
#include <string.h>

#include "sample/grammar_internal.h"

typedef struct rx {
    xg_build *b;
    const char *s;
    size_t n, i;
    int json;
    int depth;
} rx;

typedef struct cls {
    xg_cp_range *r;
    int n, cap;
} cls;

static int rx_fail(rx *p, const char *what) {
    return xg_fail(p->b, "regex: %s at offset %zu", what, p->i);
}

static void cls_add(rx *p, cls *c, uint32_t lo, uint32_t hi) {
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        xg_cp_range *v = realloc(c->r, (size_t)cap * sizeof *v);
        if (!v) {
            xg_fail(p->b, "regex: out of memory");
            return;
        }
        c->r = v;
        c->cap = cap;
    }
    c->r[c->n++] = (xg_cp_range){lo, hi};
}

/* The complement of ranges [from, to) of c, appended to c itself. */
static void cls_add_negated(rx *p, cls *c, const xg_cp_range *r, int n) {
    uint32_t next = 0;
    /* r is small and sorted by construction (the \d \w \s tables) */
    for (int i = 0; i < n; i++) {
        if (r[i].lo > next) cls_add(p, c, next, r[i].lo - 1);
        next = r[i].hi + 1;
    }
    if (next <= 0x10ffff) cls_add(p, c, next, 0x10ffff);
}

static const xg_cp_range DIGIT[] = {{'0', '9'}};
static const xg_cp_range WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const xg_cp_range SPACE[] = {{'\t', '\r'}, {' ', ' '}};

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int64_t next_cp(rx *p) {
    return xg_utf8_next(p->s, p->n, &p->i);
}

/* \x.. \u.... \x{...}: the code point, or -1. */
static int64_t hex_escape(rx *p, int digits) {
    uint32_t v = 0;
    int braces = digits == 2 && p->i < p->n && p->s[p->i] == '{';
    if (braces) p->i++;
    int k = 0;
    for (; p->i < p->n && (braces || k < digits); k++) {
        int h = hexval(p->s[p->i]);
        if (h < 0) break;
        v = v * 16 + (uint32_t)h;
        p->i++;
        if (v > 0x10ffff) return -1;
    }
    if (braces) {
        if (p->i >= p->n || p->s[p->i] != '}' || !k) return -1;
        p->i++;
    } else if (k != digits) return -1;
    return v;
}

/* After a backslash: a class escape (added to c, returns -2) or one code point. */
static int64_t escape(rx *p, cls *c) {
    if (p->i >= p->n) return rx_fail(p, "a trailing backslash"), -1;
    const char e = p->s[p->i++];
    switch (e) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S': {
        const xg_cp_range *r = (e | 32) == 'd' ? DIGIT : (e | 32) == 'w' ? WORD : SPACE;
        const int n = (e | 32) == 'd' ? 1 : (e | 32) == 'w' ? 4 : 2;
        if (e >= 'a') for (int k = 0; k < n; k++) cls_add(p, c, r[k].lo, r[k].hi);
        else cls_add_negated(p, c, r, n);
        return -2;
    }
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': /* \0 alone; \012 would be octal in PCRE and Python */
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '7') return rx_fail(p, "octal escapes are not supported"), -1;
        return 0;
    case 'x': case 'u': {
        int64_t v = hex_escape(p, e == 'x' ? 2 : 4);
        if (v < 0) rx_fail(p, "a bad hex escape");
        return v;
    }
    case 'b': case 'B': rx_fail(p, "word boundaries (\\b, \\B) are not supported"); return -1;
    case 'A': case 'Z': case 'z': case 'G': rx_fail(p, "anchors inside the pattern are not supported"); return -1;
    case 'p': case 'P': rx_fail(p, "Unicode properties (\\p) are not supported"); return -1;
    case 'k': rx_fail(p, "backreferences are not supported"); return -1;
    default:
        if (e >= '1' && e <= '9') return rx_fail(p, "backreferences are not supported"), -1;
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return rx_fail(p, "an unknown escape"), -1;
        p->i--;
        return next_cp(p);
    }
}

static int in_class(const cls *c, uint32_t ch, int negate) {
    int in = 0;
    for (int k = 0; k < c->n; k++) in |= c->r[k].lo <= ch && ch <= c->r[k].hi;
    return negate ? !in : in;
}

/* A class's code points as a rule. In a JSON string the class loses '"', '\' and the control
 * characters, and gains the escapes \" \\ \n \t \r of those it held. */
static int class_rule(rx *p, cls *c, int negate) {
    if (!p->json) return xg_cp_class(p->b, c->r, c->n, negate);
    static const xg_cp_range cut[] = {{0, 0x1f}, {0x22, 0x22}, {0x5c, 0x5c}};
    cls safe = {0};
    int r;
    if (negate) { /* the complement of the class and the specials together */
        for (int k = 0; k < c->n; k++) cls_add(p, &safe, c->r[k].lo, c->r[k].hi);
        for (int q = 0; q < 3; q++) cls_add(p, &safe, cut[q].lo, cut[q].hi);
        r = xg_cp_class(p->b, safe.r, safe.n, 1);
    } else {
        for (int k = 0; k < c->n; k++) {
            uint32_t from = c->r[k].lo;
            const uint32_t hi = c->r[k].hi;
            for (int q = 0; q < 3 && from <= hi; q++) {
                if (cut[q].hi < from) continue;
                if (cut[q].lo > hi) break;
                if (cut[q].lo > from) cls_add(p, &safe, from, cut[q].lo - 1);
                from = cut[q].hi + 1;
            }
            if (from <= hi) cls_add(p, &safe, from, hi);
        }
        r = xg_rule_new(p->b);
        if (safe.n) {
            xg_seq s = {0};
            xg_seq_ref(p->b, &s, xg_cp_class(p->b, safe.r, safe.n, 0));
            xg_add_alt(p->b, r, &s);
            xg_seq_free(&s);
        }
    }
    free(safe.r);
    static const char special[] = "\"\\\n\t\r", letter[] = "\"\\ntr";
    xg_seq s = {0};
    for (int k = 0; special[k] && r >= 0; k++)
        if (in_class(c, (uint8_t)special[k], negate)) {
            s.n = 0;
            xg_seq_byte(p->b, &s, '\\');
            xg_seq_byte(p->b, &s, (uint8_t)letter[k]);
            xg_add_alt(p->b, r, &s);
        }
    xg_seq_free(&s);
    if (!p->b->failed && r >= 0 && !p->b->rules[r].n_alts) return xg_fail(p->b, "regex: a class matches nothing in a JSON string");
    return p->b->failed ? -1 : r;
}

/* One literal code point. */
static void literal(rx *p, xg_seq *s, uint32_t c) {
    if (p->json && (c < 0x20 || c == '"' || c == '\\')) {
        static const char hex[] = "0123456789abcdef";
        char e[7] = {'\\', 0};
        int n = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\t': e[1] = 't'; break;
        case '\r': e[1] = 'r'; break;
        default: memcpy(e + 1, "u00", 3), e[4] = hex[c >> 4], e[5] = hex[c & 15], n = 6;
        }
        xg_seq_lit(p->b, s, e, (size_t)n);
        return;
    }
    xg_seq_cp(p->b, s, c);
}

static int parse_bracket(rx *p, xg_seq *out) {
    cls c = {0};
    int negate = 0;
    if (p->i < p->n && p->s[p->i] == '^') negate = 1, p->i++;
    int first = 1;
    while (!p->b->failed) {
        if (p->i >= p->n) {
            rx_fail(p, "an unterminated [class]");
            break;
        }
        if (p->s[p->i] == ']' && !first) {
            p->i++;
            break;
        }
        first = 0;
        if (p->s[p->i] == '[' && p->i + 1 < p->n && p->s[p->i + 1] == ':') {
            rx_fail(p, "POSIX [:classes:] are not supported");
            break;
        }
        int64_t lo;
        if (p->s[p->i] == '\\') {
            p->i++;
            lo = escape(p, &c);
            if (lo == -2) continue;
        } else lo = next_cp(p);
        if (lo < 0) {
            if (!p->b->failed) rx_fail(p, "bad UTF-8");
            break;
        }
        int64_t hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            if (p->s[p->i] == '\\') {
                p->i++;
                hi = escape(p, &c);
                if (hi == -2) {
                    rx_fail(p, "a class escape as a range end");
                    break;
                }
            } else hi = next_cp(p);
            if (hi < lo) {
                if (!p->b->failed) rx_fail(p, "a reversed range");
                break;
            }
        }
        cls_add(p, &c, (uint32_t)lo, (uint32_t)hi);
    }
    int r = p->b->failed ? -1 : class_rule(p, &c, negate);
    free(c.r);
    if (r >= 0) xg_seq_ref(p->b, out, r);
    return r < 0 ? -1 : 0;
}

static int parse_alt(rx *p, xg_seq *out);

/* {m}, {m,}, {m,n}: 1 parsed, 0 not a quantifier (a literal '{'), -1 error */
static int parse_braces(rx *p, int *min, int *max) {
    size_t j = p->i + 1;
    long a = 0, b = -1;
    int digits = 0;
    while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && a < 100000) a = a * 10 + (p->s[j++] - '0'), digits++;
    if (!digits) return 0;
    if (j < p->n && p->s[j] == ',') {
        j++;
        if (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
            b = 0;
            while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && b < 100000) b = b * 10 + (p->s[j++] - '0');
        }
    } else b = a;
    if (j >= p->n || p->s[j] != '}') return 0;
    p->i = j + 1;
    *min = (int)a;
    *max = (int)b;
    return 1;
}

static int parse_seq(rx *p, xg_seq *seq) {
    while (p->i < p->n && !p->b->failed) {
        const char ch = p->s[p->i];
        if (ch == '|' || ch == ')') break;
        xg_seq atom = {0};
        if (ch == '(') {
            p->i++;
            if (p->i < p->n && p->s[p->i] == '?') {
                p->i++;
                if (p->i < p->n && p->s[p->i] == ':') p->i++;
                else if (p->i < p->n && (p->s[p->i] == 'P' || p->s[p->i] == '<') &&
                         !(p->s[p->i] == '<' && p->i + 1 < p->n && (p->s[p->i + 1] == '=' || p->s[p->i + 1] == '!'))) {
                    while (p->i < p->n && p->s[p->i] != '>') p->i++;
                    if (p->i++ >= p->n) return rx_fail(p, "an unterminated group name");
                } else return rx_fail(p, "lookaround, flags and other (? groups are not supported");
            }
            if (++p->depth > 200) return rx_fail(p, "groups nested too deep");
            if (parse_alt(p, &atom)) return xg_seq_free(&atom), -1;
            p->depth--;
            if (p->i >= p->n || p->s[p->i] != ')') return xg_seq_free(&atom), rx_fail(p, "a missing ')'");
            p->i++;
        } else if (ch == '[') {
            p->i++;
            if (parse_bracket(p, &atom)) return xg_seq_free(&atom), -1;
        } else if (ch == '.') {
            p->i++;
            cls c = {0};
            cls_add(p, &c, '\n', '\n');
            int r = class_rule(p, &c, 1);
            free(c.r);
            if (r < 0) return -1;
            xg_seq_ref(p->b, &atom, r);
        } else if (ch == '^' || ch == '$') {
            if ((ch == '^' && p->i != 0) || (ch == '$' && p->i + 1 != p->n))
                return rx_fail(p, "anchors inside the pattern are not supported");
            p->i++;
            continue;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            return rx_fail(p, "a quantifier with nothing to repeat");
        } else if (ch == '\\') {
            p->i++;
            cls c = {0};
            int64_t cp = escape(p, &c);
            if (cp == -2) {
                int r = class_rule(p, &c, 0);
                free(c.r);
                if (r < 0) return -1;
                xg_seq_ref(p->b, &atom, r);
            } else {
                free(c.r);
                if (cp < 0) return -1;
                literal(p, &atom, (uint32_t)cp);
            }
        } else {
            int64_t cp = next_cp(p);
            if (cp < 0) return rx_fail(p, "bad UTF-8");
            literal(p, &atom, (uint32_t)cp);
        }
        /* quantifiers */
        for (;;) {
            if (p->i >= p->n) break;
            int min, max;
            const char q = p->s[p->i];
            if (q == '*') min = 0, max = -1, p->i++;
            else if (q == '+') min = 1, max = -1, p->i++;
            else if (q == '?') min = 0, max = 1, p->i++;
            else if (q == '{') {
                int k = parse_braces(p, &min, &max);
                if (k <= 0) break;
            } else break;
            if (p->i < p->n && p->s[p->i] == '?') p->i++;
            else if (p->i < p->n && p->s[p->i] == '+') return xg_seq_free(&atom), rx_fail(p, "possessive quantifiers are not supported");
            int r = xg_rep(p->b, &atom, min, max);
            if (r < 0) return xg_seq_free(&atom), -1;
            atom.n = 0;
            xg_seq_ref(p->b, &atom, r);
            if (p->i < p->n && (p->s[p->i] == '*' || p->s[p->i] == '+' || p->s[p->i] == '?' || p->s[p->i] == '{')) continue;
            break;
        }
        xg_seq_append(p->b, seq, &atom);
        xg_seq_free(&atom);
    }
    return p->b->failed ? -1 : 0;
}

static int parse_alt(rx *p, xg_seq *out) {
    xg_seq first = {0};
    if (parse_seq(p, &first)) return xg_seq_free(&first), -1;
    if (p->i >= p->n || p->s[p->i] != '|') {
        xg_seq_append(p->b, out, &first);
        xg_seq_free(&first);
        return p->b->failed ? -1 : 0;
    }
    int r = xg_rule_new(p->b);
    xg_add_alt(p->b, r, &first);
    while (p->i < p->n && p->s[p->i] == '|' && !p->b->failed) {
        p->i++;
        first.n = 0;
        if (parse_seq(p, &first)) break;
        xg_add_alt(p->b, r, &first);
    }
    xg_seq_free(&first);
    if (p->b->failed) return -1;
    xg_seq_ref(p->b, out, r);
    return 0;
}

int xg_compile_regex(xg_build *b, const char *src, size_t len, int json_string) {
    rx p = {.b = b, .s = src, .n = len, .json = json_string};
    xg_seq s = {0};
    if (!parse_alt(&p, &s) && p.i < p.n) rx_fail(&p, "an unmatched ')'");
    int r = b->failed ? -1 : xg_wrap(b, &s);
    xg_seq_free(&s);
    return r;
}
