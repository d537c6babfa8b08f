/* Tool calls out of generated text (server/tool_parse: hermes and llama3_json), whole and as
 * a stream, and the request rules around tool_choice. No model needed. */
#include <stdlib.h>

#include "server/oai.h"
#include "server/tool_parse.h"
#include "test.h"

/* What Qwen2.5-Instruct writes for two calls after a sentence of content. */
static const char QWEN_TWO[] =
    "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"北京\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
    "\"arguments\": {}}\n</tool_call>";

static const char *fn_field(json_t *calls, size_t i, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_array_get(calls, i), "function"), key));
}

TEST(test_tools_hermes_calls_and_the_content_before_them) {
    size_t content = 999;
    json_t *calls = xi_tool_calls_parse("hermes", QWEN_TWO, strlen(QWEN_TWO), &content);
    CHECK(calls != NULL);
    CHECK_EQ((int)json_array_size(calls), 2);
    CHECK_EQ((int)content, (int)strlen("Let me check both.\n"));
    CHECK_STR(json_string_value(json_object_get(json_array_get(calls, 0), "type")), "function");
    CHECK_STR(fn_field(calls, 0, "name"), "get_weather");
    /* arguments is a JSON string, UTF-8 kept as is (vLLM: ensure_ascii=False) */
    CHECK_STR(fn_field(calls, 0, "arguments"), "{\"city\":\"北京\",\"unit\":\"c\"}");
    CHECK_STR(fn_field(calls, 1, "name"), "get_time");
    CHECK_STR(fn_field(calls, 1, "arguments"), "{}");
    json_decref(calls);

    /* only a call, left unclosed when generation stopped; arguments already a string */
    const char *one = "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n";
    calls = xi_tool_calls_parse("hermes", one, strlen(one), &content);
    CHECK(calls && json_array_size(calls) == 1);
    CHECK_EQ((int)content, 0);
    CHECK_STR(fn_field(calls, 0, "arguments"), "{\"x\": 1}");
    json_decref(calls);
}

TEST(test_tools_malformed_or_absent_calls_leave_all_text_as_content) {
    static const char *const texts[] = {
        "no calls here",
        "<tool_call>{\"name\": \"f\", \"arguments\": {}</tool_call>",       /* bad JSON */
        "<tool_call>{\"arguments\": {}}</tool_call>",                      /* no name */
        "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",         /* name not a string */
        "<tool_call>{\"name\": \"f\"}</tool_call>",                        /* no arguments */
        "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>[1]</tool_call>",
        "<tool_call>",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t content = 12345;
        json_t *calls = xi_tool_calls_parse("hermes", texts[i], strlen(texts[i]), &content);
        CHECKF(calls == NULL, "parsed %s", texts[i]);
        CHECKF(content == 12345, "%s: content_len written on failure", texts[i]);
        json_decref(calls);
    }
}

TEST(test_tools_content_prefix_holds_back_only_a_possible_tag) {
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "", 0), 0);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "abc", 3), 3);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "abc<", 4), 3);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "abc<tool_cal", 12), 3);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "abc<x", 5), 5);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "a<tools> b", 10), 10);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "a<tool_call>b", 13), 1);
    CHECK_EQ((int)xi_tool_content_prefix("hermes", "<tool_call><", 12), 0);
}

/* Feed text in pieces of every size; the content sent must be exactly what the whole-text
 * parse calls content, and the calls must come only with the last step. */
static int stream_matches(const char *parser, const char *text, const char *want_content, int want_calls) {
    const size_t len = strlen(text);
    for (size_t piece = 1; piece <= len; piece++) {
        char *got = calloc(len + 1, 1);
        size_t got_len = 0;
        xi_tool_stream st = {0};
        json_t *calls = NULL;
        for (size_t have = 0; have < len;) {
            have = have + piece < len ? have + piece : len;
            size_t n, from = st.sent;
            json_t *c = xi_tool_stream_step(parser, &st, text, have, have == len, &n);
            if (c && have < len) { /* calls before the end */
                json_decref(c);
                free(got);
                return 0;
            }
            if (c) calls = c;
            memcpy(got + got_len, text + from, n);
            got_len += n;
        }
        int ok = !strcmp(got, want_content) && (int)json_array_size(calls) == want_calls;
        if (!ok) fprintf(stderr, "    piece %zu: content '%s', %zu calls\n", piece, got, json_array_size(calls));
        free(got);
        json_decref(calls);
        if (!ok) return 0;
    }
    return 1;
}

TEST(test_tools_stream_sends_content_up_to_the_first_call_whatever_the_pieces) {
    CHECK(stream_matches("hermes", QWEN_TWO, "Let me check both.\n", 2));
    CHECK(stream_matches("hermes", "plain <tools> text, no <tool call", "plain <tools> text, no <tool call", 0));
    CHECK(stream_matches("hermes", "ends with <tool_c", "ends with <tool_c", 0));
    CHECK(stream_matches("hermes", "<tool_call>{bad json}</tool_call>", "<tool_call>{bad json}</tool_call>", 0));
}

/* What Llama-3.1-Instruct writes for tools (<|python_tag|> is special, gone from the text). */
static const char LLAMA_TWO[] =
    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
    "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}";

