/* Tokenizer tests against llama.cpp's vectors, the stories260K reference and the Qwen2.5 chat
 * template rendering. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* One read and json_loadb: json_load_file reads with getc, slow on the large references.
 * Shared with test_tokenizer_variants.c. */
json_t *tok_test_read_json(const char *path);
json_t *tok_test_read_json(const char *path) {
    size_t len;
    char err[256];
    char *text = xi_read_file(path, &len, err, sizeof err);
    json_error_t je;
    json_t *j = text ? json_loadb(text, len, 0, &je) : NULL;
    free(text);
    return j;
}

static xi_tokenizer *load(const char *rel) {
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data(rel), err, sizeof err);
    if (!t) xi_test_fail(__FILE__, __LINE__, "load %s: %s", rel, err);
    return t;
}

/* llama.cpp's .inp: each string is followed by "\n__ggml_vocab_test__\n"; the newline before
 * the separator belongs to the separator. .out: one line of ids per string. */
typedef struct {
    char **text;
    size_t *len;
    int32_t **ids;
    int *n_ids;
    int n;
} vectors;

static int read_vectors(const char *name, vectors *v) {
    char *inp_path = xi_test_data(name), *out_path;
    size_t il, ol;
    char err[256];
    char inp_name[256], out_name[256];
    snprintf(inp_name, sizeof inp_name, "%s.inp", inp_path);
    snprintf(out_name, sizeof out_name, "%s.out", inp_path);
    out_path = out_name;
    char *inp = xi_read_file(inp_name, &il, err, sizeof err);
    char *out = xi_read_file(out_path, &ol, err, sizeof err);
    if (!inp || !out) return -1;
    memset(v, 0, sizeof *v);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    for (char *p = inp;;) {
        char *s = strstr(p, sep);
        if (!s) break;
        v->text = realloc(v->text, (size_t)(v->n + 1) * sizeof *v->text);
        v->len = realloc(v->len, (size_t)(v->n + 1) * sizeof *v->len);
        v->text[v->n] = xi_strndup(p, (size_t)(s - p));
        v->len[v->n] = (size_t)(s - p);
        v->n++;
        p = s + strlen(sep);
    }
    v->ids = calloc((size_t)v->n, sizeof *v->ids);
    v->n_ids = calloc((size_t)v->n, sizeof *v->n_ids);
    char *line = out;
    for (int i = 0; i < v->n; i++) {
        char *nl = strchr(line, '\n');
        if (!nl) return -1;
        *nl = 0;
        v->ids[i] = malloc(sizeof(int32_t) * (strlen(line) + 1));
        for (char *q = line, *e;; q = e) {
            long id = strtol(q, &e, 10);
            if (e == q) break;
            v->ids[i][v->n_ids[i]++] = (int32_t)id;
        }
        line = nl + 1;
    }
    free(inp);
    free(out);
    return 0;
}

static void vectors_free(vectors *v) {
    for (int i = 0; i < v->n; i++) {
        free(v->text[i]);
        free(v->ids[i]);
    }
    free(v->text);
    free(v->len);
    free(v->ids);
    free(v->n_ids);
}

static void check_vectors(const xi_tokenizer *t, const char *name) {
    vectors v;
    CHECKF(read_vectors(name, &v) == 0, "cannot read %s", name);
    CHECK_EQ(v.n, 46);
    int pass = 0;
    for (int i = 0; i < v.n; i++) {
        int32_t *ids;
        char err[256];
        int n = xi_tokenizer_encode(t, v.text[i], v.len[i], 0, 0, &ids, err, sizeof err);
        CHECKF(n >= 0, "%s #%d: %s", name, i, err);
        int same = n == v.n_ids[i] && !memcmp(ids, v.ids[i], (size_t)n * sizeof *ids);
        if (!same) {
            char got[4096] = "";
            for (int k = 0; k < n && strlen(got) < 4000; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[k]);
            xi_test_fail(__FILE__, __LINE__, "%s #%d '%s': got%s", name, i, v.text[i], got);
        }
        pass += same;
        free(ids);
    }
    int n = v.n;
    vectors_free(&v);
    CHECK_EQ(pass, n);
}

TEST(test_tokenizer_qwen2_matches_llama_cpp_vectors) {
    xi_tokenizer *t = load("tokenizers/qwen2.5");
    CHECK(t);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 151665);
    check_vectors(t, "tokenizer-vectors/ggml-vocab-qwen2.gguf");
    xi_tokenizer_free(t);
}

