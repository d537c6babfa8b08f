/* The tokenizer read from GGUF metadata: files written by the project's GGUF writer from the
 * Llama-2 and Qwen2.5 tokenizer.json encode llama.cpp's vectors exactly as tokenizer.json
 * does, and the tokenizers inside real llama.cpp GGUF files agree with their models'
 * tokenizer.json. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/gguf.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

json_t *tok_test_read_json(const char *path);
void tok_test_check_vectors(const xi_tokenizer *t, const char *name);

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_BYTE = 6 };

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

/* The vocabulary of a loaded tokenizer.json as GGUF tokens + types. */
static int vocab_arrays(const xi_tokenizer *t, const char ***toks, int32_t **types) {
    int n = xi_tokenizer_vocab_size(t);
    *toks = calloc((size_t)n, sizeof **toks);
    *types = calloc((size_t)n, sizeof **types);
    for (int i = 0; i < n; i++) {
        const char *s = xi_tokenizer_token(t, i);
        (*toks)[i] = s ? s : "";
        unsigned hex;
        char tail;
        if (!strcmp((*toks)[i], "<unk>")) (*types)[i] = TT_UNKNOWN;
        else if (xi_tokenizer_is_special(t, i)) (*types)[i] = TT_CONTROL;
        else if (sscanf((*toks)[i], "<0x%2X%c", &hex, &tail) == 2 && tail == '>' &&
                 strlen((*toks)[i]) == 6) (*types)[i] = TT_BYTE;
        else (*types)[i] = TT_NORMAL;
    }
    return n;
}

TEST(test_tokenizer_gguf_llama2_written_by_us_encodes_as_tokenizer_json) {
    char err[512] = "";
    xi_tokenizer *hf = xi_tokenizer_load(xi_test_data("tokenizers/llama2"), err, sizeof err);
    CHECKF(hf, "%s", err);
    const char **toks;
    int32_t *types;
    int n = vocab_arrays(hf, &toks, &types);
    CHECK_EQ(n, 32000);
    /* A piece's score is minus the rank of the first merge that makes it, so SentencePiece's
     * highest-score-first merging replays tokenizer.json's merge order; pieces no merge makes
     * (single characters) score below every merge. */
    float *scores = malloc((size_t)n * sizeof *scores);
    for (int i = 0; i < n; i++) scores[i] = -1e9f;
    json_t *root = tok_test_read_json(xi_test_data("tokenizers/llama2/tokenizer.json"));
    json_t *mj = json_object_get(json_object_get(root, "model"), "merges"), *m;
    size_t r;
    json_array_foreach(mj, r, m) {
        char cat[512];
        if (json_is_string(m)) {
            snprintf(cat, sizeof cat, "%s", json_string_value(m));
            char *sp = strchr(cat, ' ');
            CHECK(sp);
            memmove(sp, sp + 1, strlen(sp));
        } else {
            snprintf(cat, sizeof cat, "%s%s", json_string_value(json_array_get(m, 0)),
                     json_string_value(json_array_get(m, 1)));
        }
        int32_t id = xi_tokenizer_token_id(hf, cat);
        CHECKF(id >= 0, "merge %zu makes '%s', not a token", r, cat);
        if (scores[id] < -(float)r) scores[id] = -(float)r;
    }
    CHECK(json_array_size(mj) > 60000);
    json_decref(root);
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "general.architecture", "llama");
    xi_gguf_write_str(w, "tokenizer.ggml.model", "llama");
    xi_gguf_write_arr_str(w, "tokenizer.ggml.tokens", (uint64_t)n, toks, NULL);
    xi_gguf_write_arr(w, "tokenizer.ggml.scores", XI_GGUF_F32, (uint64_t)n, scores);
    xi_gguf_write_arr(w, "tokenizer.ggml.token_type", XI_GGUF_I32, (uint64_t)n, types);
    xi_gguf_write_u32(w, "tokenizer.ggml.bos_token_id", 1);
    xi_gguf_write_u32(w, "tokenizer.ggml.eos_token_id", 2);
    xi_gguf_write_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    char *path = xi_path_join(xi_test_tmpdir(), "llama2-vocab.gguf");
    CHECKF(xi_gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    xi_gguf_writer_free(w);
    xi_tokenizer *t = load_gguf_tok(path, err, sizeof err);
    CHECKF(t, "%s", err);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 32000);
    tok_test_check_vectors(t, "tokenizer-vectors/ggml-vocab-llama-spm.gguf");
    CHECK(!xi_test_failed());
    check_same_encoding(t, hf, "llama2");
    xi_tokenizer_free(t);
    xi_tokenizer_free(hf);
    free(toks);
    free(types);
    free(scores);
    free(path);
}

