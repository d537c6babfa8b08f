/* Reasoning split out of chat answers (server/reasoning, vLLM's deepseek_r1 and qwen3
 * parsers), whole and as a stream. No model needed. */
#include <stdlib.h>

#include "base/base.h"
#include "server/reasoning.h"
#include "server/tool_parse.h"
#include "test.h"

/* "reasoning|content" of a whole answer, "-" for no reasoning part */
static const char *split(const char *parser, const char *text) {
    static char out[512];
    xi_reasoning_span sp;
    xi_reasoning_scan(parser, text, strlen(text), 1, &sp);
    if (!sp.has_reasoning) snprintf(out, sizeof out, "-|%s", text + sp.c_begin);
    else
        snprintf(out, sizeof out, "%.*s|%s", (int)(sp.r_end - sp.r_begin), text + sp.r_begin,
                 text + sp.c_begin);
    return out;
}

TEST(test_reasoning_whole_answers_split_as_vllm_does) {
    /* R1 distills: the template opened <think> in the prompt */
    CHECK_STR(split("deepseek_r1", "Let me see.\n</think>\n\nIt is 4."), "Let me see.\n|\n\nIt is 4.");
    CHECK_STR(split("deepseek_r1", "<think>hm</think>4"), "hm|4");
    CHECK_STR(split("deepseek_r1", "still thinking when max_tokens hit"), "still thinking when max_tokens hit|");
    CHECK_STR(split("deepseek_r1", ""), "|");
    /* Qwen3: reasoning only after a leading <think> */
    CHECK_STR(split("qwen3", "<think>\nhm\n</think>\n\nIt is 4."), "\nhm\n|\n\nIt is 4.");
    CHECK_STR(split("qwen3", "It is 4."), "-|It is 4.");
    CHECK_STR(split("qwen3", "a </think> b"), "-|a </think> b");
    CHECK_STR(split("qwen3", "<thi"), "-|<thi");
    CHECK_STR(split("qwen3", "<think>cut off"), "cut off|");
    CHECK(xi_reasoning_parser_supported("deepseek_r1") && xi_reasoning_parser_supported("qwen3"));
    CHECK(!xi_reasoning_parser_supported("granite") && !xi_reasoning_parser_supported(NULL));
}

/* Stream text in pieces of every size: the reasoning and content sent must join to the whole
 * answer's parts, and the reasoning must never be taken back. */
static int stream_matches(const char *parser, const char *text) {
    const size_t len = strlen(text);
    char want[512];
    snprintf(want, sizeof want, "%s", split(parser, text));
    if (want[0] == '-' && want[1] == '|') memmove(want, want + 1, strlen(want)); /* "|content" */
    for (size_t piece = 1; piece <= len; piece++) {
        char reasoning[512] = "", got[1024];
        xi_reasoning_stream st = {0};
        size_t c_begin = 0, have = 0;
        while (have < len) {
            have = have + piece < len ? have + piece : len;
            size_t from = xi_reasoning_stream_step(parser, &st, text, have, have == len, &c_begin);
            if (st.r_sent < from) return 0;
            strncat(reasoning, text + from, st.r_sent - from);
        }
        snprintf(got, sizeof got, "%s|%s", reasoning, text + c_begin);
        if (strcmp(got, want)) {
            fprintf(stderr, "    %s, pieces of %zu: '%s' want '%s'\n", parser, piece, got, want);
            return 0;
        }
    }
    return 1;
}

TEST(test_reasoning_stream_matches_the_whole_answer_whatever_the_pieces) {
    static const char *const texts[] = {
        "Let me see.\n</think>\n\nIt is 4.", "<think>hm</think>4", "no tags at all",
        "<think>\nhm <  </thin k> </think>x", "a </think> b", "<thi", "<think>cut off </thi",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        CHECKF(stream_matches("deepseek_r1", texts[i]), "%s", texts[i]);
        CHECKF(stream_matches("qwen3", texts[i]), "%s", texts[i]);
    }
}

/* Streaming keeps what it found: each step reads only the new bytes. An 8 MiB answer in
 * 64-byte pieces (131072 steps) takes milliseconds; rescanning the whole text every step
 * would read about 0.5 TB. Both parsers as the server chains them: the tool parser over the
 * content after the reasoning. */
TEST(test_stream_parsers_take_time_linear_in_the_answer) {
    const size_t body = 8u << 20, piece = 64;
    static const char call[] = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    char *text = malloc(body + 64 + sizeof call);
    CHECK(text);
    for (int pass = 0; pass < 2; pass++) {
        /* 0: a long thought, then content and a call; 1: no thought, long content, a call */
        size_t len = 0;
        if (!pass) len += (size_t)sprintf(text, "<think>");
        memset(text + len, pass ? 'b' : 'a', body);
        len += body;
        len += (size_t)sprintf(text + len, "%sx %s", pass ? "" : "</think>", call);
        xi_reasoning_stream rs = {0};
        xi_tool_stream ts = {0};
        size_t cb = 0, content = 0, have = 0;
        json_t *calls = NULL;
        const double t0 = xi_now();
        while (have < len) {
            have = have + piece < len ? have + piece : len;
            xi_reasoning_stream_step("qwen3", &rs, text, have, have == len, &cb);
            size_t n;
            json_t *c = xi_tool_stream_step("hermes", &ts, text + cb, have - cb, have == len, &n);
            content += n;
            if (c) calls = c;
        }
        const double took = xi_now() - t0;
        fprintf(stderr, "    pass %d: %zu bytes in %zu-byte pieces: %.3f s\n", pass, len, piece, took);
        CHECKF(took < 2.0, "%.2f s: the stream is rescanned", took);
        CHECK_EQ(rs.r_sent, pass ? 0 : 7 + body);
        CHECK_EQ(content, pass ? body + 2 : 2); /* "x " (and the b's) before the call */
        CHECK_EQ(json_array_size(calls), 1);
        json_decref(calls);
    }
    free(text);
}
