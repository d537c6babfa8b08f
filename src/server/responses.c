/* server/responses: the Responses API over the chat completion job (see responses.h). */
#include "server/responses.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

enum { OPEN_NONE, OPEN_REASONING, OPEN_MESSAGE };

struct xi_resp {
    json_t *echo;                    /* request fields the response object repeats, owned */
    char id[48];                     /* "resp_<hex>" */
    long created;
    char *model;                     /* owned */
    int seq;                         /* sequence_number of the next event */
    json_t *items;                   /* finished output items, owned */
    int open;                        /* OPEN_*: the item receiving text */
    char item_id[64];                /* the open item's id */
    xi_buf text;                     /* the open item's text so far, owned */
    int n_made;                      /* items made, for their ids */
};

/* ---- the request -------------------------------------------------------------------------- */

static int fail_item(xi_oai_error *e, size_t i, const char *what) {
    return xi_oai_fail(e, 400, "input", "input[%zu]: %s", i, what);
}

/* A message item's content as chat text parts (input_text, output_text and text parts). */
static json_t *message_content(json_t *content, size_t i, xi_oai_error *e) {
    if (json_is_string(content)) return json_incref(content);
    if (!json_is_array(content)) {
        fail_item(e, i, "content must be a string or an array of input_text parts");
        return NULL;
    }
    json_t *parts = json_array();
    size_t k;
    json_t *p;
    json_array_foreach(content, k, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *text = json_object_get(p, "text");
        if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text") && strcmp(type, "text")) ||
            !json_is_string(text)) {
            json_decref(parts);
            xi_oai_fail(e, 400, "input", "input[%zu].content[%zu]: only input_text and output_text parts are supported", i, k);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return parts;
}

/* input (and instructions) as chat messages. Consecutive function_call items become one
 * assistant message with several tool_calls, as a chat client would have sent them. */
static json_t *input_messages(json_t *req, xi_oai_error *e) {
    json_t *msgs = json_array();
    json_t *ins = json_object_get(req, "instructions"), *in = json_object_get(req, "input");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) {
            json_decref(msgs);
            xi_oai_fail(e, 400, "instructions", "'instructions' must be a string");
            return NULL;
        }
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", ins));
    }
    if (json_is_string(in)) {
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", in));
        return msgs;
    }
    if (!json_is_array(in) || !json_array_size(in)) {
        json_decref(msgs);
        xi_oai_fail(e, 400, "input", "'input' must be a string or a non-empty array of items");
        return NULL;
    }
    size_t i;
    json_t *it;
    json_t *calls = NULL; /* tool_calls of the assistant message being built, borrowed */
    json_array_foreach(in, i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        json_t *role = json_object_get(it, "role");
        if (!json_is_object(it)) {
            fail_item(e, i, "must be an object");
            goto bad;
        }
        if (type && !strcmp(type, "reasoning")) continue; /* earlier thoughts are not replayed */
        if (type && !strcmp(type, "function_call")) {
            json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name");
            json_t *args = json_object_get(it, "arguments");
            if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args)) {
                fail_item(e, i, "a function_call needs string call_id, name and arguments");
                goto bad;
            }
            if (!calls) {
                json_t *m = json_pack("{s:s, s:n, s:[]}", "role", "assistant", "content", "tool_calls");
                calls = json_object_get(m, "tool_calls");
                json_array_append_new(msgs, m);
            }
            json_array_append_new(calls, json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", id, "type", "function",
                                                   "function", "name", name, "arguments", args));
            continue;
        }
        calls = NULL;
        if (type && !strcmp(type, "function_call_output")) {
            json_t *id = json_object_get(it, "call_id"), *out = json_object_get(it, "output");
            if (!json_is_string(id) || !json_is_string(out)) {
                fail_item(e, i, "a function_call_output needs string call_id and output");
                goto bad;
            }
            json_array_append_new(msgs, json_pack("{s:s, s:O, s:O}", "role", "tool", "tool_call_id", id,
                                                  "content", out));
            continue;
        }
        if ((type && strcmp(type, "message")) || !json_is_string(role)) {
            fail_item(e, i, "must be a message (with a role), function_call or function_call_output");
            goto bad;
        }
        json_t *content = message_content(json_object_get(it, "content"), i, e);
        if (!content) goto bad;
        json_array_append_new(msgs, json_pack("{s:O, s:o}", "role", role, "content", content));
    }
    return msgs;
bad:
    json_decref(msgs);
    return NULL;
}

/* dst gets src's non-null values of keys[n] */
static void copy_keys(json_t *dst, json_t *src, const char *const *keys, size_t n) {
    for (size_t k = 0; k < n; k++) {
        json_t *v = json_object_get(src, keys[k]);
        if (v && !json_is_null(v)) json_object_set(dst, keys[k], v);
    }
}