TEST(test_tokenizer_gguf_qwen2_written_by_us_encodes_as_tokenizer_json) {
    char err[512] = "";
    xi_tokenizer *hf = xi_tokenizer_load(xi_test_data("tokenizers/qwen2.5"), err, sizeof err);
    CHECKF(hf, "%s", err);
    const char **toks;
    int32_t *types;
    int n = vocab_arrays(hf, &toks, &types);
    CHECK_EQ(n, 151665);
    /* Added tokens that are not special are user-defined in GGUF. */
    json_t *root = tok_test_read_json(xi_test_data("tokenizers/qwen2.5/tokenizer.json"));
    CHECK(root);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(root, "added_tokens"), i, a) {
        if (!json_is_true(json_object_get(a, "special")))
            types[json_integer_value(json_object_get(a, "id"))] = TT_USER_DEFINED;
    }
    json_t *mj = json_object_get(json_object_get(root, "model"), "merges");
    size_t nm = json_array_size(mj);
    const char **merges = calloc(nm, sizeof *merges);
    json_array_foreach(mj, i, a) merges[i] = json_string_value(a);
    CHECK(nm > 150000 && merges[0] && strchr(merges[0], ' '));
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "tokenizer.ggml.model", "gpt2");
    xi_gguf_write_str(w, "tokenizer.ggml.pre", "qwen2");
    xi_gguf_write_arr_str(w, "tokenizer.ggml.tokens", (uint64_t)n, toks, NULL);
    xi_gguf_write_arr(w, "tokenizer.ggml.token_type", XI_GGUF_I32, (uint64_t)n, types);
    xi_gguf_write_arr_str(w, "tokenizer.ggml.merges", nm, merges, NULL);
    xi_gguf_write_u32(w, "tokenizer.ggml.bos_token_id", 151643);
    xi_gguf_write_u32(w, "tokenizer.ggml.eos_token_id", 151645);
    uint8_t no = 0;
    xi_gguf_write_scalar(w, "tokenizer.ggml.add_bos_token", XI_GGUF_BOOL, &no);
    xi_gguf_write_str(w, "tokenizer.chat_template", xi_tokenizer_chat_template(hf));
    char *path = xi_path_join(xi_test_tmpdir(), "qwen2-vocab.gguf");
    CHECKF(xi_gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    xi_gguf_writer_free(w);
    json_decref(root);
    free(merges);
    xi_tokenizer *t = load_gguf_tok(path, err, sizeof err);
    CHECKF(t, "%s", err);
    tok_test_check_vectors(t, "tokenizer-vectors/ggml-vocab-qwen2.gguf");
    CHECK(!xi_test_failed());
    check_same_encoding(t, hf, "qwen2.5");
    CHECK_STR(xi_tokenizer_chat_template(t), xi_tokenizer_chat_template(hf));
    CHECK_STR(xi_tokenizer_eos_token(t), "<|im_end|>");
    xi_tokenizer_free(t);
    xi_tokenizer_free(hf);
    free(toks);
    free(types);
    free(path);
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
