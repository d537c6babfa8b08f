/* tokenizer pre-processing: normalisers (NFC, Prepend, Replace) and pre-tokenizers (Split by
 * regex, ByteLevel, Metaspace) as declared in tokenizer.json, applied in order.
 *
 * Pieces of text live back to back in one arena; each step reads the current arena and writes a
 * new one, so a Sequence of pre-tokenizers is a loop. Regexes run with PCRE2 (UTF + UCP, JIT);
 * match data and the JIT stack are per call, which keeps a loaded tokenizer shareable. */
#define XI_TOKENIZER_INTERNAL
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- GPT-2 bytes_to_unicode ---- */

static char bl_enc[256][2]; /* UTF-8 of each byte's code point */
static uint8_t bl_enc_len[256];
static int16_t bl_dec[324]; /* code point -> byte, -1 when unmapped */
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bl_build(void) {
    for (int i = 0; i < 324; i++) bl_dec[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        /* Printable Latin-1 maps to itself; the rest is shifted past 255 so every byte has a
         * visible, non-space code point. */
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        int cp = keep ? b : 256 + extra++;
        bl_dec[cp] = (int16_t)b;
        if (cp < 0x80) {
            bl_enc[b][0] = (char)cp;
            bl_enc_len[b] = 1;
        } else {
            bl_enc[b][0] = (char)(0xc0 | (cp >> 6));
            bl_enc[b][1] = (char)(0x80 | (cp & 0x3f));
            bl_enc_len[b] = 2;
        }
    }
}

void xi_byte_level_init(void) { pthread_once(&bl_once, bl_build); }

int xi_byte_level_encode(unsigned char b, char out[2]) {
    out[0] = bl_enc[b][0];
    out[1] = bl_enc[b][1];
    return bl_enc_len[b];
}

int xi_byte_level_decode(uint32_t cp) { return cp < 324 ? bl_dec[cp] : -1; }

pcre2_code *xi_regex_compile(const char *pattern, int literal, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP), &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        xi_errf(err, errlen, "pre_tokenizer regex at offset %zu: %s", (size_t)off, (char *)msg);
        return NULL;
    }
    /* JIT is an optimisation: the interpreter gives the same matches if it is unavailable. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

/* ---- pieces ---- */

typedef struct {
    xi_buf text;  /* pieces back to back */
    size_t *ends; /* [n] end offset of each piece in text; owned */
    int n, cap;
} pieces;

static int pieces_reserve(pieces *p) {
    if (p->n < p->cap) return 0;
    int nc = p->cap ? p->cap * 2 : 16;
    size_t *e = realloc(p->ends, (size_t)nc * sizeof *e);
    if (!e) return -1;
    p->ends = e;
    p->cap = nc;
    return 0;
}

static int pieces_add(pieces *p, const char *s, size_t len) {
    if (!len) return 0;
    if (pieces_reserve(p)) return -1;
    if (xi_buf_append(&p->text, s, len)) return -1;
    p->ends[p->n++] = p->text.len;
    return 0;
}

/* Append to the last piece (there is one: callers check). */
static int pieces_extend(pieces *p, const char *s, size_t len) {
    if (xi_buf_append(&p->text, s, len)) return -1;
    p->ends[p->n - 1] = p->text.len;
    return 0;
}

static void pieces_free(pieces *p) {
    xi_buf_free(&p->text);
    free(p->ends);
    memset(p, 0, sizeof *p);
}

#define PIECE_START(p, i) ((i) ? (p)->ends[(i)-1] : 0)

void xi_regex_ws_free(xi_regex_ws *w) {
    pcre2_match_data_free(w->md);
    pcre2_match_context_free(w->mc);
    pcre2_jit_stack_free(w->js);
    memset(w, 0, sizeof *w);
}

/* Split s[0..len) by re: the spans are alternately gaps and matches. behavior as in Hugging
 * Face's SplitDelimiterBehavior; invert swaps which spans count as the delimiter. */
