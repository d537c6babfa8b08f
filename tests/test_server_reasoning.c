/* Reasoning split out of chat answers (server/reasoning, vLLM's deepseek_r1 and qwen3
 * parsers), whole and as a stream. No model needed. */
#include <stdlib.h>

#include "server/reasoning.h"
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
        size_t r_sent = 0, c_begin = 0, have = 0;
        while (have < len) {
            have = have + piece < len ? have + piece : len;
            size_t from = xi_reasoning_stream_step(parser, text, have, have == len, &r_sent, &c_begin);
            if (r_sent < from) return 0;
            strncat(reasoning, text + from, r_sent - from);
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