TEST(test_tokenizer_llama_spm_matches_llama_cpp_vectors) {
    xi_tokenizer *t = load("tokenizers/llama2");
    CHECK(t);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 32000);
    check_vectors(t, "tokenizer-vectors/ggml-vocab-llama-spm.gguf");
    xi_tokenizer_free(t);
}

/* A tokenizer folder in the test's temporary directory whose files link to shared data. */
static const char *link_folder(const char *rel, const char *const *names, int n) {
    const char *dir = xi_test_tmpdir();
    char *abs = realpath(xi_test_data(rel), NULL);
    if (!abs) return NULL;
    for (int i = 0; i < n; i++) {
        char src[1024], dst[1024];
        snprintf(src, sizeof src, "%s/%s", abs, names[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, names[i]);
        if (symlink(src, dst)) return NULL;
    }
    free(abs);
    return dir;
}

TEST(test_tokenizer_vocab_json_merges_txt_folder_matches_vectors) {
    static const char *const names[] = {"vocab.json", "merges.txt", "tokenizer_config.json",
                                        "added_tokens.json"};
    const char *dir = link_folder("tokenizers/qwen2.5", names, 4);
    CHECK(dir);
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(dir, err, sizeof err);
    CHECKF(t, "%s", err);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 151665);
    CHECK_EQ(xi_tokenizer_token_id(t, "<|im_start|>"), 151644);
    CHECK(xi_tokenizer_is_special(t, 151644));
    check_vectors(t, "tokenizer-vectors/ggml-vocab-qwen2.gguf");
    xi_tokenizer_free(t);
}

/* Rewrites stories260K's tokenizer.json with merges as ["a", "b"] pairs: both spellings of
 * the same merges must tokenize identically. */
TEST(test_tokenizer_merges_as_pairs_equal_merges_as_strings) {
    json_t *root = tok_test_read_json(xi_test_data("models/stories260K/tokenizer.json"));
    CHECK(root);
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges");
    CHECK(json_is_string(json_array_get(merges, 0)));
    json_t *pairs = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        const char *s = json_string_value(m), *sp = strchr(s, ' ');
        json_array_append_new(pairs, json_pack("[s#s]", s, (int)(sp - s), sp + 1));
    }
    json_object_set_new(json_object_get(root, "model"), "merges", pairs);
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", xi_test_tmpdir());
    CHECK(json_dump_file(root, path, 0) == 0);
    json_decref(root);

    char err[512] = "";
    xi_tokenizer *a = load("models/stories260K");
    xi_tokenizer *b = xi_tokenizer_load(xi_test_tmpdir(), err, sizeof err);
    CHECK(a);
    CHECKF(b, "%s", err);
    static const char *texts[] = {"Once upon a time, there was a little girl named Lily.",
                                  "  The dog's ball\tis red!\n\nZebra 42 \xe4\xb8\xad"};
    for (size_t k = 0; k < XI_ARRAY_LEN(texts); k++) {
        int32_t *ia, *ib;
        int na = xi_tokenizer_encode(a, texts[k], strlen(texts[k]), 1, 1, &ia, err, sizeof err);
        int nb = xi_tokenizer_encode(b, texts[k], strlen(texts[k]), 1, 1, &ib, err, sizeof err);
        CHECK(na > 5);
        CHECK_EQ(na, nb);
        CHECK(!memcmp(ia, ib, (size_t)na * sizeof *ia));
        free(ia);
        free(ib);
    }
    xi_tokenizer_free(a);
    xi_tokenizer_free(b);
}

TEST(test_tokenizer_stories260K_prompts_encode_to_reference_ids) {
    xi_tokenizer *t = load("models/stories260K");
    CHECK(t);
    json_t *ref = tok_test_read_json(xi_test_data("models/stories260K/reference.json"));
    CHECK(ref);
    size_t i;
    json_t *c;
    int cases = 0;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        const char *prompt = json_string_value(json_object_get(c, "prompt"));
        json_t *want = json_object_get(c, "prompt_ids");
        CHECK(prompt && json_is_array(want));
        int32_t *ids;
        char err[256];
        int n = xi_tokenizer_encode(t, prompt, strlen(prompt), 1, 1, &ids, err, sizeof err);
        CHECKF(n == (int)json_array_size(want), "'%s': %d ids, want %zu", prompt, n,
               json_array_size(want));
        for (int k = 0; k < n; k++)
            CHECKF(ids[k] == json_integer_value(json_array_get(want, (size_t)k)), "'%s' id %d",
                   prompt, k);
        free(ids);
        cases++;
    }
    CHECK_EQ(cases, 5);
    json_decref(ref);
    xi_tokenizer_free(t);
}

