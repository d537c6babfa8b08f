/* server/oai: OpenAI request bodies → engine parameters. Ranges follow the OpenAI API
 * reference and vLLM's SamplingParams checks, so a request vLLM rejects is rejected here with
 * a 400 naming the same parameter. */
#include "server/oai.h"
#include "server/structured.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>


#define MAX_STOP 64          /* OpenAI allows 4; vLLM any number; keep the matcher bounded */
#define MAX_N 128
#define MAX_LOGPROBS 20      /* vLLM's default max_logprobs */
#define DEFAULT_COMPLETION_TOKENS 16 /* /v1/completions without max_tokens */
#define MAX_PROMPTS 1024

int xi_oai_fail(xi_oai_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

char *xi_srv_utf8_clean(const char *s, size_t n, size_t *out_len) {
    char *o = malloc(3 * n + 1), *w = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k > 0) {
            memcpy(w, s + i, (size_t)k);
            w += k;
            i += (size_t)k;
        } else {
            memcpy(w, "\xEF\xBF\xBD", 3);
            w += 3;
            i++;
        }
    }
    *w = 0;
    if (out_len) *out_len = (size_t)(w - o);
    return o;
}

char *xi_oai_error_json(const xi_oai_error *e) {
    const char *type = "invalid_request_error", *code = NULL;
    switch (e->status) {
    case 401: type = "authentication_error"; code = "invalid_api_key"; break;
    case 404: type = "not_found_error"; code = e->param[0] ? "model_not_found" : "not_found"; break;
    case 413: code = "request_too_large"; break;
    case 503: type = "server_error"; code = "service_unavailable"; break;
    case 500: type = "server_error"; code = "internal_error"; break;
    default: break;
    }
    char *msg = xi_srv_utf8_clean(e->message, strlen(e->message), NULL);
    char *param = e->param[0] ? xi_srv_utf8_clean(e->param, strlen(e->param), NULL) : NULL;
    json_t *o = msg && (param || !e->param[0])
                    ? json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", msg, "type", type,
                                "param", param ? json_string(param) : json_null(), "code",
                                code ? json_string(code) : json_null())
                    : NULL;
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    free(msg);
    free(param);
    return s;
}

/* ---- typed field access: JSON null counts as absent ------------------------------------- */

static json_t *field(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

/* 1 present, 0 absent, -1 wrong type */
static int get_number(json_t *o, const char *key, double *out, xi_oai_error *e) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_number(v)) return xi_oai_fail(e, 400, key, "'%s' must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return xi_oai_fail(e, 400, key, "'%s' must be finite", key);
    /* every sampling number is used as a 32-bit float: refuse what would become inf or 0
     * there, instead of changing the request silently */
    const float f = (float)*out;
    if (isinf(f) || (f == 0.0f && *out != 0.0))
        return xi_oai_fail(e, 400, key, "'%s' is out of range, got %g", key, *out);
    return 1;
}

static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out,
                   xi_oai_error *e) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_integer(v)) return xi_oai_fail(e, 400, key, "'%s' must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return xi_oai_fail(e, 400, key, "'%s' must be in [%lld, %lld], got %lld", key, lo, hi, x);
    *out = x;
    return 1;
}

static int get_bool(json_t *o, const char *key, int *out, xi_oai_error *e) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return xi_oai_fail(e, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 1;
}

static int get_string(json_t *o, const char *key, char **out, xi_oai_error *e) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_string(v)) return xi_oai_fail(e, 400, key, "'%s' must be a string", key);
    *out = strdup(json_string_value(v));
    return *out ? 1 : xi_oai_fail(e, 500, NULL, "out of memory");
}

static json_t *parse_body(const char *body, size_t len, xi_oai_error *e) {
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root) {
        xi_oai_fail(e, 400, NULL, "invalid JSON body: %s (line %d, column %d)", je.text, je.line,
                    je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        xi_oai_fail(e, 400, NULL, "the request body must be a JSON object");
        return NULL;
    }
    return root;
}

