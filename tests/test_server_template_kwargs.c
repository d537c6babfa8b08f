/* chat_template_kwargs (vLLM): extra variables reach the chat template through
 * /v1/chat/completions and /tokenize, on the random-weight Qwen3 model with its real template,
 * whose enable_thinking: false writes an empty think block after the generation prompt. */
#include <jansson.h>
#include <stdlib.h>

#include "server_util.h"
#include "test.h"

#define MSGS "\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]"

/* /tokenize of the chat: the prompt's text (detokenized) and its token count. */
static char *prompt_text(const server *s, const char *extra, int *count) {
    char body[512], *out = NULL;
    snprintf(body, sizeof body, "{\"model\": \"tiny\", " MSGS "%s}", extra);
    long st = ts_post(s, "/tokenize", body, &out);
    json_t *o = json_loads(out, 0, NULL);
    free(out);
    if (st != 200 || !o) return json_decref(o), NULL;
    *count = (int)json_integer_value(json_object_get(o, "count"));
    char *ids = json_dumps(json_object_get(o, "tokens"), JSON_COMPACT);
    snprintf(body, sizeof body, "{\"model\": \"tiny\", \"tokens\": %s}", ids ? ids : "[]");
    free(ids);
    json_decref(o);
    st = ts_post(s, "/detokenize", body, &out);
    o = json_loads(out, 0, NULL);
    free(out);
    char *text = st == 200 && json_string_value(json_object_get(o, "prompt"))
                     ? strdup(json_string_value(json_object_get(o, "prompt")))
                     : NULL;
    json_decref(o);
    return text;
}

static int chat_prompt_tokens(const server *s, const char *extra) {
    char body[512], *out = NULL;
    snprintf(body, sizeof body, "{\"model\": \"tiny\", " MSGS ", \"max_tokens\": 1%s}", extra);
    long st = ts_post(s, "/v1/chat/completions", body, &out);
    json_t *o = json_loads(out, 0, NULL);
    free(out);
    int n = st == 200 ? (int)json_integer_value(json_object_get(json_object_get(o, "usage"), "prompt_tokens")) : -1;
    json_decref(o);
    return n;
}

TEST(test_server_chat_template_kwargs_reach_the_template) {
    server s;
    CHECK(ts_start_len(&s, "models/qwen3-tiny-random", 512, (xi_server_config){0}) == 0);
    int n_plain = 0, n_off = 0, n_on = 0;
    char *plain = prompt_text(&s, "", &n_plain),
         *off = prompt_text(&s, ", \"chat_template_kwargs\": {\"enable_thinking\": false}", &n_off),
         *on = prompt_text(&s, ", \"chat_template_kwargs\": {\"enable_thinking\": true}", &n_on);
    CHECK(plain && off && on);
    if (plain && off && on) {
        CHECKF(!strstr(plain, "<think>") && strstr(off, "<think>\n\n</think>"), "plain '%s' off '%s'", plain, off);
        CHECK_STR(on, plain);
        CHECK(n_off > n_plain && n_on == n_plain);
    }
    /* the chat endpoint renders the same prompts */
    CHECK_EQ(chat_prompt_tokens(&s, ""), n_plain);
    CHECK_EQ(chat_prompt_tokens(&s, ", \"chat_template_kwargs\": {\"enable_thinking\": false}"), n_off);
    /* the template's own variables stay its own */
    CHECK_EQ(chat_prompt_tokens(&s, ", \"chat_template_kwargs\": {\"messages\": [], \"add_generation_prompt\": false}"),
             n_plain);
    char *out = NULL;
    CHECK_EQ(ts_post(&s, "/v1/chat/completions",
                     "{\"model\": \"tiny\", " MSGS ", \"chat_template_kwargs\": [\"enable_thinking\"]}", &out),
             400);
    CHECKF(strstr(out, "chat_template_kwargs") != NULL, "%s", out);
    free(out);
    free(plain);
    free(off);
    free(on);
    ts_stop(&s);
}
