/* Fuzz what loadgen does with a server's streamed answer: the SSE events of a completion go
 * through the client's event parser (JSON chunks, usage, error events, [DONE]) and error
 * bodies through its error-text extraction. The parser is static in client.c, so this
 * harness compiles client.c itself (the library's copy is then not linked). Input: byte 0
 * chooses the mode (even: SSE stream, odd: error body). */
#include "fuzz_util.h"
#include "loadgen/client.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        char out[300];
        error_text(body, len, out, sizeof out);
        if (strlen(out) >= sizeof out) fuzz_fail("error text overflow");
        return 0;
    }
    xi_loadgen_result r;
    memset(&r, 0, sizeof r);
    r.start = xi_now();
    req q;
    memset(&q, 0, sizeof q);
    q.r = &r;
    xi_sse_init(&q.sse, on_event, &q);
    int rc = xi_sse_feed(&q.sse, body, len);
    if (!rc) rc = xi_sse_finish(&q.sse, 1);
    xi_sse_free(&q.sse);
    if (r.chunks < 0) fuzz_fail("chunk count %d", r.chunks);
    if (rc && !q.oom && !r.err_msg) fuzz_fail("stopped without an error message");
    xi_loadgen_result_free(&r);
    return 0;
}
