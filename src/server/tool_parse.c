/* server/tool_parse: the hermes tool-call format (see tool_parse.h). */
#include "server/tool_parse.h"

#include <string.h>

#include "server/text_tags.h"

#define OPEN "<tool_call>"
#define CLOSE "</tool_call>"

int xi_tool_parser_supported(const char *name) { return name && !strcmp(name, "hermes"); }

const char *xi_tool_parser_names(void) { return "hermes"; }

size_t xi_tool_content_prefix(const char *text, size_t len) {
    const char *p = memmem(text, len, OPEN, sizeof OPEN - 1);
    return p ? (size_t)(p - text) : len - xi_tag_partial_tail(text, len, OPEN);
}

/* One call's JSON, or NULL when it is not {"name": string, "arguments": ...}. */
static json_t *one_call(const char *s, size_t n) {
    json_t *o = json_loadb(s, n, 0, NULL);
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    if (!json_is_string(name) || !args) {
        json_decref(o);
        return NULL;
    }
    /* OpenAI sends arguments as a JSON string; a model that already wrote one keeps it */
    char *a = json_is_string(args) ? strdup(json_string_value(args))
                                   : json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *call = a ? json_pack("{s:s, s:{s:O, s:s}}", "type", "function", "function", "name",
                                 name, "arguments", a)
                     : NULL;
    free(a);
    json_decref(o);
    return call;
}

json_t *xi_tool_calls_parse(const char *text, size_t len, size_t *content_len) {
    const size_t no = sizeof OPEN - 1, nc = sizeof CLOSE - 1;
    const char *p = memmem(text, len, OPEN, no), *end = text + len;
    if (!p) return NULL;
    const size_t before = (size_t)(p - text);
    json_t *calls = json_array();
    while (p) {
        const char *body = p + no;
        const char *close = memmem(body, (size_t)(end - body), CLOSE, nc);
        const char *stop = close ? close : end;
        json_t *call = one_call(body, (size_t)(stop - body));
        if (!call) {
            json_decref(calls);
            return NULL;
        }
        json_array_append_new(calls, call);
        if (!close) break;
        const char *next = close + nc;
        p = memmem(next, (size_t)(end - next), OPEN, no);
    }
    *content_len = before;
    return calls;
}

json_t *xi_tool_stream_step(const char *text, size_t len, size_t *sent, int final, size_t *n) {
    json_t *calls = NULL;
    size_t upto = xi_tool_content_prefix(text, len);
    if (final && !(calls = xi_tool_calls_parse(text, len, &upto))) upto = len;
    /* the prefix only grows with the text, so this never goes back */
    *n = upto > *sent ? upto - *sent : 0;
    *sent += *n;
    return calls;
}
