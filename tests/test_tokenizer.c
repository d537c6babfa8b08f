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
    CHECK_EQ(pass, v.n);
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
