/* loadgen/sse: the Server-Sent Events wire format (WHATWG HTML §9.2.6), only as far as a
 * streaming completion needs it: lines, `data:` fields, blank-line event ends. Chunks from the
 * network are cut anywhere (in the middle of a line, between '\r' and '\n'), so the state
 * between calls is the unterminated line and the event's data so far. */
#include <string.h>

#include "loadgen/loadgen.h"

void xi_sse_init(xi_sse *s, xi_sse_data_fn on_data, void *ud) {
    memset(s, 0, sizeof *s);
    s->on_data = on_data;
    s->ud = ud;
}

void xi_sse_free(xi_sse *s) {
    xi_buf_free(&s->line);
    xi_buf_free(&s->data);
    memset(s, 0, sizeof *s);
}

static int dispatch(xi_sse *s) {
    int has = s->has_data;
    s->has_data = 0;
    if (!has) return 0;
    int rc = s->on_data(s->ud, s->data.data ? s->data.data : "", s->data.len);
    s->data.len = 0;
    if (s->data.data) s->data.data[0] = 0;
    return rc;
}

/* One complete line (without its terminator). */
static int on_line(xi_sse *s, const char *l, size_t n) {
    if (n == 0) return dispatch(s);
    if (l[0] == ':') return 0;
    const char *colon = memchr(l, ':', n);
    size_t name_len = colon ? (size_t)(colon - l) : n;
    if (name_len != 4 || memcmp(l, "data", 4)) return 0;
    const char *v = colon ? colon + 1 : l + n;
    if (v < l + n && *v == ' ') v++;
    size_t vn = (size_t)(l + n - v);
    if (s->data.len + vn + 1 > XI_SSE_MAX_EVENT) return -2;
    if (s->has_data && xi_buf_append(&s->data, "\n", 1)) return -1;
    if (xi_buf_append(&s->data, v, vn)) return -1;
    s->has_data = 1;
    return 0;
}

int xi_sse_feed(xi_sse *s, const char *bytes, size_t n) {
    size_t i = 0;
    if (s->after_cr && n > 0) {
        s->after_cr = 0;
        if (bytes[0] == '\n') i = 1;   /* the '\n' of a "\r\n" split across two chunks */
    }
    while (i < n) {
        /* Find the end of the line in this chunk; lines wholly inside the chunk are handed on
         * without a copy, only a line cut by the chunk end is buffered. */
        size_t j = i;
        while (j < n && bytes[j] != '\n' && bytes[j] != '\r') j++;
        if (s->line.len + (j - i) > XI_SSE_MAX_EVENT) return -2;
        if (j == n) return xi_buf_append(&s->line, bytes + i, n - i);
        int rc;
        if (s->line.len) {
            if (xi_buf_append(&s->line, bytes + i, j - i)) return -1;
            rc = on_line(s, s->line.data, s->line.len);
            s->line.len = 0;
        } else {
            rc = on_line(s, bytes + i, j - i);
        }
        if (rc) return rc;
        if (bytes[j] == '\r') {
            if (j + 1 == n) {
                s->after_cr = 1;
                return 0;
            }
            if (bytes[j + 1] == '\n') j++;
        }
        i = j + 1;
    }
    return 0;
}

int xi_sse_finish(xi_sse *s, int complete) {
    int rc = 0;
    if (s->line.len) {
        if (complete) rc = on_line(s, s->line.data, s->line.len);
        s->line.len = 0;
    }
    if (!rc && complete) rc = dispatch(s);
    s->has_data = 0;
    return rc;
}