/* ---- prompts ----------------------------------------------------------------------------- */

static int ids_from_array(json_t *a, const char *param, xi_oai_prompt *p, xi_oai_error *e) {
    size_t n = json_array_size(a);
    if (!n) return xi_oai_fail(e, 400, param, "'%s' has an empty list of token ids", param);
    p->ids = malloc(n * sizeof *p->ids);
    if (!p->ids) return xi_oai_fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return xi_oai_fail(e, 400, param, "'%s' token ids must be non-negative integers", param);
        p->ids[i] = (int32_t)json_integer_value(v);
    }
    p->n_ids = (int)n;
    return 0;
}

/* prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...] */
static int parse_prompts(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    json_t *p = field(body, "prompt");
    if (!p) return xi_oai_fail(e, 400, "prompt", "'prompt' is required");
    if (json_is_string(p)) {
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts || !(r->prompts[0].text = strdup(json_string_value(p))))
            return xi_oai_fail(e, 500, NULL, "out of memory");
        r->n_prompts = 1;
        return 0;
    }
    if (!json_is_array(p) || !json_array_size(p))
        return xi_oai_fail(e, 400, "prompt",
                           "'prompt' must be a string, a list of strings or a (list of) token id list");
    size_t n = json_array_size(p);
    json_t *first = json_array_get(p, 0);
    if (json_is_integer(first)) {
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return xi_oai_fail(e, 500, NULL, "out of memory");
        r->n_prompts = 1;
        return ids_from_array(p, "prompt", &r->prompts[0], e);
    }
    if (n > MAX_PROMPTS) return xi_oai_fail(e, 400, "prompt", "at most %d prompts per request", MAX_PROMPTS);
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts) return xi_oai_fail(e, 500, NULL, "out of memory");
    r->n_prompts = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(p, i);
        if (json_is_string(v) && json_is_string(first)) {
            if (!(r->prompts[i].text = strdup(json_string_value(v))))
                return xi_oai_fail(e, 500, NULL, "out of memory");
        } else if (json_is_array(v) && json_is_array(first)) {
            if (ids_from_array(v, "prompt", &r->prompts[i], e)) return -1;
        } else {
            return xi_oai_fail(e, 400, "prompt", "'prompt' list items must all be strings or all token id lists");
        }
    }
    return 0;
}

/* Messages as the template expects them: content a string (text parts joined by "\n", as
 * vLLM joins them) or null; roles checked; tool calls' arguments as objects; other keys
 * (name, tool_call_id, ...) kept. */
