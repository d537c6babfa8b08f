/* chat_template: the request-facing wrapper over the Jinja engine: JSON inputs in, prompt
 * text out, with transformers' variable set and continue_final_message. */
#include "tokenizer/chat_template.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/jinja.h"

struct xi_chat_template {
    xi_jinja *j;
};

xi_chat_template *xi_chat_template_parse(const char *source, char *err, size_t errlen) {
    xi_chat_template *t = xi_calloc(1, sizeof *t);
    if (!t) return xi_errf(err, errlen, "chat template: out of memory"), NULL;
    t->j = xi_jinja_parse(source, err, errlen);
    if (!t->j) {
        free(t);
        return NULL;
    }
    return t;
}

void xi_chat_template_free(xi_chat_template *t) {
    if (!t) return;
    xi_jinja_free(t->j);
    free(t);
}

static json_t *load_json(const char *text, const char *what, int want, char *err, size_t errlen) {
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j) {
        xi_errf(err, errlen, "%s: invalid JSON at line %d column %d: %s", what, je.line, je.column, je.text);
        return NULL;
    }
    if ((int)json_typeof(j) != want && !(want == JSON_ARRAY && json_is_null(j) && !strcmp(what, "tools"))) {
        xi_errf(err, errlen, "%s: expected a JSON %s", what, want == JSON_ARRAY ? "array" : "object");
        json_decref(j);
        return NULL;
    }
    return j;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* transformers' continue_final_message: keep the text up to the end of the final message. */
static int cut_after_final_message(char *text, const json_t *messages, char *err, size_t errlen) {
    const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const json_t *content = last ? json_object_get(last, "content") : NULL;
    if (json_is_array(content)) { /* content parts: the last one with text */
        const json_t *found = NULL;
        for (size_t i = json_array_size(content); i-- > 0 && !found;)
            found = json_object_get(json_array_get(content, i), "text");
        content = found;
    }
    if (!json_is_string(content))
        return xi_errf(err, errlen, "continue_final_message: the final message has no text to continue");
    const char *msg = json_string_value(content);
    size_t n = json_string_length(content), lb = 0, re = n;
    while (lb < n && is_space(msg[lb])) lb++;
    while (re > lb && is_space(msg[re - 1])) re--;
    const char *stripped = msg + lb;
    size_t slen = re - lb, tlen = strlen(text);
    const char *loc = NULL;
    for (size_t p = tlen >= slen ? tlen - slen + 1 : 0; p-- > 0;)
        if (!memcmp(text + p, stripped, slen)) { loc = text + p; break; }
    if (!loc)
        return xi_errf(err, errlen, "continue_final_message: the final message does not appear in "
                                    "the rendered chat (the template changed it)");
    size_t at = (size_t)(loc - text), keep_l = n - lb; /* len(final_message.lstrip()) */
    if (at + keep_l <= tlen && keep_l == n && !memcmp(loc, msg, n)) text[at + keep_l] = 0;
    else text[at + slen] = 0; /* trailing spacing was trimmed by the template */
    return 0;
}

char *xi_chat_template_render_ex(const xi_chat_template *t, const xi_chat_render_params *p,
                                 char *err, size_t errlen) {
    if (!p->messages_json) return xi_errf(err, errlen, "messages: missing"), NULL;
    if (p->continue_final_message && p->add_generation_prompt)
        return xi_errf(err, errlen, "continue_final_message and add_generation_prompt are not compatible"), NULL;
    json_t *vars = NULL, *messages = NULL, *tools = NULL;
    char *out = NULL;
    if (!(messages = load_json(p->messages_json, "messages", JSON_ARRAY, err, errlen))) goto done;
    if (p->tools_json && !(tools = load_json(p->tools_json, "tools", JSON_ARRAY, err, errlen))) goto done;
    if (p->extra_json) {
        if (!(vars = load_json(p->extra_json, "chat_template_kwargs", JSON_OBJECT, err, errlen))) goto done;
    } else {
        vars = json_object();
    }
    /* transformers: the tokenizer's special tokens (unset ones omitted) under the caller's
     * kwargs, then messages, tools, documents and add_generation_prompt */
    if (p->bos_token && !json_object_get(vars, "bos_token"))
        json_object_set_new(vars, "bos_token", json_string(p->bos_token));
    if (p->eos_token && !json_object_get(vars, "eos_token"))
        json_object_set_new(vars, "eos_token", json_string(p->eos_token));
    if (!json_object_get(vars, "documents")) json_object_set_new(vars, "documents", json_null());
    json_object_set(vars, "messages", messages);
    json_object_set(vars, "tools", tools ? tools : json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(p->add_generation_prompt));
    xi_jinja_limits lim;
    xi_jinja_limits_default(&lim);
    if (p->max_output) lim.max_output = p->max_output;
    xi_jinja_render_opts o = {.vars = vars, .with_strftime_now = !p->no_strftime_now, .limits = &lim};
    out = xi_jinja_render(t->j, &o, NULL, err, errlen);
    if (out && p->continue_final_message && cut_after_final_message(out, messages, err, errlen)) {
        free(out);
        out = NULL;
    }
done:
    json_decref(vars);
    json_decref(messages);
    json_decref(tools);
    return out;
}

char *xi_chat_template_render(const xi_chat_template *t, const char *messages_json,
                              const char *tools_json, int add_generation_prompt,
                              const char *bos_token, const char *eos_token, char *err,
                              size_t errlen) {
    xi_chat_render_params p = {.messages_json = messages_json, .tools_json = tools_json,
                               .add_generation_prompt = add_generation_prompt,
                               .bos_token = bos_token, .eos_token = eos_token};
    return xi_chat_template_render_ex(t, &p, err, errlen);
}