TEST(test_tools_llama3_json_calls_are_the_whole_answer) {
    size_t content = 999;
    json_t *calls = xi_tool_calls_parse("llama3_json", LLAMA_TWO, strlen(LLAMA_TWO), &content);
    CHECK(calls && json_array_size(calls) == 2);
    CHECK_EQ((int)content, 0);
    CHECK_STR(fn_field(calls, 0, "name"), "get_weather");
    CHECK_STR(fn_field(calls, 0, "arguments"), "{\"city\":\"Paris\"}");
    CHECK_STR(fn_field(calls, 1, "arguments"), "{\"tz\":\"CET\"}");
    json_decref(calls);
    const char *one = "\n {\"name\": \"f\", \"parameters\": {}}\n";
    calls = xi_tool_calls_parse("llama3_json", one, strlen(one), &content);
    CHECK(calls && json_array_size(calls) == 1);
    json_decref(calls);
    static const char *const not_calls[] = {
        "The weather is fine.", "{\"name\": \"f\"}", "{\"name\": \"f\", \"parameters\": {}} and more",
        "{\"name\": \"f\", \"parameters\": {", "[{\"name\": \"f\", \"parameters\": {}}]", "",
    };
    for (size_t i = 0; i < sizeof not_calls / sizeof not_calls[0]; i++) {
        content = 7;
        calls = xi_tool_calls_parse("llama3_json", not_calls[i], strlen(not_calls[i]), &content);
        CHECKF(!calls && content == 7, "parsed %s", not_calls[i]);
        json_decref(calls);
    }
    /* streamed: a plain answer flows at once, an answer opening with { waits for the end */
    CHECK_EQ((int)xi_tool_content_prefix("llama3_json", "The", 3), 3);
    CHECK_EQ((int)xi_tool_content_prefix("llama3_json", " \n", 2), 0);
    CHECK_EQ((int)xi_tool_content_prefix("llama3_json", " {\"na", 5), 0);
    CHECK(stream_matches("llama3_json", LLAMA_TWO, "", 2));
    CHECK(stream_matches("llama3_json", "The weather is fine.", "The weather is fine.", 0));
    CHECK(stream_matches("llama3_json", "{\"name\": \"f\"} oops", "{\"name\": \"f\"} oops", 0));
}

static int parse(xi_oai_request *r, const char *body, xi_oai_error *e) {
    return xi_oai_parse(r, 1, body, strlen(body), e);
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"

TEST(test_tools_tool_choice_rules) {
    xi_oai_request r;
    xi_oai_error e;
    CHECK(parse(&r, "{" MSG "," TOOLS ",\"tool_choice\":\"auto\"}", &e) == 0);
    CHECK_EQ(r.tool_choice, XI_TOOL_CHOICE_AUTO);
    xi_oai_request_free(&r);
    CHECK(parse(&r, "{" MSG ",\"tool_choice\":\"none\"}", &e) == 0);
    CHECK_EQ(r.tool_choice, XI_TOOL_CHOICE_NONE);
    xi_oai_request_free(&r);
    CHECK(parse(&r, "{" MSG "," TOOLS "}", &e) == 0);
    CHECK_EQ(r.tool_choice, XI_TOOL_CHOICE_UNSET);
    xi_oai_request_free(&r);
    /* "required" and a named function hold the answer to the tools' schemas */
    CHECKF(parse(&r, "{" MSG "," TOOLS ",\"tool_choice\":\"required\"}", &e) == 0, "%s", e.message);
    CHECK_EQ(r.tool_choice, XI_TOOL_CHOICE_REQUIRED);
    CHECK_EQ(r.params.guide, XI_GUIDE_JSON_SCHEMA);
    CHECKF(strstr(r.params.guide_src, "\"enum\":[\"f\"]"), "%s", r.params.guide_src);
    xi_oai_request_free(&r);
    CHECK(parse(&r, "{" MSG "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}", &e) == 0);
    CHECK_EQ(r.tool_choice, XI_TOOL_CHOICE_NAMED);
    CHECK_STR(r.forced_tool, "f");
    xi_oai_request_free(&r);
    static const char *const bad[] = {
        "{" MSG ",\"tool_choice\":\"auto\"}",                     /* no tools */
        "{" MSG "," TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
        "{" MSG "," TOOLS ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}",
        "{" MSG "," TOOLS ",\"tool_choice\":\"sometimes\"}",
        "{" MSG "," TOOLS ",\"tool_choice\":7}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(&r, bad[i], &e);
        xi_oai_request_free(&r);
        CHECKF(rc == -1 && e.status == 400 && !strcmp(e.param, "tool_choice"), "%s: %s", bad[i],
               rc ? e.message : "accepted");
    }
}

TEST(test_tools_earlier_calls_reach_the_template_with_object_arguments) {
    xi_oai_request r;
    xi_oai_error e;
    CHECKF(parse(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
                     "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
                     "{\"name\":\"f\",\"arguments\":\"{\\\"x\\\": 1}\"}}]},{\"role\":\"tool\","
                     "\"tool_call_id\":\"c1\",\"content\":\"2\"}]}", &e) == 0, "%s", e.message);
    CHECKF(strstr(r.messages_json, "\"arguments\":{\"x\":1}"), "%s", r.messages_json);
    CHECKF(strstr(r.messages_json, "\"tool_call_id\":\"c1\""), "%s", r.messages_json);
    xi_oai_request_free(&r);
}