static int parse_messages(xi_oai_request *r, json_t *body, const char *key, char **out,
                          xi_oai_error *e) {
    json_t *m = field(body, key);
    if (!m) return xi_oai_fail(e, 400, key, "'%s' is required", key);
    if (!json_is_array(m) || !json_array_size(m))
        return xi_oai_fail(e, 400, key, "'%s' must be a non-empty array", key);
    json_t *norm = json_array();
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char param[64];
        snprintf(param, sizeof param, "%s[%zu]", key, i);
        if (!json_is_object(msg)) {
            json_decref(norm);
            return xi_oai_fail(e, 400, key, "%s must be an object", param);
        }
        /* any role reaches the template, as vLLM's custom message roles do */
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role) || !json_string_length(role)) {
            json_decref(norm);
            return xi_oai_fail(e, 400, key, "%s.role must be a non-empty string", param);
        }
        json_t *copy = json_deep_copy(msg);
        /* a tool call comes back with its arguments as a JSON string; templates (Qwen's
         * `tojson`) expect the object, so it is parsed back, as vLLM does */
        size_t t;
        json_t *tc;
        json_array_foreach(json_object_get(copy, "tool_calls"), t, tc) {
            json_t *fn = json_object_get(tc, "function");
            json_t *args = json_object_get(fn, "arguments");
            json_t *obj = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL) : NULL;
            if (json_is_object(obj)) json_object_set(fn, "arguments", obj);
            json_decref(obj);
        }
        json_t *content = json_object_get(msg, "content");
        if (json_is_array(content)) {
            size_t total = 1, j;
            json_t *part;
            json_array_foreach(content, j, part) {
                json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
                if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
                    json_decref(copy);
                    json_decref(norm);
                    return xi_oai_fail(e, 400, key, "%s.content[%zu]: only {\"type\": \"text\", \"text\": ...} parts are supported", param, j);
                }
                total += json_string_length(text) + 1;
            }
            char *joined = malloc(total), *w = joined;
            if (!joined) {
                json_decref(copy);
                json_decref(norm);
                return xi_oai_fail(e, 500, NULL, "out of memory");
            }
            json_array_foreach(content, j, part) {
                json_t *text = json_object_get(part, "text");
                if (j) *w++ = '\n';
                memcpy(w, json_string_value(text), json_string_length(text));
                w += json_string_length(text);
            }
            *w = 0;
            json_object_set_new(copy, "content", json_stringn(joined, (size_t)(w - joined)));
            free(joined);
        } else if (content && !json_is_string(content) && !json_is_null(content)) {
            json_decref(copy);
            json_decref(norm);
            return xi_oai_fail(e, 400, key, "%s.content must be a string, an array of text parts or null", param);
        }
        json_array_append_new(norm, copy);
    }
    *out = json_dumps(norm, JSON_COMPACT);
    json_decref(norm);
    (void)r;
    return *out ? 0 : xi_oai_fail(e, 500, NULL, "out of memory");
}

/* Chat echo as vLLM answers it: the answer starts with the last message's content when that
 * message is in the answer's role, the assistant's with add_generation_prompt (the default),
 * else the last message's own (the answer continues it). */