/* Responses tools are flat ({"type": "function", "name", "parameters"}); chat nests them. */
static json_t *chat_tools(json_t *tools, xi_oai_error *e) {
    if (!json_is_array(tools)) {
        xi_oai_fail(e, 400, "tools", "'tools' must be an array");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "function") || !json_is_string(json_object_get(t, "name"))) {
            json_decref(out);
            xi_oai_fail(e, 400, "tools", "tools[%zu]: only {\"type\": \"function\", \"name\": ...} tools are supported", i);
            return NULL;
        }
        json_t *fn = json_object();
        static const char *const keys[] = {"name", "description", "parameters", "strict"};
        copy_keys(fn, t, keys, sizeof keys / sizeof keys[0]);
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    return out;
}

/* text.format as the chat endpoint's response_format; NULL with e clear when plain text. */
static json_t *chat_format(json_t *text, xi_oai_error *e) {
    json_t *f = json_object_get(text, "format");
    if (!f || json_is_null(f)) return NULL;
    const char *type = json_string_value(json_object_get(f, "type"));
    if (type && !strcmp(type, "text")) return NULL;
    if (type && !strcmp(type, "json_object")) return json_pack("{s:s}", "type", "json_object");
    if (type && !strcmp(type, "json_schema")) {
        json_t *js = json_object();
        static const char *const keys[] = {"name", "schema", "strict", "description"};
        copy_keys(js, f, keys, sizeof keys / sizeof keys[0]);
        return json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js);
    }
    xi_oai_fail(e, 400, "text.format", "text.format.type must be \"text\", \"json_object\" or \"json_schema\"");
    return NULL;
}

static json_t *chat_tool_choice(json_t *c) {
    const char *type = json_string_value(json_object_get(c, "type"));
    json_t *name = json_object_get(c, "name");
    if (json_is_object(c) && type && !strcmp(type, "function") && json_is_string(name))
        return json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name);
    return json_incref(c); /* "auto", "none", "required"; anything else meets chat's check */
}

static json_t *translate(json_t *req, xi_resp *r, xi_oai_error *e) {
    json_t *v = json_object_get(req, "previous_response_id");
    if (v && !json_is_null(v)) {
        xi_oai_fail(e, 400, "previous_response_id", "responses are not stored on this server, so previous_response_id cannot be used: send the conversation as input items");
        return NULL;
    }
    if (json_is_true(json_object_get(req, "background"))) {
        xi_oai_fail(e, 400, "background", "background responses need stored responses, which this server does not keep");
        return NULL;
    }
    v = json_object_get(req, "max_output_tokens");
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 1)) {
        xi_oai_fail(e, 400, "max_output_tokens", "'max_output_tokens' must be an integer >= 1");
        return NULL;
    }
    json_t *msgs = input_messages(req, e);
    if (!msgs) return NULL;
    json_t *chat = json_pack("{s:o}", "messages", msgs);
    static const char *const same[] = {"model", "stream", "temperature", "top_p", "top_k", "min_p", "seed",
                                       "repetition_penalty", "presence_penalty", "frequency_penalty",
                                       "stop", "logit_bias", "cache_salt"};
    copy_keys(chat, req, same, sizeof same / sizeof same[0]);
    if ((v = json_object_get(req, "max_output_tokens")) && !json_is_null(v)) json_object_set(chat, "max_tokens", v);
    if ((v = json_object_get(req, "tools")) && !json_is_null(v)) {
        json_t *t = chat_tools(v, e);
        if (!t) goto bad;
        if (json_array_size(t)) json_object_set_new(chat, "tools", t);
        else json_decref(t);
    }
    if ((v = json_object_get(req, "tool_choice")) && !json_is_null(v))
        json_object_set_new(chat, "tool_choice", chat_tool_choice(v));
    if ((v = json_object_get(req, "text")) && !json_is_null(v)) {
        if (!json_is_object(v)) {
            xi_oai_fail(e, 400, "text", "'text' must be an object");
            goto bad;
        }
        e->status = 0;
        json_t *f = chat_format(v, e);
        if (!f && e->status) goto bad;
        if (f) json_object_set_new(chat, "response_format", f);
    }
    /* what the response object repeats, with the Responses API's defaults */
    r->echo = json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:b, s:s, s:b, s:n}",
                        "instructions", json_object_get(req, "instructions"), "max_output_tokens",
                        json_object_get(req, "max_output_tokens"), "temperature",
                        json_object_get(req, "temperature"), "top_p", json_object_get(req, "top_p"),
                        "tools", json_object_get(req, "tools"), "tool_choice", json_object_get(req, "tool_choice"),
                        "text", json_object_get(req, "text"), "metadata", json_object_get(req, "metadata"),
                        "reasoning", json_object_get(req, "reasoning"), "parallel_tool_calls", 1,
                        "truncation", "disabled", "store", 0, "previous_response_id");
    if (!r->echo) {
        xi_oai_fail(e, 500, NULL, "out of memory");
        goto bad;
    }
    static const struct { const char *key, *dflt; } dflt[] = {
        {"tools", "[]"}, {"tool_choice", "\"auto\""}, {"text", "{\"format\":{\"type\":\"text\"}}"},
        {"metadata", "{}"}, {"temperature", "1.0"}, {"top_p", "1.0"},
    };
    for (size_t k = 0; k < sizeof dflt / sizeof dflt[0]; k++)
        if (json_is_null(json_object_get(r->echo, dflt[k].key)))
            json_object_set_new(r->echo, dflt[k].key, json_loads(dflt[k].dflt, JSON_DECODE_ANY, NULL));
    json_t *pc = json_object_get(req, "parallel_tool_calls");
    if (json_is_boolean(pc)) json_object_set(r->echo, "parallel_tool_calls", pc);
    return chat;
