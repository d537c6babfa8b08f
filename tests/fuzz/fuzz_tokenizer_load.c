/* Fuzz tokenizer loading from a folder, then use what loaded. Input:
 *   tokenizer.json NUL tokenizer_config.json                      (Hugging Face folder), or
 *   'V' vocab.json NUL merges.txt NUL tokenizer_config.json       (GPT-2 folder).
 * A missing part means the file is absent. A tokenizer that loads must encode, decode and
 * stream-decode without crashing, and the streamed text must equal decode(). */
#include "fuzz_tok.h"

static const char probe[] = "Hello world! <|im_end|><s> </s> caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"
                            "  \t\n x\xf0\x9f\x98\x80 12345 don't";

static void exercise(const xi_tokenizer *t, int parse_special) {
    char err[256];
    int32_t *ids = NULL;
    int n = xi_tokenizer_encode(t, probe, sizeof probe - 1, 1, parse_special, &ids, err,
                                sizeof err);
    if (n < 0) return; /* a tokenizer may lack pieces for this text; that is an error value */
    int vs = xi_tokenizer_vocab_size(t);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vs) fuzz_fail("encode gave id %d of %d", ids[i], vs);
    fuzz_stream_equals_decode(t, ids, n, 0);
    fuzz_stream_equals_decode(t, ids, n, 1);
    for (int i = 0; i < n; i++) (void)xi_tokenizer_token(t, ids[i]);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *parts[3];
    size_t lens[3];
    int gpt2 = size > 0 && data[0] == 'V';
    int n;
    if (gpt2) {
        n = fuzz_split(data + 1, size - 1, parts, lens, 3);
        fuzz_write("tokenizer.json", NULL, (size_t)-1);
        fuzz_write("vocab.json", parts[0], lens[0]);
        fuzz_write("merges.txt", n > 1 ? parts[1] : NULL, n > 1 ? lens[1] : (size_t)-1);
        fuzz_write("tokenizer_config.json", n > 2 ? parts[2] : NULL, n > 2 ? lens[2] : (size_t)-1);
    } else {
        n = fuzz_split(data, size, parts, lens, 2);
        fuzz_write("vocab.json", NULL, (size_t)-1);
        fuzz_write("merges.txt", NULL, (size_t)-1);
        fuzz_write("tokenizer.json", parts[0], lens[0]);
        fuzz_write("tokenizer_config.json", n > 1 ? parts[1] : NULL, n > 1 ? lens[1] : (size_t)-1);
    }
    fuzz_parts_free(parts, n);

    char err[256] = "";
    xi_tokenizer *t = xi_tokenizer_load(fuzz_dir(), err, sizeof err);
    if (!t) {
        if (!err[0]) fuzz_fail("load failed without an error line");
        return 0;
    }
    exercise(t, 1);
    exercise(t, 0);
    (void)xi_tokenizer_token_id(t, "<|im_end|>");
    (void)xi_tokenizer_chat_template(t);
    (void)xi_tokenizer_bos_token(t);
    (void)xi_tokenizer_eos_token(t);
    xi_tokenizer_free(t);
    return 0;
}
