/* Fuzz encode and decode of arbitrary text with real tokenizers (stories260K: SentencePiece
 * BPE with byte fallback; Qwen2.5: byte-level BPE with a regex pre-tokenizer and NFC; Llama-2).
 * Input byte 0 picks the tokenizer and flags; the rest is the text. Properties: encode gives
 * in-range ids or an error naming the offset of invalid UTF-8; decode of those ids succeeds
 * and the incremental detokenizer streams exactly decode()'s text; ASCII text without special
 * tokens survives byte-level encode + decode unchanged. */
#include "fuzz_tok.h"

#define N_TOK 3
static xi_tokenizer *toks[N_TOK];
static const char *const tok_dirs[N_TOK] = {"models/stories260K", "tokenizers/qwen2.5",
                                            "tokenizers/llama2"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_load_tokenizers(tok_dirs, N_TOK, toks);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    int which = data[0] % N_TOK;
    int add_special = (data[0] >> 2) & 1, parse_special = (data[0] >> 3) & 1;
    const xi_tokenizer *t = toks[which];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    char err[256] = "";
    int32_t *ids = NULL;
    int n = xi_tokenizer_encode(t, text, len, add_special, parse_special, &ids, err, sizeof err);
    if (n < 0) {
        if (!err[0]) fuzz_fail("encode failed without an error line");
        return 0;
    }
    int vs = xi_tokenizer_vocab_size(t);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vs) fuzz_fail("encode gave id %d of %d", ids[i], vs);
    fuzz_stream_equals_decode(t, ids, n, 0);
    fuzz_stream_equals_decode(t, ids, n, 1);

    /* Qwen2.5 is byte-level: printable ASCII has no normalisation to undo. */
    int ascii = 1;
    for (size_t i = 0; i < len && ascii; i++) ascii = text[i] >= 0x20 && text[i] < 0x7f;
    if (which == 1 && ascii && !add_special && !parse_special) {
        size_t dl = 0;
        char *back = xi_tokenizer_decode(t, ids, n, 0, &dl, err, sizeof err);
        if (!back || dl != len || memcmp(back, text, len))
            fuzz_fail("qwen2.5 ASCII round trip changed the text");
        free(back);
    }
    free(ids);
    return 0;
}
