/* The Qwen3 chat template (models/qwen3-tiny-random/tokenizer_config.json, Qwen3-0.6B's) as
 * xinfer renders it, with enable_thinking through chat_template_kwargs, and the qwen3
 * reasoning parser and hermes tool-call parser on answers in the shape that template asks for. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model_util.h"
#include "server/reasoning.h"
#include "server/tool_parse.h"
#include "test.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

static const char *USER_MSG =
    "[{\"role\": \"user\", \"content\": \"Give me a short introduction to large language models.\"}]";

static char *render(const xi_tokenizer *tok, const char *messages, const char *tools, const char *extra) {
    char err[512] = "";
    xi_chat_template *t = xi_chat_template_parse(xi_tokenizer_chat_template(tok), err, sizeof err);
    if (!t) {
        fprintf(stderr, "    %s\n", err);
        return NULL;
    }
    xi_chat_render_params p = {.messages_json = messages, .tools_json = tools, .extra_json = extra,
                               .add_generation_prompt = 1, .eos_token = "<|im_end|>"};
    char *s = xi_chat_template_render_ex(t, &p, err, sizeof err);
    if (!s) fprintf(stderr, "    %s\n", err);
    xi_chat_template_free(t);
    return s;
}

/* enable_thinking=False renders the empty think block the reference prompt holds, with the
 * same ids; the default (thinking on) leaves the assistant turn open. */
TEST(test_qwen3_template_enable_thinking_matches_reference_ids) {
    char err[512] = "";
    char *dir = xi_test_data("models/qwen3-tiny-random");
    xi_tokenizer *tok = xi_tokenizer_load(dir, err, sizeof err);
    CHECKF(tok, "%s", err);
    json_t *ref = tm_load_json("models/qwen3-tiny-random/reference.json");
    json_t *sq = json_array_get(json_object_get(ref, "sequences"), 2);
    CHECK_STR(json_string_value(json_object_get(sq, "name")), "chat_nothink");
    char *off = render(tok, USER_MSG, NULL, "{\"enable_thinking\": false}");
    CHECK(off);
    CHECK_STR(off, json_string_value(json_object_get(sq, "text")));
    int32_t *ids = NULL;
    int n = xi_tokenizer_encode(tok, off, strlen(off), 0, 1, &ids, err, sizeof err);
    json_t *want = json_object_get(sq, "ids");
    CHECK_EQ(n, (int)json_array_size(want));
    for (int i = 0; i < n; i++) CHECK_EQ(ids[i], json_integer_value(json_array_get(want, (size_t)i)));
    char *on = render(tok, USER_MSG, NULL, NULL);
    CHECK(on);
    const char *tail = "<|im_start|>assistant\n";
    CHECK(strlen(on) > strlen(tail) && !strcmp(on + strlen(on) - strlen(tail), tail));
    CHECK(!strstr(on, "<think>"));
    free(ids);
    free(on);
    free(off);
    json_decref(ref);
    xi_tokenizer_free(tok);
    free(dir);
}

/* With thinking on Qwen3 answers "<think>...</think>" then the answer: the qwen3 parser splits
 * them; with thinking off the prompt closed the think block, so the answer is all content. */
TEST(test_qwen3_reasoning_parser_on_template_shaped_answers) {
    const char *thought = "<think>\nThe user wants a short intro.\n</think>\n\nLarge language models are...";
    xi_reasoning_span s;
    xi_reasoning_scan("qwen3", thought, strlen(thought), 1, &s);
    CHECK(s.has_reasoning);
    CHECK(s.r_end > s.r_begin && !strncmp(thought + s.r_begin, "\nThe user wants", 15));
    CHECK(strstr(thought + s.c_begin, "Large language models are") && !strstr(thought + s.c_begin, "think>"));
    const char *plain = "Large language models are...";
    xi_reasoning_scan("qwen3", plain, strlen(plain), 1, &s);
    CHECK(!s.has_reasoning && s.c_begin == 0);
}

/* Tools go into the system turn as <tools> JSON; an answer's <tool_call> block comes back as a
 * call, and the history of a call and its result renders as <tool_call> / <tool_response>. */
TEST(test_qwen3_template_tools_and_hermes_calls) {
    char err[512] = "";
    char *dir = xi_test_data("models/qwen3-tiny-random");
    xi_tokenizer *tok = xi_tokenizer_load(dir, err, sizeof err);
    CHECKF(tok, "%s", err);
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                        "\"Weather of a city\", \"parameters\": {\"type\": \"object\", \"properties\": "
                        "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]";
    char *p = render(tok, "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}]", tools, NULL);
    CHECK(p);
    CHECK(!strncmp(p, "<|im_start|>system\n", 19) && strstr(p, "<tools>") && strstr(p, "\"get_weather\"") &&
          strstr(p, "<tool_call>"));
    const char *answer = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    size_t content = 99;
    json_t *calls = xi_tool_calls_parse("hermes", answer, strlen(answer), &content);
    CHECK(calls && json_array_size(calls) == 1 && content == 0);
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    CHECK_STR(json_string_value(json_object_get(fn, "name")), "get_weather");
    json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
    CHECK_STR(json_string_value(json_object_get(args, "city")), "Paris");
    json_decref(args);
    json_decref(calls);
    const char *history =
        "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", "
        "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\"}}}]}, {\"role\": \"tool\", \"content\": \"18 C, sunny\"}]";
    char *h = render(tok, history, tools, NULL);
    CHECK(h);
    CHECK(strstr(h, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
    CHECK(strstr(h, "<|im_start|>user\n<tool_response>\n18 C, sunny\n</tool_response><|im_end|>"));
    free(h);
    free(p);
    xi_tokenizer_free(tok);
    free(dir);
}