static int chat_echo(xi_oai_request *r, xi_oai_error *e) {
    json_t *m = json_loads(r->messages_json, 0, NULL);
    json_t *last = json_array_get(m, json_array_size(m) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    json_t *content = json_object_get(last, "content");
    int rc = 0;
    if (role && json_string_length(content) && (!r->add_generation_prompt || !strcmp(role, "assistant")) &&
        !(r->chat_echo = strdup(json_string_value(content))))
        rc = xi_oai_fail(e, 500, NULL, "out of memory");
    json_decref(m);
    return rc;
}

static int parse_tools(json_t *body, char **out, xi_oai_error *e) {
    json_t *t = field(body, "tools");
    if (!t) return 0;
    if (!json_is_array(t)) return xi_oai_fail(e, 400, "tools", "'tools' must be an array");
    size_t i;
    json_t *tool;
    json_array_foreach(t, i, tool) {
        if (!json_is_object(tool) || !json_is_object(json_object_get(tool, "function")))
            return xi_oai_fail(e, 400, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {...}}", i);
    }
    if (!json_array_size(t)) return 0;
    *out = json_dumps(t, JSON_COMPACT);
    return *out ? 0 : xi_oai_fail(e, 500, NULL, "out of memory");
}

/* chat_template_kwargs (vLLM): extra variables for the chat template, an object. */
static int parse_template_kwargs(json_t *body, char **out, xi_oai_error *e) {
    json_t *k = field(body, "chat_template_kwargs");
    if (!k) return 0;
    if (!json_is_object(k))
        return xi_oai_fail(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    *out = json_dumps(k, JSON_COMPACT);
    return *out ? 0 : xi_oai_fail(e, 500, NULL, "out of memory");
}

/* tool_choice as vLLM checks it: any choice but "none" needs tools; "required" and a named
 * function constrain decoding to the tools' schemas (server/structured). */
static int parse_tool_choice(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    json_t *c = field(body, "tool_choice");
    if (!c) return 0;
    const char *v = json_string_value(c);
    if (v && !strcmp(v, "none")) {
        r->tool_choice = XI_TOOL_CHOICE_NONE;
        return 0;
    }
    if (!r->tools_json) return xi_oai_fail(e, 400, "tool_choice", "When using `tool_choice`, `tools` must be set.");
    if (v && !strcmp(v, "auto")) {
        r->tool_choice = XI_TOOL_CHOICE_AUTO;
        return 0;
    }
    if ((v && !strcmp(v, "required")) || json_is_object(c)) return xi_structured_tool_choice(r, c, e);
    return xi_oai_fail(e, 400, "tool_choice", "`tool_choice` must be \"none\", \"auto\", \"required\" or a named function");
}

/* ---- sampling parameters ----------------------------------------------------------------- */

static int parse_stop(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    json_t *s = field(body, "stop");
    if (s) {
        size_t n = json_is_string(s) ? 1 : json_is_array(s) ? json_array_size(s) : (size_t)-1;
        if (n == (size_t)-1) return xi_oai_fail(e, 400, "stop", "'stop' must be a string or an array of strings");
        if (n > MAX_STOP) return xi_oai_fail(e, 400, "stop", "at most %d stop strings", MAX_STOP);
        r->stop = calloc(n ? n : 1, sizeof *r->stop);
        if (!r->stop) return xi_oai_fail(e, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_is_string(s) ? s : json_array_get(s, i);
            if (!json_is_string(v) || !json_string_length(v))
                return xi_oai_fail(e, 400, "stop", "'stop' entries must be non-empty strings");
            if (!(r->stop[i] = strdup(json_string_value(v)))) return xi_oai_fail(e, 500, NULL, "out of memory");
            r->params.n_stop = (int)i + 1;
        }
        r->params.stop = (const char *const *)r->stop;
    }
    json_t *ids = field(body, "stop_token_ids");
    if (ids) {
        if (!json_is_array(ids)) return xi_oai_fail(e, 400, "stop_token_ids", "'stop_token_ids' must be an array of token ids");
        size_t n = json_array_size(ids);
        r->stop_token_ids = malloc((n ? n : 1) * sizeof *r->stop_token_ids);
        if (!r->stop_token_ids) return xi_oai_fail(e, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
                return xi_oai_fail(e, 400, "stop_token_ids", "'stop_token_ids' must be non-negative integers");
            r->stop_token_ids[i] = (int32_t)json_integer_value(v);
        }
        r->params.stop_token_ids = r->stop_token_ids;
        r->params.n_stop_token_ids = (int)n;
    }
    return 0;
}

static int parse_logit_bias(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    json_t *b = field(body, "logit_bias");
    if (!b) return 0;
    if (!json_is_object(b)) return xi_oai_fail(e, 400, "logit_bias", "'logit_bias' must be an object of token id -> bias");
    size_t n = json_object_size(b), i = 0;
    r->logit_bias = malloc((n ? n : 1) * sizeof *r->logit_bias);
    if (!r->logit_bias) return xi_oai_fail(e, 500, NULL, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char *end;
        long id = strtol(key, &end, 10);
        if (end == key || *end || id < 0 || id > INT32_MAX)
            return xi_oai_fail(e, 400, "logit_bias", "logit_bias key '%s' is not a token id", key);
        if (!json_is_number(v) || json_number_value(v) < -100 || json_number_value(v) > 100)
            return xi_oai_fail(e, 400, "logit_bias", "logit_bias values must be numbers in [-100, 100]");
        r->logit_bias[i++] = (xi_logit_bias){(int32_t)id, (float)json_number_value(v)};
    }
    r->params.logit_bias = r->logit_bias;
    r->params.n_logit_bias = (int)i;
    return 0;
}

static int parse_sampling(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    xi_request_params *p = &r->params;
    double d;
    long long v;
    int rc, b;

    if ((rc = get_number(body, "temperature", &d, e)) < 0) return -1;
    if (rc) {
        if (d < 0) return xi_oai_fail(e, 400, "temperature", "'temperature' must be >= 0, got %g", d);
        p->temperature = (float)d;
    }
    if ((rc = get_number(body, "top_p", &d, e)) < 0) return -1;
    if (rc) {
        if (!(d > 0 && d <= 1)) return xi_oai_fail(e, 400, "top_p", "'top_p' must be in (0, 1], got %g", d);
        p->top_p = (float)d;
    }
    if ((rc = get_int(body, "top_k", -1, INT32_MAX, &v, e)) < 0) return -1;
    if (rc) p->top_k = (int)v;
    if ((rc = get_number(body, "min_p", &d, e)) < 0) return -1;
    if (rc) {
        if (!(d >= 0 && d <= 1)) return xi_oai_fail(e, 400, "min_p", "'min_p' must be in [0, 1], got %g", d);
        p->min_p = (float)d;
    }
    if ((rc = get_number(body, "presence_penalty", &d, e)) < 0) return -1;
    if (rc) {
        if (!(d >= -2 && d <= 2)) return xi_oai_fail(e, 400, "presence_penalty", "'presence_penalty' must be in [-2, 2], got %g", d);
        p->presence_penalty = (float)d;
    }
    if ((rc = get_number(body, "frequency_penalty", &d, e)) < 0) return -1;
    if (rc) {
        if (!(d >= -2 && d <= 2)) return xi_oai_fail(e, 400, "frequency_penalty", "'frequency_penalty' must be in [-2, 2], got %g", d);
        p->frequency_penalty = (float)d;
    }
    if ((rc = get_number(body, "repetition_penalty", &d, e)) < 0) return -1;
    if (rc) {
        if (!(d > 0 && d <= 100)) return xi_oai_fail(e, 400, "repetition_penalty", "'repetition_penalty' must be in (0, 100], got %g", d);
        p->repetition_penalty = (float)d;
    }
    if ((rc = get_int(body, "seed", INT64_MIN, INT64_MAX, &v, e)) < 0) return -1;
    /* OpenAI accepts negative seeds; the engine reads < 0 as "none", so fold them */
    if (rc) p->seed = (int64_t)((uint64_t)v & (uint64_t)INT64_MAX);
    if ((rc = get_int(body, "n", 1, MAX_N, &v, e)) < 0) return -1;
    r->n = rc ? (int)v : 1;
    p->n = r->n;

    /* max_completion_tokens is the newer chat name; it wins when both are given */
    long long mt = -1;
    int min_mt = (!r->chat && r->echo) ? 0 : 1;
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "max_completion_tokens" : "max_tokens";
        if (k && !r->chat) break;
        json_t *f = field(body, key);
        if (f && json_is_integer(f) && json_integer_value(f) < min_mt)
            return xi_oai_fail(e, 400, key, "'%s' must be at least %d, got %lld", key, min_mt,
                               (long long)json_integer_value(f));
        if ((rc = get_int(body, key, min_mt, INT32_MAX, &v, e)) < 0) return -1;
        if (rc) mt = v;
    }
    /* as in OpenAI's and vLLM's completions API, an absent max_tokens means 16; an explicit
     * null (and an absent one in chat) means up to the context limit */
    if (!r->chat && !json_object_get(body, "max_tokens")) mt = DEFAULT_COMPLETION_TOKENS;
    r->max_tokens = (int)mt;
    p->max_tokens = r->max_tokens;
    if ((rc = get_int(body, "min_tokens", 0, INT32_MAX, &v, e)) < 0) return -1;
    if (rc) {
        if (mt >= 0 && v > mt) return xi_oai_fail(e, 400, "min_tokens", "'min_tokens' (%lld) must not exceed max_tokens (%lld)", v, mt);
        p->min_tokens = (int)v;
    }
    if ((rc = get_bool(body, "ignore_eos", &b, e)) < 0) return -1;
    if (rc) p->ignore_eos = b;
    if ((rc = get_bool(body, "skip_special_tokens", &b, e)) < 0) return -1;
    if (rc) p->skip_special_tokens = b;
    if ((rc = get_bool(body, "include_stop_str_in_output", &b, e)) < 0) return -1;
    if (rc) p->include_stop_str_in_output = b;
    if (get_string(body, "cache_salt", &r->cache_salt, e) < 0) return -1;
    if (r->cache_salt && !*r->cache_salt) return xi_oai_fail(e, 400, "cache_salt", "'cache_salt' must be non-empty");
    p->cache_salt = r->cache_salt;
    if (parse_stop(r, body, e) || parse_logit_bias(r, body, e)) return -1;
    json_t *allowed = field(body, "allowed_token_ids");
    if (allowed) { /* vLLM: only these tokens may be drawn */
        xi_oai_prompt tmp = {0};
        if (!json_is_array(allowed) || !json_array_size(allowed))
            return xi_oai_fail(e, 400, "allowed_token_ids", "'allowed_token_ids' must be a non-empty array of token ids");
        if (ids_from_array(allowed, "allowed_token_ids", &tmp, e)) {
            free(tmp.ids);
            return -1;
        }
        r->allowed_token_ids = tmp.ids;
        r->params.allowed_token_ids = tmp.ids;
        r->params.n_allowed_token_ids = tmp.n_ids;
    }

    return xi_structured_parse(r, body, e);
}

static int parse_logprobs(xi_oai_request *r, json_t *body, xi_oai_error *e) {
    long long v;
    int rc, b = 0;
    r->logprobs = -1;
    if (r->chat) {
        if ((rc = get_bool(body, "logprobs", &b, e)) < 0) return -1;
        if ((rc = get_int(body, "top_logprobs", 0, MAX_LOGPROBS, &v, e)) < 0) return -1;
        if (rc && !b) return xi_oai_fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (b) r->logprobs = rc ? (int)v : 0;
    } else {
        if ((rc = get_int(body, "logprobs", 0, MAX_LOGPROBS, &v, e)) < 0) return -1;
        if (rc) r->logprobs = (int)v;
    }
    r->params.logprobs = r->logprobs;
    /* echo with logprobs scores the prompt too */
    if (r->echo && r->logprobs >= 0) r->params.prompt_logprobs = r->logprobs;
    r->prompt_logprobs = -1;
    if ((rc = get_int(body, "prompt_logprobs", 0, MAX_LOGPROBS, &v, e)) < 0) return -1;
    if (rc && r->stream) return xi_oai_fail(e, 400, "prompt_logprobs", "'prompt_logprobs' is not supported with \"stream\": true");
    if (rc) r->prompt_logprobs = (int)v;
    if (rc && v > r->params.prompt_logprobs) r->params.prompt_logprobs = (int)v;
    return 0;
}

/* The top-level fields a chat or completions body may have that this server reads (or, for
 * `user`, takes as vLLM does without effect); others are named in r->ignored. */
static void note_ignored(xi_oai_request *r, json_t *root) {
    static const char *const known[] = {
        "model", "messages", "prompt", "stream", "stream_options", "echo", "suffix", "temperature", "top_p",
        "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "n",
        "max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos", "stop", "stop_token_ids",
        "include_stop_str_in_output", "skip_special_tokens", "logit_bias", "logprobs", "top_logprobs",
        "add_special_tokens", "add_generation_prompt", "continue_final_message", "tools", "tool_choice",
        "cache_salt", "return_token_ids", "prompt_logprobs", "allowed_token_ids", "response_format", "structured_outputs", "guided_json",
        "guided_regex", "guided_choice", "guided_grammar", "user", "chat_template_kwargs"};
    const char *key;
    json_t *v;
    size_t n = 0;
    json_object_foreach(root, key, v) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(key, known[k])) k++;
        if (k < sizeof known / sizeof known[0]) continue;
        const int w = snprintf(r->ignored + n, sizeof r->ignored - n, "%s%s", n ? ", " : "", key);
        if (w < 0 || (size_t)w >= sizeof r->ignored - n) break; /* the first names that fit */
        n += (size_t)w;
    }
}

