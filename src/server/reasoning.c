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

size_t xi_reasoning_stream_step(const char *parser, const char *text, size_t len, int final,
                                size_t *r_sent, size_t *c_begin) {
    xi_reasoning_span sp;
    xi_reasoning_scan(parser, text, len, final, &sp);
    if (*r_sent < sp.r_begin) *r_sent = sp.r_begin; /* a leading <think> is not sent */
    const size_t start = *r_sent;
    if (sp.r_end > *r_sent) *r_sent = sp.r_end;
    *c_begin = sp.c_begin;
    return start;
}
