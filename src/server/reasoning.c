/* server/reasoning: <think> ... </think> splitting (see reasoning.h). */
#include "server/reasoning.h"

#include <string.h>

#include "server/text_tags.h"

#define START "<think>"
#define END "</think>"

int xi_reasoning_parser_supported(const char *name) {
    return name && (!strcmp(name, "deepseek_r1") || !strcmp(name, "qwen3"));
}

const char *xi_reasoning_parser_names(void) { return "deepseek_r1, qwen3"; }

void xi_reasoning_scan(const char *parser, const char *text, size_t len, int final,
                       xi_reasoning_span *out) {
    const size_t ns = sizeof START - 1, ne = sizeof END - 1;
    memset(out, 0, sizeof *out);
    /* too short to tell whether the answer opens with <think>: wait */
    if (!final && len < ns && !memcmp(text, START, len)) {
        out->c_begin = len;
        out->has_reasoning = 1;
        return;
    }
    const int opens = len >= ns && !memcmp(text, START, ns);
    if (!strcmp(parser, "qwen3") && !opens) return; /* all content */
    out->has_reasoning = 1;
    out->r_begin = opens ? ns : 0;
    const char *body = text + out->r_begin;
    const size_t blen = len - out->r_begin;
    const char *end = memmem(body, blen, END, ne);
    if (end) {
        out->r_end = (size_t)(end - text);
        out->c_begin = out->r_end + ne;
        return;
    }
    out->r_end = len - (final ? 0 : xi_tag_partial_tail(body, blen, END));
    out->c_begin = len;
}

enum { R_UNDECIDED, R_THINKING, R_ENDED, R_NONE };

size_t xi_reasoning_stream_step(const char *parser, xi_reasoning_stream *st, const char *text, size_t len,
                                int final, size_t *c_begin) {
    const size_t ns = sizeof START - 1, ne = sizeof END - 1;
    if (st->phase == R_UNDECIDED) {
        if (!final && len < ns && !memcmp(text, START, len)) { /* may still open with <think> */
            *c_begin = len;
            return st->r_sent;
        }
        const int opens = len >= ns && !memcmp(text, START, ns);
        if (!strcmp(parser, "qwen3") && !opens) {
            st->phase = R_NONE;
        } else {
            st->phase = R_THINKING;
            st->r_begin = st->scanned = st->r_sent = opens ? ns : 0; /* a leading <think> is not sent */
        }
    }
    if (st->phase == R_NONE) {
        *c_begin = 0;
        return st->r_sent;
    }
    const size_t start = st->r_sent;
    if (st->phase == R_THINKING) {
        const char *end = len > st->scanned ? memmem(text + st->scanned, len - st->scanned, END, ne) : NULL;
        size_t r_end;
        if (end) {
            r_end = (size_t)(end - text);
            st->c_begin = r_end + ne;
            st->phase = R_ENDED;
        } else {
            if (len + 1 > st->scanned + ne) st->scanned = len + 1 - ne; /* a </think> can only start after */
            r_end = len - (final ? 0 : xi_tag_partial_tail(text + st->r_begin, len - st->r_begin, END));
        }
        if (r_end > st->r_sent) st->r_sent = r_end;
    }
    *c_begin = st->phase == R_ENDED ? st->c_begin : len;
    return start;
}
