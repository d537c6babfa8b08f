/* fuzz_tok: tokenizer helpers shared by the tokenizer harnesses. */
#ifndef XI_FUZZ_TOK_H
#define XI_FUZZ_TOK_H

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

/* Load the tokenizers of the shared test data folders rel[n] into out[n], or abort. */
static inline void fuzz_load_tokenizers(const char *const *rel, int n, xi_tokenizer **out) {
    for (int i = 0; i < n; i++) {
        char dir[512], err[256];
        fuzz_data_path(rel[i], dir, sizeof dir);
        out[i] = xi_tokenizer_load(dir, err, sizeof err);
        if (!out[i]) fuzz_fail("cannot load %s: %s (set XINFER_TEST_DATA)", dir, err);
    }
}

/* ids[n] are all valid: decode() must succeed and the incremental detokenizer must stream
 * exactly its text (the property xi_detok documents). */
static inline void fuzz_stream_equals_decode(const xi_tokenizer *t, const int32_t *ids, int n,
                                             int skip_special) {
    char err[256];
    size_t len = 0;
    char *text = xi_tokenizer_decode(t, ids, n, skip_special, &len, err, sizeof err);
    if (!text) fuzz_fail("decode of valid ids failed: %s", err);
    if (strlen(text) > len) fuzz_fail("decode length %zu < strlen", len);
    xi_detok d;
    xi_detok_init(&d, t, skip_special);
    xi_buf out = {0};
    for (int i = 0; i < n; i++)
        if (xi_detok_push(&d, ids[i], &out) < 0) fuzz_fail("detok_push(%d) failed", ids[i]);
    if (xi_detok_flush(&d, &out) < 0) fuzz_fail("detok_flush failed");
    if (out.len != len || (len && memcmp(out.data, text, len)))
        fuzz_fail("streamed text (%zu bytes) differs from decode() (%zu bytes)", out.len, len);
    xi_buf_free(&out);
    xi_detok_free(&d);
    free(text);
}

#endif