static int split_piece(const xi_pre_step *st, xi_regex_ws *w, const char *s, size_t len,
                       pieces *out, char *err, size_t errlen) {
    if (!w->md) {
        w->md = pcre2_match_data_create(4, NULL);
        w->mc = pcre2_match_context_create(NULL);
        w->js = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
        if (!w->md || !w->mc || !w->js) return xi_errf(err, errlen, "out of memory");
        pcre2_jit_stack_assign(w->mc, NULL, w->js);
    }
    size_t pos = 0, gap = 0;
    int pending_next = 0; /* MergedWithNext: a delimiter waits for the next span */
    size_t pend_start = 0;
    int prev_delim = 0;     /* the last non-empty span was a delimiter */
    int first_out = out->n; /* pieces before this belong to other input pieces */
    while (gap <= len) {
        size_t ms = len, me = len;
        int found = 0;
        while (pos <= len) {
            int rc = pcre2_match(st->re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, w->md, w->mc);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return xi_errf(err, errlen, "pre_tokenizer regex: %s", (char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
            if (ov[1] > ov[0]) {
                ms = ov[0];
                me = ov[1];
                found = 1;
                break;
            }
            /* An empty match delimits nothing: retry one character further. */
            pos = ov[0] + 1;
            while (pos < len && ((unsigned char)s[pos] & 0xc0) == 0x80) pos++;
        }
        /* spans: gap [gap, ms), delimiter [ms, me) */
        const char *spans[2] = {s + gap, s + ms};
        size_t lens[2] = {ms - gap, me - ms};
        for (int k = 0; k < 2; k++) {
            if (k == 1 && !found) break;
            int is_delim = (k == 1) != (st->invert != 0);
            const char *p = spans[k];
            size_t l = lens[k];
            if (!l) continue;
            int rc = 0;
            switch (st->behavior) {
            case XI_SPLIT_ISOLATED: rc = pieces_add(out, p, l); break;
            case XI_SPLIT_REMOVED:
                if (!is_delim) rc = pieces_add(out, p, l);
                break;
            case XI_SPLIT_MERGED_PREV:
                /* A delimiter joins the span before it, if that is a non-delimiter of this
                 * input piece; consecutive delimiters after the first stand alone. */
                if (is_delim && !prev_delim && out->n > first_out)
                    rc = pieces_extend(out, p, l);
                else
                    rc = pieces_add(out, p, l);
                break;
            case XI_SPLIT_MERGED_NEXT:
                if (is_delim) {
                    if (pending_next)
                        rc = pieces_add(out, s + pend_start, (size_t)(p - s) - pend_start);
                    pending_next = 1;
                    pend_start = (size_t)(p - s);
                } else if (pending_next) {
                    rc = pieces_add(out, s + pend_start, (size_t)(p - s) + l - pend_start);
                    pending_next = 0;
                } else {
                    rc = pieces_add(out, p, l);
                }
                break;
            case XI_SPLIT_CONTIGUOUS:
                /* Spans alternate, so two delimiters in a row are adjacent in the text. */
                if (is_delim && prev_delim && out->n > first_out)
                    rc = pieces_extend(out, p, l);
                else
                    rc = pieces_add(out, p, l);
                break;
            }
            if (rc) return xi_errf(err, errlen, "out of memory");
            prev_delim = is_delim;
        }
        if (!found) break;
        gap = pos = me;
    }
    if (pending_next && pieces_add(out, s + pend_start, len - pend_start))
        return xi_errf(err, errlen, "out of memory");
    return 0;
}

static int byte_level_piece(const char *s, size_t len, pieces *out) {
    if (!len) return 0;
    if (pieces_reserve(out)) return -1;
    for (size_t i = 0; i < len; i++) {
        char e[2];
        int n = xi_byte_level_encode((unsigned char)s[i], e);
        if (xi_buf_append(&out->text, e, (size_t)n)) return -1;
    }
    out->ends[out->n++] = out->text.len;
    return 0;
}

static const char metaspace[] = "\xe2\x96\x81"; /* U+2581 */

static int metaspace_piece(const xi_pre_step *st, int first, const char *s, size_t len,
                           pieces *out) {
    xi_buf b = {0};
    int rc = 0;
    /* As Hugging Face: spaces become U+2581 first, and the prefix is added only when the
     * result does not already start with one (so " a" gives "▁a", unlike SentencePiece). */
    if ((st->prepend == 1 || (st->prepend == 2 && first)) &&
        !(len >= 3 && !memcmp(s, metaspace, 3)) && s[0] != ' ')
        rc |= xi_buf_append(&b, metaspace, 3);
    for (size_t i = 0; i < len && !rc; i++)
        rc |= s[i] == ' ' ? xi_buf_append(&b, metaspace, 3) : xi_buf_append(&b, s + i, 1);
    if (!rc && b.len) {
        if (!st->split) {
            rc = pieces_add(out, b.data, b.len);
        } else {
            /* Each word starts at a U+2581 (MergedWithNext). */
            size_t st0 = 0;
            for (size_t i = 1; i + 3 <= b.len && !rc; i++)
                if (!memcmp(b.data + i, metaspace, 3)) {
                    rc = pieces_add(out, b.data + st0, i - st0);
                    st0 = i;
                }
            if (!rc) rc = pieces_add(out, b.data + st0, b.len - st0);
        }
    }
    xi_buf_free(&b);
    return rc;
}

/* ---- normalisers ---- */

static int normalize(const xi_tokenizer *t, const char *text, size_t len, xi_buf *out, char *err,
                     size_t errlen) {
    if (xi_buf_append(out, text, len)) return xi_errf(err, errlen, "out of memory");
    for (int i = 0; i < t->n_norm; i++) {
        const xi_norm_step *n = &t->norm[i];
        xi_buf next = {0};
        int rc = 0;
        if (n->kind == XI_NORM_UNICODE) {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t r = out->len ? utf8proc_map((const utf8proc_uint8_t *)out->data,
                                                         (utf8proc_ssize_t)out->len, &dst,
                                                         (utf8proc_option_t)n->utf8proc_options)
                                          : 0;
            if (r < 0) {
                xi_buf_free(&next);
                return xi_errf(err, errlen, "Unicode normaliser: %s", utf8proc_errmsg(r));
            }
            rc = xi_buf_append(&next, dst ? (char *)dst : "", (size_t)r);
            free(dst);
        } else if (n->kind == XI_NORM_LOWERCASE) {
            /* Input was validated, so iterate cannot fail; simple (1:1) case mapping. */
            for (size_t p = 0; p < out->len && !rc;) {
                utf8proc_int32_t cp;
                utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)out->data + p,
                                                      (utf8proc_ssize_t)(out->len - p), &cp);
                utf8proc_uint8_t enc[4];
                utf8proc_ssize_t el = utf8proc_encode_char(utf8proc_tolower(cp), enc);
                rc = k <= 0 || xi_buf_append(&next, enc, (size_t)el);
                p += k > 0 ? (size_t)k : 1;
            }
            rc |= xi_buf_append(&next, "", 0);
        } else if (n->kind == XI_NORM_PREPEND) {
            /* Hugging Face prepends only to non-empty text. */
            if (out->len) rc = xi_buf_append(&next, n->a, strlen(n->a));
            rc |= xi_buf_append(&next, out->data, out->len);
        } else {
            size_t pl = strlen(n->a), cl = strlen(n->b);
            for (size_t p = 0; p < out->len && !rc;) {
                if (pl && p + pl <= out->len && !memcmp(out->data + p, n->a, pl)) {
                    rc = xi_buf_append(&next, n->b, cl);
                    p += pl;
                } else {
                    rc = xi_buf_append(&next, out->data + p, 1);
                    p++;
                }
            }
            if (!out->len) rc |= xi_buf_append(&next, "", 0);
        }
        xi_buf_free(out);
        *out = next;
        if (rc) return xi_errf(err, errlen, "out of memory");
    }
    return 0;
}

