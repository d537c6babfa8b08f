/* server/tool_parse: the hermes and llama3_json tool-call formats (see tool_parse.h). */
#include "server/tool_parse.h"

#include <stdlib.h>
#include <string.h>

#include "server/text_tags.h"

#define OPEN "<tool_call>"
#define CLOSE "</tool_call>"

static int is_llama3(const char *parser) { return !strcmp(parser, "llama3_json"); }

int xi_tool_parser_supported(const char *name) {
    return name && (!strcmp(name, "hermes") || is_llama3(name));
}

const char *xi_tool_parser_names(void) { return "hermes, llama3_json"; }

static size_t skip_space(const char *text, size_t len, size_t i) {
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) i++;
    return i;
}

/* xi_tool_content_prefix, resuming where the search of the text's earlier steps ended */
static size_t stream_prefix(const char *parser, xi_tool_stream *st, const char *text, size_t len) {
    if (is_llama3(parser)) { /* calls are the whole answer: hold it all once it opens with { */
        const size_t i = st->scanned = skip_space(text, len, st->scanned);
        return i == len || text[i] == '{' ? 0 : len;
    }
    const size_t no = sizeof OPEN - 1;
    if (!st->found && len > st->scanned) {
        const char *p = memmem(text + st->scanned, len - st->scanned, OPEN, no);
        if (p) {
            st->found = 1;
            st->open_at = (size_t)(p - text);
        } else if (len + 1 > st->scanned + no) {
            st->scanned = len + 1 - no; /* a <tool_call> can only start after */
        }
    }
    return st->found ? st->open_at : len - xi_tag_partial_tail(text, len, OPEN);
}

size_t xi_tool_content_prefix(const char *parser, const char *text, size_t len) {
    xi_tool_stream st = {0};
    return stream_prefix(parser, &st, text, len);
}

/* A call from a decoded object, or NULL when it is not {"name": string, args: ...}, args
 * being "arguments" (or, for Llama 3, "parameters"). Takes o. */
static json_t *one_call(json_t *o, int llama3) {
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    if (!args && llama3) args = json_object_get(o, "parameters");
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

/* Llama 3.x: the answer is one or more JSON objects, separated by ';' (vLLM's llama3_json). */
static json_t *parse_llama3(const char *text, size_t len, size_t *content_len) {
    size_t i = skip_space(text, len, 0);
    if (i == len || text[i] != '{') return NULL;
    json_t *calls = json_array();
    while (i < len) {
        json_error_t e;
        json_t *call = one_call(json_loadb(text + i, len - i, JSON_DISABLE_EOF_CHECK, &e), 1);
        if (!call) {
            json_decref(calls);
            return NULL;
        }
        json_array_append_new(calls, call);
        i = skip_space(text, len, i + (size_t)e.position);
        if (i < len && text[i] == ';') i = skip_space(text, len, i + 1);
    }
    *content_len = 0;
    return calls;
}

json_t *xi_tool_calls_parse(const char *parser, const char *text, size_t len, size_t *content_len) {
    if (is_llama3(parser)) return parse_llama3(text, len, content_len);
    const size_t no = sizeof OPEN - 1, nc = sizeof CLOSE - 1;
    const char *p = memmem(text, len, OPEN, no), *end = text + len;
    if (!p) return NULL;
    const size_t before = (size_t)(p - text);
    json_t *calls = json_array();
    while (p) {
        const char *body = p + no;
        const char *close = memmem(body, (size_t)(end - body), CLOSE, nc);
        const char *stop = close ? close : end;
        json_t *call = one_call(json_loadb(body, (size_t)(stop - body), 0, NULL), 0);
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

json_t *xi_tool_stream_step(const char *parser, xi_tool_stream *st, const char *text, size_t len,
                            int final, size_t *n) {
    json_t *calls = NULL;
    size_t upto = stream_prefix(parser, st, text, len);
    if (final && !(calls = xi_tool_calls_parse(parser, text, len, &upto))) upto = len;
    /* the prefix only grows with the text, so this never goes back */
    *n = upto > st->sent ? upto - st->sent : 0;
    st->sent += *n;
    return calls;
}
