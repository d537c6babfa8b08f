/* xi_tokenizer_encode_limit: under the limit it is exactly the encoding, past it it says so
 * without encoding the whole text. Texts are llama.cpp's tokenizer vectors (many scripts,
 * emoji, whitespace runs, added tokens), joined and repeated at test time. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The vector file with its separators turned into newlines, repeated to at least min bytes. */
static char *vector_text(const char *rel, size_t min, size_t *len) {
    char err[256];
    size_t n;
    char *raw = xi_read_file(xi_test_data(rel), &n, err, sizeof err);
    if (!raw) return NULL;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    for (char *p = raw; (p = strstr(p, sep));) memset(p, '\n', sizeof sep - 1);
    size_t cap = (min / n + 1) * n + 1, at = 0;
    char *out = malloc(cap);
    while (out && at < min) {
        memcpy(out + at, raw, n);
        at += n;
    }
    if (out) out[at] = 0;
    free(raw);
    *len = at;
    return out;
}

static void check_limits(const char *tok_dir, const char *vectors) {
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data(tok_dir), err, sizeof err);
    CHECKF(t, "%s: %s", tok_dir, err);
    size_t len;
    char *text = vector_text(vectors, 1, &len);
    CHECK(text);
    int32_t *full = NULL;
    const int n = xi_tokenizer_encode(t, text, len, 1, 1, &full, err, sizeof err);
    CHECKF(n > 100, "%s: %d tokens (%s)", tok_dir, n, err);
    const int limits[] = {1, 7, n / 3, n - 1, n, n + 1, 4 * n};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        int32_t *ids = NULL;
        const int m = xi_tokenizer_encode_limit(t, text, len, 1, 1, limits[k], &ids, err, sizeof err);
        if (n <= limits[k]) {
            CHECKF(m == n && !memcmp(ids, full, (size_t)n * sizeof *ids), "%s limit %d: %d ids, want %d",
                   tok_dir, limits[k], m, n);
        } else {
            CHECKF(m > limits[k], "%s limit %d: %d ids for a text of %d", tok_dir, limits[k], m, n);
            /* what was encoded before stopping is the encoding's start */
            CHECKF(!ids || !memcmp(ids, full, (size_t)(m < n ? m : n) * sizeof *ids), "%s limit %d: not a prefix",
                   tok_dir, limits[k]);
        }
        free(ids);
    }
    free(full);
    free(text);

    /* 2 MB against a 2048-token limit: refused long before the whole text is encoded */
    text = vector_text(vectors, 2u << 20, &len);
    CHECK(text);
    int32_t *ids = NULL;
    double t0 = now_s();
    const int m = xi_tokenizer_encode_limit(t, text, len, 1, 1, 2048, &ids, err, sizeof err);
    const double limited = now_s() - t0;
    free(ids);
    CHECKF(m > 2048, "%s: %d", tok_dir, m);
    t0 = now_s();
    const int whole = xi_tokenizer_encode(t, text, len, 1, 1, &ids, err, sizeof err);
    const double all = now_s() - t0;
    free(ids);
    CHECKF(whole > m, "%s: whole %d, limited %d", tok_dir, whole, m);
    fprintf(stderr, "    %s: %zu bytes, %d tokens in %.3f s; past 2048 known in %.4f s (%.0fx)\n", tok_dir, len,
            whole, all, limited, all / limited);
    free(text);
    xi_tokenizer_free(t);
}

TEST(test_tokenizer_encode_limit_is_exact_below_and_stops_above_qwen2) {
    check_limits("tokenizers/qwen2.5", "tokenizer-vectors/ggml-vocab-qwen2.gguf.inp");
}

TEST(test_tokenizer_encode_limit_is_exact_below_and_stops_above_llama2) {
    check_limits("tokenizers/llama2", "tokenizer-vectors/ggml-vocab-llama-spm.gguf.inp");
}