/* decode(encode(s)) == s for the reference stories and every llama-spm vector string: byte
 * fallback covers what the 512-piece vocabulary lacks. */
TEST(test_tokenizer_stories260K_round_trips_text) {
    xi_tokenizer *t = load("models/stories260K");
    CHECK(t);
    vectors v;
    CHECK(read_vectors("tokenizer-vectors/ggml-vocab-llama-spm.gguf", &v) == 0);
    json_t *ref = tok_test_read_json(xi_test_data("models/stories260K/reference.json"));
    CHECK(ref);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        v.text = realloc(v.text, (size_t)(v.n + 1) * sizeof *v.text);
        v.len = realloc(v.len, (size_t)(v.n + 1) * sizeof *v.len);
        v.ids = realloc(v.ids, (size_t)(v.n + 1) * sizeof *v.ids);
        v.n_ids = realloc(v.n_ids, (size_t)(v.n + 1) * sizeof *v.n_ids);
        v.ids[v.n] = NULL; /* no expected ids: these are round-trip texts only */
        v.n_ids[v.n] = 0;
        v.text[v.n] = xi_strdup(json_string_value(json_object_get(c, "text")));
        v.len[v.n] = strlen(v.text[v.n]);
        v.n++;
    }
    int fallback = 0;
    for (int k = 0; k < v.n; k++) {
        int32_t *ids;
        char err[256];
        int n = xi_tokenizer_encode(t, v.text[k], v.len[k], 1, 1, &ids, err, sizeof err);
        CHECKF(n >= 0, "%s", err);
        CHECK(v.len[k] == 0 || ids[0] == 1);
        for (int j = 0; j < n; j++) fallback += ids[j] >= 3 && ids[j] < 3 + 256;
        size_t len;
        char *back = xi_tokenizer_decode(t, ids, n, 1, &len, err, sizeof err);
        CHECKF(back, "%s", err);
        CHECKF(len == v.len[k] && !memcmp(back, v.text[k], len), "#%d '%s' -> '%s'", k, v.text[k],
               back);
        free(back);
        free(ids);
    }
    CHECK(fallback > 100); /* the vectors really exercised <0xNN> tokens */
    vectors_free(&v);
    json_decref(ref);
    xi_tokenizer_free(t);
}

TEST(test_tokenizer_qwen_chat_template_text_encodes_to_expected_ids) {
    xi_tokenizer *t = load("tokenizers/qwen2.5");
    CHECK(t);
    json_t *all = tok_test_read_json(xi_test_data("chat-templates/rendered_vectors.json"));
    CHECK(all);
    size_t i;
    json_t *c;
    int cases = 0;
    json_array_foreach(json_object_get(all, "qwen2.5"), i, c) {
        const char *text = json_string_value(json_object_get(c, "expected"));
        json_t *want = json_object_get(c, "expected_token_ids");
        CHECK(text && json_is_array(want));
        int32_t *ids;
        char err[256];
        int n = xi_tokenizer_encode(t, text, strlen(text), 0, 1, &ids, err, sizeof err);
        CHECKF(n == (int)json_array_size(want), "case %zu: %d ids, want %zu", i, n,
               json_array_size(want));
        for (int k = 0; k < n; k++)
            CHECKF(ids[k] == json_integer_value(json_array_get(want, (size_t)k)), "case %zu id %d",
                   i, k);
        /* Decoding gives the rendered text back, special tokens included. */
        char *back = xi_tokenizer_decode(t, ids, n, 0, NULL, err, sizeof err);
        CHECK_STR(back, text);
        free(back);
        free(ids);
        cases++;
    }
    CHECK_EQ(cases, 6);
    json_decref(all);
    xi_tokenizer_free(t);
}

