/* Fuzz decode and the incremental detokenizer with arbitrary id sequences (byte-fallback
 * pieces split anywhere, special tokens, out-of-range ids) on real tokenizers. Input byte 0
 * picks the tokenizer and skip_special; then 2 bytes per id, spread over [-4, vocab + 4).
 * Properties: decode fails exactly when an id is out of range (and says so), and otherwise
 * the streamed deltas plus flush equal decode(), with every delta valid UTF-8. */
#define XI_TOKENIZER_INTERNAL
#include "fuzz_tok.h"

#define N_TOK 2
static xi_tokenizer *toks[N_TOK];
static const char *const tok_dirs[N_TOK] = {"models/stories260K", "tokenizers/qwen2.5"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_load_tokenizers(tok_dirs, N_TOK, toks);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    const xi_tokenizer *t = toks[data[0] % N_TOK];
    int skip = (data[0] >> 1) & 1;
    int vs = xi_tokenizer_vocab_size(t);
    int n = (int)((size - 1) / 2);
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        unsigned v = data[1 + 2 * i] | (unsigned)data[2 + 2 * i] << 8;
        /* Small values hit bytes and specials of any vocabulary; large ones wrap around it. */
        ids[i] = (int32_t)(v % (unsigned)(vs + 8)) - 4;
        if (ids[i] < 0 || ids[i] >= vs) bad = 1;
    }
    char err[256] = "";
    size_t len = 0;
    char *text = xi_tokenizer_decode(t, ids, n, skip, &len, err, sizeof err);
    if (bad != !text) fuzz_fail("decode %s with%s an out-of-range id", text ? "succeeded" : "failed",
                                bad ? "" : "out");
    if (!text && !err[0]) fuzz_fail("decode failed without an error line");
    if (text && xi_utf8_first_invalid((const unsigned char *)text, len) >= 0)
        fuzz_fail("decode produced invalid UTF-8");

    xi_detok d;
    xi_detok_init(&d, t, skip);
    xi_buf out = {0};
    int failed = 0;
    for (int i = 0; i < n; i++) {
        size_t before = out.len;
        int r = xi_detok_push(&d, ids[i], &out);
        if (r < 0) {
            if (ids[i] >= 0 && ids[i] < vs) fuzz_fail("detok_push(%d) failed", ids[i]);
            failed = 1;
            break;
        }
        size_t added = out.len - before;
        if ((size_t)r != added) fuzz_fail("push returned %d, appended %zu", r, added);
        if (added && xi_utf8_first_invalid((const unsigned char *)out.data + before, added) >= 0)
            fuzz_fail("detok delta is not valid UTF-8");
    }
    if (!failed) {
        if (xi_detok_flush(&d, &out) < 0) fuzz_fail("detok_flush failed");
        if (out.len != len || (len && memcmp(out.data, text, len)))
            fuzz_fail("streamed text (%zu bytes) differs from decode() (%zu bytes)", out.len, len);
    }
    xi_buf_free(&out);
    xi_detok_free(&d);
    free(text);
    free(ids);
    return 0;
}
