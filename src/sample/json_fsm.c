/* sample/json_fsm: a byte-at-a-time JSON recogniser (see json_fsm.h). */
#include "sample/json_fsm.h"

/* What comes next. */
enum {
    S_ROOT,        /* before the root: whitespace or '{' */
    S_VALUE,       /* a value (after ':' or ',' in an array) */
    S_ARR_FIRST,   /* after '[': a value or ']' */
    S_OBJ_FIRST,   /* after '{': a key or '}' */
    S_KEY,         /* after ',' in an object: a key */
    S_COLON,       /* after a key */
    S_AFTER,       /* after a value in a container: ',' or the closing bracket */
    S_DONE,        /* the root has closed: whitespace only */
    S_STRING,      /* inside a string; sub = UTF-8 continuation bytes still due */
    S_ESCAPE,      /* after a backslash */
    S_UNICODE,     /* in \uXXXX; sub = hex digits still due and what they spell so far */
    S_LITERAL,     /* in true/false/null; sub = literal * 8 + bytes matched */
    S_NUMBER,      /* in a number; sub = N_* */
};

/* number parts: where we are, and whether the number may end here */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const LITERALS[3] = {"true", "false", "null"};

static int is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

void xi_json_fsm_init(xi_json_fsm *f) {
    f->stack = 0;
    f->depth = 0;
    f->st = S_ROOT;
    f->sub = f->ws = f->key = f->digits = 0;
}

int xi_json_fsm_done(const xi_json_fsm *f) { return f->st == S_DONE; }

/* A value has ended: what follows depends on the container it is in. */
static void value_done(xi_json_fsm *f) { f->st = f->depth ? S_AFTER : S_DONE; }

static int push(xi_json_fsm *f, int object) {
    if (f->depth >= XI_JSON_MAX_DEPTH) return -1;
    if (object) f->stack |= 1u << f->depth;
    else f->stack &= ~(1u << f->depth);
    f->depth++;
    f->st = object ? S_OBJ_FIRST : S_ARR_FIRST;
    return 0;
}

static int pop(xi_json_fsm *f, int object) {
    if (!f->depth || !!(f->stack & 1u << (f->depth - 1)) != object) return -1;
    f->depth--;
    value_done(f);
    return 0;
}

/* The first byte of a value. */
static int start_value(xi_json_fsm *f, unsigned char c) {
    switch (c) {
    case '{': return push(f, 1);
    case '[': return push(f, 0);
    case '"':
        f->st = S_STRING;
        f->sub = f->key = 0;
        return 0;
    case '-': f->st = S_NUMBER, f->sub = N_MINUS, f->digits = 0; return 0;
    case '0': f->st = S_NUMBER, f->sub = N_ZERO, f->digits = 1; return 0;
    case 't': f->st = S_LITERAL, f->sub = 0 * 8 + 1; return 0;
    case 'f': f->st = S_LITERAL, f->sub = 1 * 8 + 1; return 0;
    case 'n': f->st = S_LITERAL, f->sub = 2 * 8 + 1; return 0;
    default:
        if (c >= '1' && c <= '9') {
            f->st = S_NUMBER;
            f->sub = N_INT;
            f->digits = 1;
            return 0;
        }
        return -1;
    }
}

/* A byte inside a number; 1 when it ended the number without being part of it. Digits of
 * the integer part and of the exponent are counted (f->digits) and capped. */
static int number_byte(xi_json_fsm *f, unsigned char c) {
    const int d = is_digit(c);
    if (d && (f->sub == N_INT || f->sub == N_MINUS || f->sub == N_EXP || f->sub == N_E || f->sub == N_ESIGN)) {
        const int fresh = f->sub == N_E || f->sub == N_ESIGN; /* the exponent's first digit */
        f->digits = fresh ? 1 : f->digits + 1;
        if (f->digits > (f->sub >= N_E ? 2 : XI_JSON_MAX_INT_DIGITS)) return -1;
    }
    if (!d && (c == 'e' || c == 'E')) f->digits = 0;
    switch (f->sub) {
    case N_MINUS: if (c == '0') f->sub = N_ZERO; else if (d) f->sub = N_INT; else return -1; return 0;
    case N_ZERO:
        if (c == '.') f->sub = N_DOT;
        else if (c == 'e' || c == 'E') f->sub = N_E;
        else return 1;
        return 0;
    case N_INT:
        if (d) return 0;
        if (c == '.') f->sub = N_DOT;
        else if (c == 'e' || c == 'E') f->sub = N_E;
        else return 1;
        return 0;
    case N_DOT: if (!d) return -1; f->sub = N_FRAC; return 0;
    case N_FRAC:
        if (d) return 0;
        if (c == 'e' || c == 'E') f->sub = N_E;
        else return 1;
        return 0;
    case N_E: if (c == '+' || c == '-') f->sub = N_ESIGN; else if (d) f->sub = N_EXP; else return -1; return 0;
    case N_ESIGN: if (!d) return -1; f->sub = N_EXP; return 0;
    default: return d ? 0 : 1; /* N_EXP */
    }
}