int xi_pretok_run(const xi_tokenizer *t, const char *text, size_t len, int at_start,
                  xi_regex_ws *ws, xi_buf *words, size_t **ends, int *n_words, char *err,
                  size_t errlen) {
    xi_buf norm = {0};
    if (normalize(t, text, len, &norm, err, errlen)) {
        xi_buf_free(&norm);
        return -1;
    }
    pieces cur = {0};
    int rc = pieces_add(&cur, norm.data ? norm.data : "", norm.len);
    xi_buf_free(&norm);
    if (rc) return xi_errf(err, errlen, "out of memory");
    for (int s = 0; s < t->n_pre && !rc; s++) {
        const xi_pre_step *st = &t->pre[s];
        pieces next = {0};
        for (int i = 0; i < cur.n && !rc; i++) {
            const char *p = cur.text.data + PIECE_START(&cur, i);
            size_t l = cur.ends[i] - PIECE_START(&cur, i);
            if (st->kind == XI_PRE_SPLIT) {
                rc = split_piece(st, ws, p, l, &next, err, errlen);
            } else if (st->kind == XI_PRE_METASPACE) {
                rc = metaspace_piece(st, at_start && i == 0, p, l, &next);
                if (rc) xi_errf(err, errlen, "out of memory");
            } else {
                pieces tmp = {0};
                xi_buf sp = {0};
                if (st->add_prefix_space && p[0] != ' ') {
                    rc |= xi_buf_append(&sp, " ", 1);
                    rc |= xi_buf_append(&sp, p, l);
                    p = sp.data;
                    l = sp.len;
                }
                if (!rc && st->re) {
                    xi_pre_step iso = *st;
                    iso.behavior = XI_SPLIT_ISOLATED;
                    iso.invert = 0;
                    rc = split_piece(&iso, ws, p, l, &tmp, err, errlen);
                } else if (!rc) {
                    rc = pieces_add(&tmp, p, l);
                }
                for (int k = 0; k < tmp.n && !rc; k++)
                    if (byte_level_piece(tmp.text.data + PIECE_START(&tmp, k),
                                         tmp.ends[k] - PIECE_START(&tmp, k), &next))
                        rc = xi_errf(err, errlen, "pre_tokenizer ByteLevel: out of memory");
                pieces_free(&tmp);
                xi_buf_free(&sp);
            }
        }
        pieces_free(&cur);
        cur = next;
    }
    if (rc) {
        pieces_free(&cur);
        return -1;
    }
    *words = cur.text;
    *ends = cur.ends;
    *n_words = cur.n;
    return 0;
}