TEST(test_tokenizer_special_tokens_and_bos_follow_config) {
    xi_tokenizer *q = load("tokenizers/qwen2.5");
    xi_tokenizer *l = load("tokenizers/llama2");
    CHECK(q && l);
    CHECK_EQ(xi_tokenizer_bos_id(q), -1);
    CHECK_EQ(xi_tokenizer_eos_id(q), 151645);
    CHECK_STR(xi_tokenizer_bos_token(q), "");
    CHECK_STR(xi_tokenizer_eos_token(q), "<|im_end|>");
    CHECK(xi_tokenizer_chat_template(q) && strstr(xi_tokenizer_chat_template(q), "<|im_start|>"));
    CHECK_EQ(xi_tokenizer_bos_id(l), 1);
    CHECK_EQ(xi_tokenizer_eos_id(l), 2);
    CHECK_STR(xi_tokenizer_bos_token(l), "<s>");
    CHECK(xi_tokenizer_chat_template(l) == NULL);
    CHECK_STR(xi_tokenizer_token(l, 15043), "\xe2\x96\x81Hello");
    CHECK_EQ(xi_tokenizer_token_id(l, "\xe2\x96\x81Hello"), 15043);
    CHECK(xi_tokenizer_token(l, 32000) == NULL);
    CHECK(xi_tokenizer_is_special(l, 1) && !xi_tokenizer_is_special(l, 15043));

    char err[256];
    int32_t *ids;
    /* BOS once: the post-processor template adds it and add_bos_token does not add it again. */
    int n = xi_tokenizer_encode(l, "Hello", 5, 1, 1, &ids, err, sizeof err);
    CHECK_EQ(n, 2);
    CHECK_EQ(ids[0], 1);
    CHECK_EQ(ids[1], 15043);
    free(ids);
    /* Qwen adds nothing, and parses <|im_end|> only when asked. */
    const char *s = "Hi<|im_end|>";
    n = xi_tokenizer_encode(q, s, strlen(s), 1, 1, &ids, err, sizeof err);
    CHECK_EQ(n, 2);
    CHECK_EQ(ids[1], 151645);
    char *text = xi_tokenizer_decode(q, ids, n, 1, NULL, err, sizeof err);
    CHECK_STR(text, "Hi");
    free(text);
    free(ids);
    n = xi_tokenizer_encode(q, s, strlen(s), 1, 0, &ids, err, sizeof err);
    CHECK(n > 2);
    for (int k = 0; k < n; k++) CHECK(!xi_tokenizer_is_special(q, ids[k]));
    text = xi_tokenizer_decode(q, ids, n, 1, NULL, err, sizeof err);
    CHECK_STR(text, s);
    free(text);
    free(ids);
    xi_tokenizer_free(q);
    xi_tokenizer_free(l);
}

TEST(test_tokenizer_invalid_utf8_is_rejected_with_offset) {
    xi_tokenizer *t = load("models/stories260K");
    CHECK(t);
    static const struct {
        const char *s;
        const char *where;
    } bad[] = {
        {"\xff", "byte 0"},          {"abc\xc3", "byte 3"},          {"ok \xc0\xaf", "byte 3"},
        {"x\xed\xa0\x80", "byte 1"}, {"\xf4\x90\x80\x80", "byte 0"}, {"ab\x80", "byte 2"}};
    for (size_t i = 0; i < XI_ARRAY_LEN(bad); i++) {
        int32_t *ids = (int32_t *)1;
        char err[256] = "";
        int n = xi_tokenizer_encode(t, bad[i].s, strlen(bad[i].s), 1, 1, &ids, err, sizeof err);
        CHECK_EQ(n, -1);
        CHECK(ids == NULL);
        CHECKF(strstr(err, "UTF-8") && strstr(err, bad[i].where), "case %zu: %s", i, err);
    }
    xi_tokenizer_free(t);
}

TEST(test_tokenizer_decode_rejects_out_of_range_id) {
    xi_tokenizer *t = load("models/stories260K");
    CHECK(t);
    int32_t ids[] = {1, 512};
    char err[256] = "";
    CHECK(xi_tokenizer_decode(t, ids, 2, 0, NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "512"));
    ids[1] = -3;
    CHECK(xi_tokenizer_decode(t, ids, 2, 0, NULL, err, sizeof err) == NULL);
    xi_tokenizer_free(t);
}

TEST(test_tokenizer_load_names_missing_files) {
    char err[512] = "";
    CHECK(xi_tokenizer_load(xi_test_tmpdir(), err, sizeof err) == NULL);
    CHECK(strstr(err, "tokenizer.json"));
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", xi_test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", f);
    fclose(f);
    CHECK(xi_tokenizer_load(xi_test_tmpdir(), err, sizeof err) == NULL);
    CHECKF(strstr(err, "merge") && strstr(err, "a b"), "%s", err);
}

