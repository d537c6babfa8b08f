/* The tokenizer read from GGUF metadata: files written by the project's GGUF writer
 * (xi_tokenizer_write_gguf) from the Llama-2 and Qwen2.5 tokenizer.json encode llama.cpp's
 * vectors exactly as tokenizer.json does, and the tokenizers inside real llama.cpp GGUF files agree with their models'
 * tokenizer.json. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

void tok_test_check_vectors(const xi_tokenizer *t, const char *name);

/* Texts both tokenizers must agree on: llama.cpp's vectors plus chat-like text with special
 * tokens (parsed and not). */
static int n_texts;
static char *texts[64];
static void load_texts(void) {
    if (n_texts) return;
    size_t len;
    char err[256];
    char *inp = xi_read_file(xi_test_data("tokenizer-vectors/ggml-vocab-qwen2.gguf.inp"), &len,
                             err, sizeof err);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    for (char *p = inp; p && n_texts < 60;) {
        char *s = strstr(p, sep);
        if (!s) break;
        texts[n_texts++] = xi_strndup(p, (size_t)(s - p));
        p = s + strlen(sep);
    }
    free(inp);
    texts[n_texts++] = xi_strdup("<s>Hello</s> <|im_start|>user\nhi<|im_end|>\n<think>x</think>");
    texts[n_texts++] = xi_strdup("Once upon a time, there was a little girl named Lily.");
}

/* Same ids for every text, with and without special tokens; the same decoded text. */
static void check_same_encoding(const xi_tokenizer *a, const xi_tokenizer *b, const char *what) {
    load_texts();
    CHECKF(n_texts > 40, "%d texts", n_texts);
    for (int i = 0; i < n_texts; i++)
        for (int mode = 0; mode < 3; mode++) {
            int add = mode == 1, parse = mode == 2;
            int32_t *x = NULL, *y = NULL;
            char err[256];
            int nx = xi_tokenizer_encode(a, texts[i], strlen(texts[i]), add, parse, &x, err, sizeof err);
            int ny = xi_tokenizer_encode(b, texts[i], strlen(texts[i]), add, parse, &y, err, sizeof err);
            int same = nx == ny && nx >= 0 && !memcmp(x, y, (size_t)nx * sizeof *x);
            char *dx = same ? xi_tokenizer_decode(a, x, nx, 0, NULL, err, sizeof err) : NULL;
            char *dy = same ? xi_tokenizer_decode(b, y, ny, 0, NULL, err, sizeof err) : NULL;
            free(x);
            free(y);
            int same_text = dx && dy && !strcmp(dx, dy);
            free(dx);
            free(dy);
            CHECKF(same, "%s: text #%d (mode %d) '%s': %d vs %d ids", what, i, mode, texts[i], nx, ny);
            CHECKF(same_text, "%s: text #%d decodes differently", what, i);
        }
    /* llama.cpp's converter stores a BOS id even where tokenizer_config.json has none (Qwen). */
    if (xi_tokenizer_bos_id(b) >= 0) CHECK_EQ(xi_tokenizer_bos_id(a), xi_tokenizer_bos_id(b));
    CHECK_EQ(xi_tokenizer_eos_id(a), xi_tokenizer_eos_id(b));
}

static xi_tokenizer *load_gguf_tok(const char *path, char *err, size_t errlen) {
    xi_gguf *g = xi_gguf_open(path, err, errlen);
    if (!g) return NULL;
    xi_tokenizer *t = xi_tokenizer_load_gguf(g, err, errlen);
    xi_gguf_close(g);
    return t;
}

/* hf's tokenizer as GGUF metadata written by xi_tokenizer_write_gguf into tmpdir/file, read
 * back; NULL with the reason failed. */
static xi_tokenizer *round_trip(const xi_tokenizer *hf, const char *file, const xi_tokenizer_gguf_opts *o) {
    char err[512] = "";
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    char *path = xi_path_join(xi_test_tmpdir(), file);
    int rc = xi_tokenizer_write_gguf(w, hf, o, err, sizeof err);
    if (!rc) rc = xi_gguf_writer_write(w, path, err, sizeof err);
    xi_gguf_writer_free(w);
    xi_tokenizer *t = rc ? NULL : load_gguf_tok(path, err, sizeof err);
    if (!t) xi_test_fail(__FILE__, __LINE__, "%s: %s", file, err);
    free(path);
    return t;
}

TEST(test_tokenizer_gguf_llama2_written_by_us_encodes_as_tokenizer_json) {
    char err[512] = "";
    xi_tokenizer *hf = xi_tokenizer_load(xi_test_data("tokenizers/llama2"), err, sizeof err);
    CHECKF(hf, "%s", err);
    /* SentencePiece: pieces with scores made from the merge ranks, no merges */
    xi_tokenizer_gguf_opts o = {.bos = -1, .eos = -1, .pad = -1};
    xi_tokenizer *t = round_trip(hf, "llama2-vocab.gguf", &o);
    CHECK(t);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 32000);
    CHECK_EQ(xi_tokenizer_bos_id(t), 1);
    tok_test_check_vectors(t, "tokenizer-vectors/ggml-vocab-llama-spm.gguf");
    CHECK(!xi_test_failed());
    check_same_encoding(t, hf, "llama2");
    xi_tokenizer_free(t);
    xi_tokenizer_free(hf);
}