/* A byte inside a string (after the opening quote). */
static int string_byte(xi_json_fsm *f, unsigned char c) {
    if (f->sub) { /* continuation bytes of a multi-byte character */
        /* low 2 bits: bytes left; bits 4..7: the first one's range (no overlong forms, no
         * surrogates, nothing past U+10FFFF: what jansson, and UTF-8, accept) */
        static const unsigned char lo[] = {0x80, 0xa0, 0x80, 0x90, 0x80},
                                   hi[] = {0xbf, 0xbf, 0x9f, 0xbf, 0x8f};
        const int r = f->sub >> 4;
        if (c < lo[r] || c > hi[r]) return -1;
        f->sub = (uint8_t)((f->sub & 3) - 1);
        return 0;
    }
    if (c == '"') {
        if (f->key) f->st = S_COLON;
        else value_done(f);
        return 0;
    }
    if (c == '\\') {
        f->st = S_ESCAPE;
        return 0;
    }
    if (c < 0x20) return -1;
    if (c < 0x80) return 0;
    /* lead bytes of 2-4 byte sequences, with the range of the next byte */
    if (c >= 0xc2 && c <= 0xdf) f->sub = 1;
    else if (c >= 0xe0 && c <= 0xef) f->sub = (uint8_t)(2 | (c == 0xe0 ? 1 : c == 0xed ? 2 : 0) << 4);
    else if (c >= 0xf0 && c <= 0xf4) f->sub = (uint8_t)(3 | (c == 0xf0 ? 3 : c == 0xf4 ? 4 : 0) << 4);
    else return -1;
    return 0;
}

static int feed_byte(xi_json_fsm *f, unsigned char c) {
    switch (f->st) {
    case S_STRING: return string_byte(f, c);
    case S_ESCAPE:
        if (c == 'u') {
            f->st = S_UNICODE;
            f->sub = 4;
            return 0;
        }
        if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't')
            return -1;
        f->st = S_STRING;
        f->sub = 0;
        return 0;
    case S_UNICODE: {
        /* sub: digits left (low 3 bits), bit 3: the first digit was d, bit 4: all zero so
         * far. \u0000 and surrogates (\ud800-\udfff, paired or not) are refused: jansson
         * rejects the first and lone halves; raw UTF-8 writes any character instead. */
        if (!is_hex(c)) return -1;
        const int left = f->sub & 7, first = left == 4;
        int dd = first ? c == 'd' || c == 'D' : (f->sub >> 3) & 1;
        int zero = (first || (f->sub >> 4) & 1) && c == '0';
        if (left == 3 && dd && !(c >= '0' && c <= '7')) return -1;
        if (left == 1 && zero) return -1;
        f->sub = (uint8_t)((left - 1) | dd << 3 | zero << 4);
        if (left == 1) f->st = S_STRING, f->sub = 0;
        return 0;
    }
    case S_LITERAL: {
        const char *lit = LITERALS[f->sub / 8];
        const int at = f->sub % 8;
        if ((unsigned char)lit[at] != c) return -1;
        f->sub++;
        if (!lit[at + 1]) value_done(f);
        return 0;
    }
    case S_NUMBER: {
        const int r = number_byte(f, c);
        if (r <= 0) return r;
        value_done(f); /* the byte after the number belongs to what follows */
        break;
    }
    default: break;
    }
    /* between tokens */
    if (is_ws(c)) {
        if (f->st != S_DONE && ++f->ws > XI_JSON_MAX_WS) return -1;
        return 0;
    }
    f->ws = 0;
    switch (f->st) {
    case S_ROOT: return c == '{' ? push(f, 1) : -1;
    case S_VALUE: return start_value(f, c);
    case S_ARR_FIRST: return c == ']' ? pop(f, 0) : start_value(f, c);
    case S_OBJ_FIRST:
    case S_KEY:
        if (c == '}' && f->st == S_OBJ_FIRST) return pop(f, 1);
        if (c != '"') return -1;
        f->st = S_STRING;
        f->sub = 0;
        f->key = 1;
        return 0;
    case S_COLON:
        if (c != ':') return -1;
        f->st = S_VALUE;
        return 0;
    case S_AFTER: {
        const int object = !!(f->stack & 1u << (f->depth - 1));
        if (c == ',') {
            f->st = object ? S_KEY : S_VALUE;
            return 0;
        }
        return c == (object ? '}' : ']') ? pop(f, object) : -1;
    }
    default: return -1; /* S_DONE: only whitespace */
    }
}

int xi_json_fsm_feed(xi_json_fsm *f, const char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (feed_byte(f, (unsigned char)bytes[i])) return -1;
    return 0;
}