bad:
    json_decref(chat);
    return NULL;
}

xi_resp *xi_resp_parse(const char *body, size_t len, char **chat_body, xi_oai_error *e) {
    *chat_body = NULL;
    json_error_t je;
    json_t *req = json_loadb(body, len, 0, &je);
    if (!json_is_object(req)) {
        json_decref(req);
        xi_oai_fail(e, 400, NULL, "the request body is not a JSON object%s%s", je.text[0] ? ": " : "", je.text);
        return NULL;
    }
    xi_resp *r = calloc(1, sizeof *r);
    r->items = json_array();
    json_t *chat = r->items ? translate(req, r, e) : NULL;
    json_decref(req);
    if (chat) *chat_body = json_dumps(chat, JSON_COMPACT);
    json_decref(chat);
    if (!*chat_body) {
        if (chat) xi_oai_fail(e, 500, NULL, "out of memory");
        xi_resp_free(r);
        return NULL;
    }
    return r;
}

void xi_resp_free(xi_resp *r) {
    if (!r) return;
    json_decref(r->echo);
    json_decref(r->items);
    free(r->model);
    xi_buf_free(&r->text);
    free(r);
}

/* ---- the answer --------------------------------------------------------------------------- */

static void emit(xi_resp *r, xi_resp_sink out, const char *type, json_t *o) {
    if (!out.buf) {
        json_decref(o);
        return;
    }
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "sequence_number", json_integer(r->seq++));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return;
    char head[96];
    int n = snprintf(head, sizeof head, "event: %s\ndata: ", type);
    xi_buf_append(out.buf, head, (size_t)n);
    xi_buf_append(out.buf, s, strlen(s));
    xi_buf_append(out.buf, "\n\n", 2);
    free(s);
}

static json_t *response_object(xi_resp *r, const char *status, json_t *usage) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:n, s:n, s:O, s:o?}", "id", r->id, "object", "response",
                          "created_at", (json_int_t)r->created, "model", r->model ? r->model : "",
                          "status", status, "incomplete_details", "error", "output", r->items, "usage", usage);
    if (o) json_object_update(o, r->echo);
    return o;
}

static void new_item_id(xi_resp *r, const char *kind) {
    snprintf(r->item_id, sizeof r->item_id, "%s_%s_%d", kind, r->id + 5, r->n_made++);
}

void xi_resp_begin(xi_resp *r, const char *id, long created, const char *model, xi_resp_sink out) {
    snprintf(r->id, sizeof r->id, "resp_%s", strchr(id, '-') ? strchr(id, '-') + 1 : id);
    r->created = created;
    free(r->model);
    r->model = model ? strdup(model) : NULL;
    emit(r, out, "response.created", json_pack("{s:o}", "response", response_object(r, "in_progress", NULL)));
    emit(r, out, "response.in_progress", json_pack("{s:o}", "response", response_object(r, "in_progress", NULL)));
}

static json_t *part_of(int open, const char *text, size_t len) {
    return open == OPEN_MESSAGE
        ? json_pack("{s:s, s:o, s:[], s:[]}", "type", "output_text", "text", xi_srv_json_text(text, len),
                    "annotations", "logprobs")
        : json_pack("{s:s, s:o}", "type", "reasoning_text", "text", xi_srv_json_text(text, len));
}

static json_t *item_of(xi_resp *r, const char *status, int with_part) {
    json_t *content = json_array();
    if (with_part) json_array_append_new(content, part_of(r->open, r->text.data ? r->text.data : "", r->text.len));
    if (r->open == OPEN_MESSAGE)
        return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", r->item_id, "type", "message", "status", status,
                         "role", "assistant", "content", content);
    return json_pack("{s:s, s:s, s:[], s:o, s:s}", "id", r->item_id, "type", "reasoning", "summary",
                     "content", content, "status", status);
}