int xi_oai_parse(xi_oai_request *r, int chat, const char *body, size_t len, xi_oai_error *e) {
    memset(r, 0, sizeof *r);
    xi_request_params_default(&r->params);
    r->chat = chat;
    r->n = 1;
    r->max_tokens = -1;
    r->logprobs = -1;
    r->add_generation_prompt = 1;
    r->add_special_tokens = !chat;
    json_t *root = parse_body(body, len, e);
    if (!root) return -1;
    int rc = -1, b;
    note_ignored(r, root);
    if (get_string(root, "model", &r->model, e) < 0) goto out;
    if (get_bool(root, "stream", &r->stream, e) < 0) goto out;
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so)) {
            xi_oai_fail(e, 400, "stream_options", "'stream_options' must be an object");
            goto out;
        }
        if (!r->stream) {
            xi_oai_fail(e, 400, "stream_options", "'stream_options' is only allowed with \"stream\": true");
            goto out;
        }
        if (get_bool(so, "include_usage", &r->include_usage, e) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            goto out;
        }
        if (get_bool(so, "continuous_usage_stats", &r->continuous_usage, e) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.continuous_usage_stats");
            goto out;
        }
    }
    if (!chat && get_bool(root, "echo", &r->echo, e) < 0) goto out;
    if (get_bool(root, "return_token_ids", &r->return_token_ids, e) < 0) goto out;
    if (!chat && field(root, "suffix")) { /* vLLM's answer too: no model here fills in the middle */
        xi_oai_fail(e, 400, "suffix", "suffix is not currently supported");
        goto out;
    }
    if (parse_sampling(r, root, e) || parse_logprobs(r, root, e)) goto out;
    if (get_bool(root, "add_special_tokens", &b, e) < 0) goto out;
    if (field(root, "add_special_tokens")) r->add_special_tokens = b;
    r->params.add_special_tokens = r->add_special_tokens;
    if (chat) {
        if (parse_messages(r, root, "messages", &r->messages_json, e) || parse_tools(root, &r->tools_json, e) ||
            parse_template_kwargs(root, &r->kwargs_json, e) || parse_tool_choice(r, root, e))
            goto out;
        if (get_bool(root, "add_generation_prompt", &r->add_generation_prompt, e) < 0) goto out;
        if (get_bool(root, "continue_final_message", &r->continue_final_message, e) < 0) goto out;
        if (r->continue_final_message && r->add_generation_prompt && field(root, "add_generation_prompt")) {
            xi_oai_fail(e, 400, "continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
            goto out;
        }
        if (r->continue_final_message) r->add_generation_prompt = 0;
        int echo = 0;
        if (get_bool(root, "echo", &echo, e) < 0 || (echo && chat_echo(r, e))) goto out;
    } else if (parse_prompts(r, root, e)) {
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

void xi_oai_request_free(xi_oai_request *r) {
    free(r->model);
    free(r->messages_json);
    free(r->chat_echo);
    free(r->tools_json);
    free(r->kwargs_json);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (int i = 0; r->stop && i < r->params.n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->stop_token_ids);
    free(r->logit_bias);
    free(r->allowed_token_ids);
    free(r->cache_salt);
    free(r->guide_src);
    free(r->forced_tool);
    memset(r, 0, sizeof *r);
}

/* ---- /tokenize and /detokenize ----------------------------------------------------------- */

int xi_oai_parse_tokenize(xi_oai_tokenize *t, const char *body, size_t len, xi_oai_error *e) {
    memset(t, 0, sizeof *t);
    t->add_special_tokens = 1;
    t->add_generation_prompt = 1;
    json_t *root = parse_body(body, len, e);
    if (!root) return -1;
    int rc = -1;
    if (get_string(root, "model", &t->model, e) < 0) goto out;
    if (get_bool(root, "return_token_strs", &t->return_token_strs, e) < 0) goto out;
    if (field(root, "messages")) {
        xi_oai_request tmp = {0};
        if (parse_messages(&tmp, root, "messages", &t->messages_json, e) || parse_tools(root, &t->tools_json, e) ||
            parse_template_kwargs(root, &t->kwargs_json, e))
            goto out;
        t->add_special_tokens = 0;
        if (get_bool(root, "add_generation_prompt", &t->add_generation_prompt, e) < 0) goto out;
        if (get_bool(root, "continue_final_message", &t->continue_final_message, e) < 0) goto out;
        if (t->continue_final_message) t->add_generation_prompt = 0;
    } else {
        int g = get_string(root, "prompt", &t->prompt, e);
        if (g < 0) goto out;
        if (!g) {
            xi_oai_fail(e, 400, "prompt", "'prompt' (a string) or 'messages' is required");
            goto out;
        }
    }
    if (get_bool(root, "add_special_tokens", &t->add_special_tokens, e) < 0) goto out;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

void xi_oai_tokenize_free(xi_oai_tokenize *t) {
    free(t->model);
    free(t->prompt);
    free(t->messages_json);
    free(t->tools_json);
    free(t->kwargs_json);
    memset(t, 0, sizeof *t);
}

int xi_oai_parse_detokenize(const char *body, size_t len, int32_t **ids, char **model,
                            xi_oai_error *e) {
    *ids = NULL;
    *model = NULL;
    json_t *root = parse_body(body, len, e);
    if (!root) return -1;
    int n = -1;
    if (get_string(root, "model", model, e) < 0) goto out;
    json_t *a = field(root, "tokens");
    if (!json_is_array(a)) {
        xi_oai_fail(e, 400, "tokens", "'tokens' must be an array of token ids");
        goto out;
    }
    xi_oai_prompt p = {0};
    if (!json_array_size(a)) {
        *ids = malloc(sizeof **ids);
        n = *ids ? 0 : xi_oai_fail(e, 500, NULL, "out of memory");
        goto out;
    }
    if (ids_from_array(a, "tokens", &p, e)) {
        free(p.ids);
        goto out;
    }
    *ids = p.ids;
    n = p.n_ids;
out:
    json_decref(root);
    return n;
}

/* ---- auth -------------------------------------------------------------------------------- */

int xi_oai_auth_ok(const char *header, const char *const *keys, int n_keys) {
    static const char bearer[] = "Bearer ";
    if (!header || strncmp(header, bearer, sizeof bearer - 1)) return 0;
    const unsigned char *given = (const unsigned char *)header + sizeof bearer - 1;
    size_t glen = strlen((const char *)given);
    int ok = 0;
    for (int k = 0; k < n_keys; k++) {
        const unsigned char *key = (const unsigned char *)keys[k];
        size_t klen = strlen(keys[k]);
        /* compare every byte of the key; the length difference joins the verdict */
        unsigned diff = (unsigned)(glen != klen);
        for (size_t i = 0; i < klen; i++) diff |= (unsigned)(key[i] ^ (i < glen ? given[i] : 0));
        ok |= diff == 0;
    }
    return ok;
}

int xi_oai_invocation_api(const char *body, size_t len, int pooling) {
    json_t *o = json_loadb(body, len, 0, NULL);
    const int api = !json_is_object(o)                          ? -1
                    : pooling                                   ? (json_object_get(o, "input") ? XI_OAI_API_EMBEDDINGS : -1)
                    : json_object_get(o, "messages")            ? XI_OAI_API_CHAT
                    : json_object_get(o, "prompt")              ? XI_OAI_API_COMPLETIONS
                                                                : -1;
    json_decref(o);
    return api;
}
