/* tokenizer decoding: token bytes, UTF-8 repair and the incremental detokenizer. */
#define XI_TOKENIZER_INTERNAL
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ---- */

/* How many bytes at s[0..len) belong to the character starting there: sets *need to the length
 * its lead byte asks for (0 for a byte that cannot start a character) and returns how many of
 * the bytes present are a valid prefix of it (at least 1). Complete when the result == *need;
 * truncated when result < *need and result == len. */
static size_t utf8_scan(const unsigned char *s, size_t len, int *need) {
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c < 0x80) {
        *need = 1;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf)
        *need = 2;
    else if (c >= 0xe0 && c <= 0xef)
        *need = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        *need = 4;
    else {
        *need = 0;
        return 1;
    }
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f; /* no surrogates */
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f; /* nothing past U+10FFFF */
    size_t k = 1;
    while (k < (size_t)*need && k < len) {
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) break;
        k++;
    }
    return k;
}

int xi_utf8_incomplete_tail(const unsigned char *s, size_t len) {
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        size_t i = len - back;
        if ((s[i] & 0xc0) == 0x80) continue;
        int need;
        size_t k = utf8_scan(s + i, back, &need);
        return k == back && (size_t)need > back ? (int)back : 0;
    }
    return 0;
}

long xi_utf8_first_invalid(const unsigned char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        int need;
        size_t k = utf8_scan(s + i, len - i, &need);
        if ((size_t)need != k) return (long)i;
        i += k;
    }
    return -1;
}

int xi_utf8_append_lossy(xi_buf *out, const unsigned char *s, size_t len) {
    size_t run = 0; /* start of the current valid run, appended in one piece */
    for (size_t i = 0; i < len;) {
        int need;
        size_t k = utf8_scan(s + i, len - i, &need);
        if ((size_t)need == k) {
            i += k;
            continue;
        }
        /* A maximal invalid subpart becomes one U+FFFD (Unicode's recommended practice, as
         * Rust's from_utf8_lossy). */
        if (xi_buf_append(out, s + run, i - run) || xi_buf_append(out, "\xef\xbf\xbd", 3))
            return -1;
        i += k;
        run = i;
    }
    return xi_buf_append(out, s + run, len - run);
}

/* ---- token bytes ---- */

static int byte_token_value(const xi_tokenizer *t, int32_t id) {
    const char *s = t->tokens[id];
    if (t->token_lens[id] != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    char hex[3] = {s[3], s[4], 0};
    char *end;
    long v = strtol(hex, &end, 16);
    return *end || t->byte_ids[v] != id ? -1 : (int)v;
}

int xi_token_bytes(const xi_tokenizer *t, int32_t id, xi_buf *out) {
    const char *s = t->tokens[id];
    size_t len = t->token_lens[id];
    if (t->added[id]) return xi_buf_append(out, s, len);
    if (t->byte_level) {
        for (size_t i = 0; i < len;) {
            const unsigned char *u = (const unsigned char *)s + i;
            int need;
            size_t k = utf8_scan(u, len - i, &need);
            uint32_t cp = k == 2 ? (uint32_t)(u[0] & 0x1f) << 6 | (u[1] & 0x3f) : u[0];
            int b = (k == 1 || k == 2) && (size_t)need == k ? xi_byte_level_decode(cp) : -1;
            unsigned char byte = (unsigned char)b;
            /* A character outside the byte table stands for itself. */
            if (b >= 0 ? xi_buf_append(out, &byte, 1) : xi_buf_append(out, u, k)) return -1;
            i += k;
        }
        return 0;
    }
    if (t->byte_fallback) {
        int v = byte_token_value(t, id);
        if (v >= 0) {
            unsigned char byte = (unsigned char)v;
            return xi_buf_append(out, &byte, 1);
        }
    }
    if (!t->decode_metaspace) return xi_buf_append(out, s, len);
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && !memcmp(s + i, "\xe2\x96\x81", 3)) {
            if (xi_buf_append(out, " ", 1)) return -1;
            i += 3;
        } else {
            if (xi_buf_append(out, s + i, 1)) return -1;
            i++;
        }
    }
    return 0;
}

/* ---- incremental detokenizer ---- */

void xi_detok_init(xi_detok *d, const xi_tokenizer *t, int skip_special) {
    memset(d, 0, sizeof *d);
    d->tok = t;
    d->skip_special = skip_special;
    d->at_start = 1;
}

int xi_detok_push(xi_detok *d, int32_t id, xi_buf *out) {
    const xi_tokenizer *t = d->tok;
    if (id < 0 || id >= t->n_vocab || !t->tokens[id]) return -1;
    if (d->skip_special && t->special[id]) return 0;
    xi_buf b = {0};
    if (xi_buf_append(&b, d->pending, (size_t)d->n_pending) || xi_token_bytes(t, id, &b)) {
        xi_buf_free(&b);
        return -1;
    }
    size_t off = 0;
    /* The SentencePiece decoder strips one space from the start of the whole text. */
    if (d->at_start && b.len) {
        if (t->strip_leading_space && b.data[0] == ' ') off = 1;
        d->at_start = 0;
    }
    const unsigned char *u = (const unsigned char *)b.data + off;
    size_t n = b.len - off;
    int keep = xi_utf8_incomplete_tail(u, n);
    size_t before = out->len;
    int rc = xi_utf8_append_lossy(out, u, n - (size_t)keep);
    d->n_pending = keep;
    memcpy(d->pending, u + n - keep, (size_t)keep);
    xi_buf_free(&b);
    return rc ? -1 : (int)(out->len - before);
}

void xi_detok_prime(xi_detok *d, const int32_t *prompt, int n) {
    const xi_tokenizer *t = d->tok;
    for (int i = 0; i < n && d->at_start; i++) {
        const int32_t id = prompt[i];
        if (id < 0 || id >= t->n_vocab || !t->tokens[id]) continue;
        if (d->skip_special && t->special[id]) continue;
        xi_buf b = {0};
        if (!xi_token_bytes(t, id, &b) && b.len) d->at_start = 0;
        xi_buf_free(&b);
    }
}

int xi_detok_flush(xi_detok *d, xi_buf *out) {
    size_t before = out->len;
    if (xi_utf8_append_lossy(out, d->pending, (size_t)d->n_pending)) return -1;
    d->n_pending = 0;
    return (int)(out->len - before);
}

void xi_detok_free(xi_detok *d) { memset(d, 0, sizeof *d); }