static void close_item(xi_resp *r, xi_resp_sink out) {
    if (r->open == OPEN_NONE) return;
    const int idx = (int)json_array_size(r->items);
    const int msg = r->open == OPEN_MESSAGE;
    emit(r, out, msg ? "response.output_text.done" : "response.reasoning_text.done",
         json_pack("{s:s, s:i, s:i, s:o}", "item_id", r->item_id, "output_index", idx, "content_index", 0, "text",
                   xi_srv_json_text(r->text.data ? r->text.data : "", r->text.len)));
    emit(r, out, "response.content_part.done",
         json_pack("{s:s, s:i, s:i, s:o}", "item_id", r->item_id, "output_index", idx, "content_index", 0, "part",
                   part_of(r->open, r->text.data ? r->text.data : "", r->text.len)));
    json_t *item = item_of(r, "completed", 1);
    emit(r, out, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", idx, "item", item));
    json_array_append_new(r->items, item);
    r->open = OPEN_NONE;
    r->text.len = 0;
}

static void add_text(xi_resp *r, int kind, const char *t, size_t n, xi_resp_sink out) {
    if (!n) return;
    if (r->open != kind) {
        close_item(r, out);
        r->open = kind;
        new_item_id(r, kind == OPEN_MESSAGE ? "msg" : "rs");
        const int idx = (int)json_array_size(r->items);
        emit(r, out, "response.output_item.added",
             json_pack("{s:i, s:o}", "output_index", idx, "item", item_of(r, "in_progress", 0)));
        emit(r, out, "response.content_part.added",
             json_pack("{s:s, s:i, s:i, s:o}", "item_id", r->item_id, "output_index", idx, "content_index", 0,
                       "part", part_of(kind, "", 0)));
    }
    xi_buf_append(&r->text, t, n);
    json_t *ev = json_pack("{s:s, s:i, s:i, s:o}", "item_id", r->item_id, "output_index",
                           (int)json_array_size(r->items), "content_index", 0, "delta", xi_srv_json_text(t, n));
    if (kind == OPEN_MESSAGE) json_object_set_new(ev, "logprobs", json_array());
    emit(r, out, kind == OPEN_MESSAGE ? "response.output_text.delta" : "response.reasoning_text.delta", ev);
}

void xi_resp_add(xi_resp *r, const char *reasoning, size_t rlen, const char *content, size_t clen,
                 const json_t *calls, xi_resp_sink out) {
    add_text(r, OPEN_REASONING, reasoning, rlen, out);
    add_text(r, OPEN_MESSAGE, content, clen, out);
    if (!json_array_size(calls)) return;
    close_item(r, out);
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        const char *call_id = json_string_value(json_object_get(c, "id"));
        new_item_id(r, "fc");
        const int idx = (int)json_array_size(r->items);
        json_t *item = json_pack("{s:s, s:s, s:s, s:O, s:s, s:s}", "id", r->item_id, "type", "function_call",
                                 "call_id", call_id ? call_id : r->item_id, "name", json_object_get(fn, "name"),
                                 "arguments", "", "status", "in_progress");
        if (!item) continue;
        emit(r, out, "response.output_item.added", json_pack("{s:i, s:O}", "output_index", idx, "item", item));
        emit(r, out, "response.function_call_arguments.delta",
             json_pack("{s:s, s:i, s:s}", "item_id", r->item_id, "output_index", idx, "delta", args ? args : ""));
        emit(r, out, "response.function_call_arguments.done",
             json_pack("{s:s, s:i, s:O, s:s}", "item_id", r->item_id, "output_index", idx, "name",
                       json_object_get(fn, "name"), "arguments", args ? args : ""));
        json_object_set_new(item, "arguments", json_string(args ? args : ""));
        json_object_set_new(item, "status", json_string("completed"));
        emit(r, out, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", idx, "item", item));
        json_array_append_new(r->items, item);
    }
}

json_t *xi_resp_end(xi_resp *r, int length, int input_tokens, int cached_tokens, int output_tokens,
                    xi_resp_sink out) {
    if (r->open == OPEN_NONE && !json_array_size(r->items)) {
        /* an empty answer is still one (empty) message */
        r->open = OPEN_MESSAGE;
        new_item_id(r, "msg");
    }
    close_item(r, out);
    json_t *usage = json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", input_tokens,
                              "input_tokens_details", "cached_tokens", cached_tokens, "output_tokens",
                              output_tokens, "output_tokens_details", "reasoning_tokens", 0, "total_tokens",
                              input_tokens + output_tokens);
    json_t *o = response_object(r, length ? "incomplete" : "completed", usage);
    if (o && length)
        json_object_set_new(o, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    if (o) emit(r, out, "response.completed", json_pack("{s:O}", "response", o));
    return o;
}