TEST(test_tokenizer_cli_encodes_decodes_and_rejects_bad_input) {
    char cmd[2048];
    char *out = NULL;
    const char *dir = xi_test_data("models/stories260K");
    snprintf(cmd, sizeof cmd, "%s tokenize --model %s --text 'Once upon a time'", xi_test_bin(),
             dir);
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    CHECK_STR(out, "[1, 403, 407, 261, 378]\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize --model %s --text 'Once upon a time' --no-special",
             xi_test_bin(), dir);
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    CHECK_STR(out, "[403, 407, 261, 378]\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize --model %s --ids 1,403,407,261,378 --no-special",
             xi_test_bin(), dir);
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    CHECK_STR(out, "Once upon a time\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize --model %s --text $(printf 'a\\377b') 2>&1",
             xi_test_bin(), dir);
    CHECK_EQ(xi_test_run(cmd, &out), 1);
    CHECKF(strstr(out, "UTF-8") && !strchr(strchr(out, '\n') + 1, '\n'), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize --model %s --ids 1,9999 2>&1", xi_test_bin(), dir);
    CHECK_EQ(xi_test_run(cmd, &out), 1);
    CHECK(strstr(out, "9999"));
    free(out);
}

TEST(test_tokenizer_load_names_malformed_added_tokens_json) {
    static const char *const names[] = {"vocab.json", "merges.txt"};
    const char *dir = link_folder("tokenizers/qwen2.5", names, 2);
    CHECK(dir);
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"<|x|>\": 151643,", f);
    fclose(f);
    CHECK(xi_tokenizer_load(dir, err, sizeof err) == NULL);
    CHECKF(strstr(err, "added_tokens.json"), "%s", err);
    /* Without it the folder loads as a GPT-2 style byte-level BPE. */
    CHECK(unlink(path) == 0);
    xi_tokenizer *t = xi_tokenizer_load(dir, err, sizeof err);
    CHECKF(t, "%s", err);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 151643);
    CHECK_EQ(xi_tokenizer_bos_id(t), -1);
    xi_tokenizer_free(t);
}

/* A truncated or wrongly typed tokenizer.json is an error value, never a crash. */
TEST(test_tokenizer_load_rejects_broken_tokenizer_json) {
    size_t len;
    char err[512];
    char *full =
        xi_read_file(xi_test_data("models/stories260K/tokenizer.json"), &len, err, sizeof err);
    CHECK(full);
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", xi_test_tmpdir());
    for (int k = 1; k < 24; k++) {
        FILE *f = fopen(path, "w");
        CHECK(f);
        fwrite(full, 1, len * (size_t)k / 24, f);
        fclose(f);
        err[0] = 0;
        CHECK(xi_tokenizer_load(xi_test_tmpdir(), err, sizeof err) == NULL);
        CHECKF(strstr(err, "tokenizer.json"), "cut at %d/24: %s", k, err);
    }
    static const char *const broken[] = {
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}",
        "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\":"
        " {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\":"
        " [{\"id\": 99999999, \"content\": \"<x>\"}]}",
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
        "\"post_processor\":"
        " {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}],"
        " \"special_tokens\": {\"<s>\": {\"ids\": [7]}}}}",
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(broken); i++) {
        FILE *f = fopen(path, "w");
        CHECK(f);
        fputs(broken[i], f);
        fclose(f);
        err[0] = 0;
        CHECKF(xi_tokenizer_load(xi_test_tmpdir(), err, sizeof err) == NULL, "case %zu loaded", i);
        CHECKF(err[0], "case %zu: no message", i);
    }
    free(full);
}

/* The texts behind qwen2-tiny-random's reference logits (ids cross-checked with llama.cpp):
 * Qwen adds no BOS even when special tokens are requested. */
TEST(test_tokenizer_qwen2_tiny_reference_texts_encode_to_reference_ids) {
    xi_tokenizer *t = load("models/qwen2-tiny-random");
    CHECK(t);
    json_t *ref = tok_test_read_json(xi_test_data("models/qwen2-tiny-random/reference.json"));
    CHECK(ref);
    size_t i;
    json_t *s;
    int cases = 0;
    json_array_foreach(json_object_get(ref, "sequences"), i, s) {
        const char *text = json_string_value(json_object_get(s, "text"));
        json_t *want = json_object_get(s, "ids");
        CHECK(text && json_is_array(want));
        int32_t *ids;
        char err[256];
        int n = xi_tokenizer_encode(t, text, strlen(text), 1, 1, &ids, err, sizeof err);
        CHECKF(n == (int)json_array_size(want), "%zu: %d ids, want %zu", i, n,
               json_array_size(want));
        for (int k = 0; k < n; k++)
            CHECKF(ids[k] == json_integer_value(json_array_get(want, (size_t)k)), "%zu id %d", i, k);
        free(ids);
        cases++;
    }
    CHECK_EQ(cases, 3);
    json_decref(ref);
    xi_tokenizer_free(t);
}

/* Shared with test_tokenizer_gguf.c: every llama.cpp vector of `name` encodes to its ids. */
void tok_test_check_vectors(const xi_tokenizer *t, const char *name);
void tok_test_check_vectors(const xi_tokenizer *t, const char *name) { check_vectors(t, name); }