TEST(test_tokenizer_gguf_qwen2_written_by_us_encodes_as_tokenizer_json) {
    char err[512] = "";
    xi_tokenizer *hf = xi_tokenizer_load(xi_test_data("tokenizers/qwen2.5"), err, sizeof err);
    CHECKF(hf, "%s", err);
    CHECK_EQ(xi_tokenizer_vocab_size(hf), 151665);
    /* padded to the embedding rows of Qwen2.5 as llama.cpp's converter does; BOS as it stores */
    xi_tokenizer_gguf_opts o = {.pre = "qwen2", .n_vocab = 151936, .bos = 151643, .eos = -1, .pad = 151643};
    xi_tokenizer *t = round_trip(hf, "qwen2-vocab.gguf", &o);
    CHECK(t);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 151936);
    CHECK_STR(xi_tokenizer_token(t, 151935), "[PAD151935]");
    tok_test_check_vectors(t, "tokenizer-vectors/ggml-vocab-qwen2.gguf");
    CHECK(!xi_test_failed());
    check_same_encoding(t, hf, "qwen2.5");
    CHECK_STR(xi_tokenizer_chat_template(t), xi_tokenizer_chat_template(hf));
    CHECK_STR(xi_tokenizer_eos_token(t), "<|im_end|>");
    xi_tokenizer_free(t);
    xi_tokenizer_free(hf);
    /* a byte-level BPE without a pre-tokenizer name, or more tokens than rows: refused */
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_tokenizer_gguf_opts bad[2] = {{.bos = -1, .eos = -1, .pad = -1},
                                     {.pre = "qwen2", .n_vocab = 1000, .bos = -1, .eos = -1, .pad = -1}};
    hf = xi_tokenizer_load(xi_test_data("tokenizers/qwen2.5"), err, sizeof err);
    for (int i = 0; i < 2; i++) {
        err[0] = 0;
        CHECKF(xi_tokenizer_write_gguf(w, hf, &bad[i], err, sizeof err) < 0 &&
                   strstr(err, i ? "do not fit 1000" : "pre-tokenizer name"),
               "case %d: '%s'", i, err);
    }
    xi_gguf_writer_free(w);
    xi_tokenizer_free(hf);
}

TEST(test_tokenizer_gguf_inside_llama_cpp_files_matches_the_models_tokenizer_json) {
    static const char *const pairs[][2] = {
        {"gguf/stories260K-f32.gguf", "models/stories260K"},
        {"gguf/llama256-random-q4_0.gguf", "gguf/llama256-random-hf"},
        {"gguf/qwen3moe-tiny-bf16.gguf", "models/qwen3moe-tiny-random"},
    };
    for (size_t p = 0; p < XI_ARRAY_LEN(pairs); p++) {
        char err[512] = "";
        xi_tokenizer *t = load_gguf_tok(xi_test_data(pairs[p][0]), err, sizeof err);
        CHECKF(t, "%s: %s", pairs[p][0], err);
        xi_tokenizer *hf = xi_tokenizer_load(xi_test_data(pairs[p][1]), err, sizeof err);
        CHECKF(hf, "%s", err);
        check_same_encoding(t, hf, pairs[p][0]);
        CHECK(!xi_test_failed());
        const char *ct = xi_tokenizer_chat_template(hf);
        if (ct) CHECK_STR(xi_tokenizer_chat_template(t), ct);
        xi_tokenizer_free(t);
        xi_tokenizer_free(hf);
    }
}

TEST(test_tokenizer_gguf_refuses_unknown_models_by_name) {
    static const char *const cases[][3] = {
        {"bert", NULL, "'bert' is not supported"},
        {"gpt2", "falcon", "pre-tokenizer 'falcon' is not supported"},
        {NULL, NULL, "no tokenizer.ggml.model"},
    };
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        xi_gguf_writer *w = xi_gguf_writer_new(0);
        if (cases[c][0]) xi_gguf_write_str(w, "tokenizer.ggml.model", cases[c][0]);
        if (cases[c][1]) xi_gguf_write_str(w, "tokenizer.ggml.pre", cases[c][1]);
        const char *toks[3] = {"a", "b", "ab"};
        xi_gguf_write_arr_str(w, "tokenizer.ggml.tokens", 3, toks, NULL);
        const char *merges[1] = {"a b"};
        xi_gguf_write_arr_str(w, "tokenizer.ggml.merges", 1, merges, NULL);
        char err[512] = "", *path = xi_path_join(xi_test_tmpdir(), "bad-tok.gguf");
        CHECKF(xi_gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
        xi_gguf_writer_free(w);
        xi_tokenizer *t = load_gguf_tok(path, err, sizeof err);
        CHECKF(!t && strstr(err, cases[c][2]), "case %zu: '%s'", c, err);
        free(path);
    }
}
