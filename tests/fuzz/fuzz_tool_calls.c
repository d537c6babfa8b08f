/* Fuzz the output parsers of chat answers on model output: the tool-call parsers
 * (server/tool_parse: hermes, llama3_json) and the reasoning parsers (server/reasoning). Input byte 0 sets the size
 * of the pieces the rest is streamed in. Whole, the text gives either no calls or calls that
 * each have a string name and string arguments, and content no longer than the text.
 * Streamed, the content sent is that same content, a prefix of the text, and the calls come
 * only with the last piece and match the whole parse; the reasoning sent never goes back and
 * ends where the whole split says, with the content starting at the same place. */
#include <jansson.h>

#include "fuzz_util.h"
#include "server/reasoning.h"
#include "server/tool_parse.h"

static void check_reasoning(const char *parser, const char *text, size_t len, size_t piece) {
    xi_reasoning_span whole;
    xi_reasoning_scan(parser, text, len, 1, &whole);
    if (whole.r_begin > whole.r_end || whole.r_end > whole.c_begin || whole.c_begin > len)
        fuzz_fail("%s: span out of order", parser);
    xi_reasoning_stream st = {0};
    size_t c_begin = 0, have = 0, first = (size_t)-1;
    while (have < len) {
        have = have + piece < len ? have + piece : len;
        const size_t prev = st.r_sent;
        const size_t from = xi_reasoning_stream_step(parser, &st, text, have, have == len, &c_begin);
        if (st.r_sent < prev || from < prev || st.r_sent > have) fuzz_fail("%s: reasoning went back", parser);
        if (st.r_sent > from && first == (size_t)-1) first = from;
    }
    if (len && st.r_sent != whole.r_end && whole.r_end > whole.r_begin) fuzz_fail("%s: reasoning ends apart", parser);
    if (len && first != (size_t)-1 && first != whole.r_begin) fuzz_fail("%s: reasoning starts apart", parser);
    if (len && c_begin != whole.c_begin) fuzz_fail("%s: content starts apart", parser);
}

static void check_tools(const char *parser, const char *text, size_t len, size_t piece) {
    size_t content = len;
    json_t *calls = xi_tool_calls_parse(parser, text, len, &content);
    if (content > len) fuzz_fail("%s: content %zu beyond the text %zu", parser, content, len);
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        if (!json_is_string(json_object_get(fn, "name")) || !json_is_string(json_object_get(fn, "arguments")))
            fuzz_fail("%s: call %zu without a string name and arguments", parser, i);
    }

    xi_tool_stream st = {0};
    size_t have = 0, got = 0;
    json_t *streamed = NULL;
    while (have < len) {
        have = have + piece < len ? have + piece : len;
        size_t n, from = st.sent;
        json_t *c = xi_tool_stream_step(parser, &st, text, have, have == len, &n);
        if (from != got) fuzz_fail("%s: content pieces not contiguous", parser);
        got += n;
        if (c && have < len) fuzz_fail("%s: calls before the last piece", parser);
        if (c) streamed = c;
    }
    if (got != content) fuzz_fail("%s: streamed %zu bytes of content, whole parse %zu", parser, got, content);
    if (json_array_size(streamed) != json_array_size(calls)) fuzz_fail("%s: streamed calls differ", parser);
    json_array_foreach(calls, i, call)
        if (!json_equal(call, json_array_get(streamed, i))) fuzz_fail("%s: call %zu differs", parser, i);
    json_decref(calls);
    json_decref(streamed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t piece = (size_t)data[0] + 1;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;

    check_tools("hermes", text, len, piece);
    check_tools("llama3_json", text, len, piece);
    check_reasoning("deepseek_r1", text, len, piece);
    check_reasoning("qwen3", text, len, piece);
    return 0;
}
