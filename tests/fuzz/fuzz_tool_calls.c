/* Fuzz the hermes tool-call parser (server/tool_parse) on model output. Input byte 0 sets the
 * size of the pieces the rest is streamed in. Whole, the text gives either no calls or calls
 * that each have a string name and string arguments, and content no longer than the text.
 * Streamed, the content sent is that same content, a prefix of the text, and the calls come
 * only with the last piece and match the whole parse. */
#include <jansson.h>

#include "fuzz_util.h"
#include "server/tool_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t piece = (size_t)data[0] + 1;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;

    size_t content = len;
    json_t *calls = xi_tool_calls_parse(text, len, &content);
    if (content > len) fuzz_fail("content %zu beyond the text %zu", content, len);
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        if (!json_is_string(json_object_get(fn, "name")) || !json_is_string(json_object_get(fn, "arguments")))
            fuzz_fail("call %zu without a string name and arguments", i);
    }

    size_t sent = 0, have = 0, got = 0;
    json_t *streamed = NULL;
    while (have < len) {
        have = have + piece < len ? have + piece : len;
        size_t n, from = sent;
        json_t *c = xi_tool_stream_step(text, have, &sent, have == len, &n);
        if (from != got) fuzz_fail("content pieces not contiguous");
        got += n;
        if (c && have < len) fuzz_fail("calls before the last piece");
        if (c) streamed = c;
    }
    if (got != content) fuzz_fail("streamed %zu bytes of content, whole parse %zu", got, content);
    if (json_array_size(streamed) != json_array_size(calls)) fuzz_fail("streamed calls differ");
    json_array_foreach(calls, i, call)
        if (!json_equal(call, json_array_get(streamed, i))) fuzz_fail("call %zu differs", i);
    json_decref(calls);
    json_decref(streamed);
    return 0;
}
