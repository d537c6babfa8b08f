/* Chat `echo` as vLLM answers it: with echo true the answer starts with the last message's
 * content when that message is in the answer's role (the assistant's under
 * add_generation_prompt, else its own); streamed, that content is each choice's first content
 * chunk after the role chunk. Greedy answers of the random-weight Qwen2 model: the echoed
 * answer is the echo text followed by the very answer of the same request without echo. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_util.h"
#include "test.h"

#define CONT "[{\"role\": \"user\", \"content\": \"Tell a story\"}, {\"role\": \"assistant\", \"content\": \"Once upon a\"}]"

/* choices[i].message.content of a non-streamed chat answer (heap, "" when absent) */
static char *content_of(const server *s, const char *body, int i) {
    char *out;
    const long st = ts_post(s, "/v1/chat/completions", body, &out);
    json_t *o = json_loads(out, 0, NULL);
    const char *c = json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(o, "choices"), (size_t)i), "message"), "content"));
    char *r = strdup(st == 200 && c ? c : "");
    if (st != 200) fprintf(stderr, "    %ld %s\n", st, out);
    json_decref(o);
    free(out);
    return r;
}

static char *chat_body(const char *messages, const char *extra) {
    char *b = malloc(strlen(messages) + strlen(extra) + 200);
    sprintf(b, "{\"model\": \"tiny\", \"messages\": %s, \"max_tokens\": 12, \"temperature\": 0%s}", messages, extra);
    return b;
}

/* the answer of messages with extra fields, and with extra + echo */
static void both(const server *s, const char *messages, const char *extra, char **plain, char **echo) {
    char *b = chat_body(messages, extra);
    *plain = content_of(s, b, 0);
    free(b);
    char with[256];
    snprintf(with, sizeof with, "%s, \"echo\": true", extra);
    b = chat_body(messages, with);
    *echo = content_of(s, b, 0);
    free(b);
}

static int is_prefix_then(const char *s, const char *prefix, const char *rest) {
    const size_t n = strlen(prefix);
    return !strncmp(s, prefix, n) && !strcmp(s + n, rest);
}

TEST(test_chat_echo_prepends_the_last_message_in_the_answers_role) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    char *plain, *echo;
    /* continuing the assistant's message: the answer's role is the message's */
    both(&s, CONT, ", \"continue_final_message\": true, \"add_generation_prompt\": false", &plain, &echo);
    CHECK(plain[0]);
    CHECKF(is_prefix_then(echo, "Once upon a", plain), "echo '%s' plain '%s'", echo, plain);
    free(plain);
    free(echo);
    /* a last assistant message under add_generation_prompt (the default) is echoed too */
    both(&s, CONT, "", &plain, &echo);
    CHECKF(is_prefix_then(echo, "Once upon a", plain), "echo '%s' plain '%s'", echo, plain);
    free(plain);
    free(echo);
    /* a last user message under add_generation_prompt is not in the answer's role: no echo */
    both(&s, "[{\"role\": \"user\", \"content\": \"Hi there\"}]", "", &plain, &echo);
    CHECKF(plain[0] && !strcmp(echo, plain), "echo '%s' plain '%s'", echo, plain);
    free(plain);
    free(echo);
    /* without add_generation_prompt the answer continues the last message, whatever its role;
     * text parts are joined by newlines, as for the template */
    both(&s, "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi\"}, {\"type\": \"text\", \"text\": \"there\"}]}]",
         ", \"add_generation_prompt\": false", &plain, &echo);
    CHECKF(is_prefix_then(echo, "Hi\nthere", plain), "echo '%s' plain '%s'", echo, plain);
    free(plain);
    free(echo);
    /* echo false changes nothing; a non-boolean echo is a 400 naming it */
    char *b = chat_body(CONT, ", \"echo\": false");
    char *off = content_of(&s, b, 0);
    free(b);
    both(&s, CONT, "", &plain, &echo);
    CHECK_STR(off, plain);
    free(off);
    free(plain);
    free(echo);
    char *out;
    b = chat_body(CONT, ", \"echo\": \"yes\"");
    CHECK_EQ(ts_post(&s, "/v1/chat/completions", b, &out), 400);
    CHECKF(strstr(out, "\"param\":\"echo\"") || strstr(out, "\"param\": \"echo\""), "%s", out);
    free(out);
    free(b);
    ts_stop(&s);
}

TEST(test_chat_echo_streams_as_each_choices_first_content_chunk) {
    server s = {0};
    CHECK(ts_start(&s, "models/qwen2-tiny-random", NULL) == 0);
    char *b = chat_body(CONT, ", \"echo\": true, \"n\": 2, \"seed\": 3");
    char *whole0 = content_of(&s, b, 0);
    free(b);
    b = chat_body(CONT, ", \"echo\": true, \"n\": 2, \"seed\": 3, \"stream\": true, "
                        "\"stream_options\": {\"include_usage\": true, \"continuous_usage_stats\": true}");
    char *out;
    CHECK_EQ(ts_post(&s, "/v1/chat/completions", b, &out), 200);
    free(b);
    /* per choice: the chunks' content in order, and what its first content chunk was */
    char text[2][512] = {"", ""}, first[2][64] = {"", ""};
    int role_seen[2] = {0, 0}, chunks = 0;
    for (char *l = strstr(out, "data: "); l; l = strstr(l + 1, "data: ")) {
        if (!strncmp(l + 6, "[DONE]", 6)) break;
        json_t *o = json_loads(l + 6, JSON_DISABLE_EOF_CHECK, NULL);
        json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
        const int i = (int)json_integer_value(json_object_get(ch, "index"));
        json_t *delta = json_object_get(ch, "delta");
        const char *c = json_string_value(json_object_get(delta, "content"));
        if (ch && i >= 0 && i < 2) {
            chunks++;
            if (json_object_get(delta, "role")) role_seen[i] = 1;
            else if (c && !first[i][0]) {
                CHECKF(role_seen[i], "choice %d: content before the role chunk", i);
                snprintf(first[i], sizeof first[i], "%s", c);
                /* continuous usage: the echo chunk comes before any token */
                CHECK_EQ(json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens")), 0);
            }
            if (c) strncat(text[i], c, sizeof text[i] - strlen(text[i]) - 1);
        }
        json_decref(o);
    }
    CHECK(chunks > 4);
    for (int i = 0; i < 2; i++) CHECKF(!strcmp(first[i], "Once upon a"), "choice %d first content '%s'", i, first[i]);
    CHECKF(!strcmp(text[0], whole0), "streamed '%s' whole '%s'", text[0], whole0);
    free(out);
    free(whole0);
    ts_stop(&s);
}
