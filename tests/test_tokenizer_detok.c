/* Incremental detokenizer, concurrency and speed of the tokenizer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/base.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* The strings between llama.cpp's "\n__ggml_vocab_test__\n" separators. */
static int read_strings(const char *rel, char ***out, size_t **lens) {
    size_t len;
    char err[256];
    char *text = xi_read_file(xi_test_data(rel), &len, err, sizeof err);
    if (!text) return -1;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n = 0;
    *out = NULL;
    *lens = NULL;
    for (char *p = text, *s; (s = strstr(p, sep)); p = s + strlen(sep)) {
        *out = realloc(*out, (size_t)(n + 1) * sizeof **out);
        *lens = realloc(*lens, (size_t)(n + 1) * sizeof **lens);
        (*out)[n] = xi_strndup(p, (size_t)(s - p));
        (*lens)[n++] = (size_t)(s - p);
    }
    free(text);
    return n;
}

/* An independent UTF-8 check (utf8proc) for every delta. */
static int valid_utf8(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* Push ids one at a time; the deltas must be whole characters and concatenate to decode(). */
static int stream_equals_decode(const xi_tokenizer *t, const int32_t *ids, int n, int skip,
                                char *why, size_t whylen) {
    char err[256];
    size_t full_len;
    char *full = xi_tokenizer_decode(t, ids, n, skip, &full_len, err, sizeof err);
    if (!full) return xi_errf(why, whylen, "decode: %s", err);
    xi_detok d;
    xi_detok_init(&d, t, skip);
    xi_buf out = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        size_t before = out.len;
        int k = xi_detok_push(&d, ids[i], &out);
        if (k < 0 || (size_t)k != out.len - before)
            rc = xi_errf(why, whylen, "push %d failed", i);
        else if (!valid_utf8(out.data + before, (size_t)k))
            rc = xi_errf(why, whylen, "delta %d is not whole UTF-8", i);
    }
    if (!rc && xi_detok_flush(&d, &out) < 0) rc = xi_errf(why, whylen, "flush failed");
    if (!rc && (out.len != full_len || (full_len && memcmp(out.data, full, full_len))))
        rc = xi_errf(why, whylen, "stream '%s' != decode '%s'", out.data ? out.data : "", full);
    xi_detok_free(&d);
    xi_buf_free(&out);
    free(full);
    return rc;
}

static void check_stream(const char *tok_rel, const char *vec_rel, int add_special) {
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data(tok_rel), err, sizeof err);
    CHECKF(t, "%s", err);
    char **s;
    size_t *lens;
    int n = read_strings(vec_rel, &s, &lens);
    CHECK(n == 46);
    int split_chars = 0;
    for (int i = 0; i < n; i++) {
        int32_t *ids;
        int k = xi_tokenizer_encode(t, s[i], lens[i], add_special, 1, &ids, err, sizeof err);
        CHECKF(k >= 0, "%s", err);
        for (int skip = 0; skip < 2; skip++)
            CHECKF(!stream_equals_decode(t, ids, k, skip, err, sizeof err), "%s #%d skip=%d: %s",
                   tok_rel, i, skip, err);
        /* Count ids whose own bytes are not whole UTF-8: the cases the detokenizer holds back. */
        for (int j = 0; j < k; j++) {
            char *one = xi_tokenizer_decode(t, ids + j, 1, 0, NULL, err, sizeof err);
            split_chars += one && strstr(one, "\xef\xbf\xbd") != NULL;
            free(one);
        }
        free(ids);
        free(s[i]);
    }
    free(s);
    free(lens);
    CHECKF(split_chars > 10, "only %d tokens split a character", split_chars);
    xi_tokenizer_free(t);
}

TEST(test_detok_stream_equals_decode_qwen2_vectors) {
    check_stream("tokenizers/qwen2.5", "tokenizer-vectors/ggml-vocab-qwen2.gguf.inp", 0);
}

TEST(test_detok_stream_equals_decode_llama_spm_vectors_with_bos) {
    check_stream("tokenizers/llama2", "tokenizer-vectors/ggml-vocab-llama-spm.gguf.inp", 1);
}

TEST(test_detok_holds_split_emoji_until_complete_and_strips_first_space_once) {
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data("models/stories260K"), err, sizeof err);
    CHECKF(t, "%s", err);
    /* "\xf0\x9f\xa6\x99" (llama emoji) is four <0xNN> byte tokens in a 512-piece vocabulary. */
    const char *text = "\xf0\x9f\xa6\x99 hi";
    int32_t *ids;
    int n = xi_tokenizer_encode(t, text, strlen(text), 1, 1, &ids, err, sizeof err);
    CHECK(n >= 7);
    CHECK_EQ(ids[0], 1);
    CHECK_EQ(ids[1], xi_tokenizer_token_id(t, "\xe2\x96\x81"));
    CHECK_EQ(ids[2], xi_tokenizer_token_id(t, "<0xF0>"));
    xi_detok d;
    xi_detok_init(&d, t, 1);
    xi_buf out = {0};
    CHECK_EQ(xi_detok_push(&d, ids[0], &out), 0); /* BOS skipped */
    CHECK_EQ(xi_detok_push(&d, ids[1], &out), 0); /* the dummy-prefix space is stripped */
    CHECK_EQ(xi_detok_push(&d, ids[2], &out), 0);
    CHECK_EQ(xi_detok_push(&d, ids[3], &out), 0);
    CHECK_EQ(xi_detok_push(&d, ids[4], &out), 0);
    CHECK_EQ(xi_detok_push(&d, ids[5], &out), 4);
    CHECK_STR(out.data, "\xf0\x9f\xa6\x99");
    for (int i = 6; i < n; i++) CHECK(xi_detok_push(&d, ids[i], &out) >= 0);
    CHECK_STR(out.data, text);
    CHECK_EQ(xi_detok_push(&d, 512, &out), -1);
    xi_buf_free(&out);
    free(ids);
    xi_tokenizer_free(t);
}

/* A byte run that can never complete is emitted as U+FFFD, exactly as decode() shows it. */
TEST(test_detok_invalid_bytes_become_replacement_like_decode) {
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data("models/stories260K"), err, sizeof err);
    CHECKF(t, "%s", err);
    int32_t ids[6] = {xi_tokenizer_token_id(t, "<0xE4>"), xi_tokenizer_token_id(t, "<0xB8>"),
                      xi_tokenizer_token_id(t, "<0x41>"), xi_tokenizer_token_id(t, "<0x80>"),
                      xi_tokenizer_token_id(t, "<0xED>"), xi_tokenizer_token_id(t, "<0xA0>")};
    for (int i = 0; i < 6; i++) CHECK(ids[i] >= 0);
    char *full = xi_tokenizer_decode(t, ids, 6, 0, NULL, err, sizeof err);
    CHECK_STR(full, "\xef\xbf\xbd"
                    "A"
                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    CHECK(!stream_equals_decode(t, ids, 6, 0, err, sizeof err));
    free(full);
    /* A sequence that ends inside a character: held back, then U+FFFD on flush. */
    xi_detok d;
    xi_detok_init(&d, t, 0);
    xi_buf out = {0};
    CHECK_EQ(xi_detok_push(&d, ids[0], &out), 0);
    CHECK_EQ(xi_detok_push(&d, ids[1], &out), 0);
    CHECK_EQ(xi_detok_flush(&d, &out), 3);
    CHECK_STR(out.data, "\xef\xbf\xbd");
    CHECK_EQ(xi_detok_flush(&d, &out), 0);
    full = xi_tokenizer_decode(t, ids, 2, 0, NULL, err, sizeof err);
    CHECK_STR(full, out.data);
    free(full);
    xi_buf_free(&out);
    xi_tokenizer_free(t);
}

typedef struct {
    const xi_tokenizer *t;
    char **s;
    size_t *lens;
    int n;
    int32_t **want;
    int *n_want;
    int mismatches;
} thread_job;

static void *encode_all(void *arg) {
    thread_job *j = arg;
    char err[256];
    for (int rep = 0; rep < 5; rep++)
        for (int i = 0; i < j->n; i++) {
            int32_t *ids;
            int k = xi_tokenizer_encode(j->t, j->s[i], j->lens[i], 0, 1, &ids, err, sizeof err);
            if (k != j->n_want[i] || memcmp(ids, j->want[i], (size_t)k * sizeof *ids))
                j->mismatches++;
            free(ids);
        }
    return NULL;
}

TEST(test_tokenizer_encode_from_three_threads_matches_single_thread) {
    char err[512] = "";
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data("tokenizers/qwen2.5"), err, sizeof err);
    CHECKF(t, "%s", err);
    thread_job base = {t, NULL, NULL, 0, NULL, NULL, 0};
    base.n = read_strings("tokenizer-vectors/ggml-vocab-qwen2.gguf.inp", &base.s, &base.lens);
    CHECK(base.n == 46);
    base.want = calloc((size_t)base.n, sizeof *base.want);
    base.n_want = calloc((size_t)base.n, sizeof *base.n_want);
    for (int i = 0; i < base.n; i++)
        CHECK((base.n_want[i] = xi_tokenizer_encode(t, base.s[i], base.lens[i], 0, 1, &base.want[i],
                                                    err, sizeof err)) >= 0);
    thread_job jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = base;
        CHECK(pthread_create(&th[i], NULL, encode_all, &jobs[i]) == 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(jobs[i].mismatches, 0);
    for (int i = 0; i < base.n; i++) {
        free(base.s[i]);
        free(base.want[i]);
    }
    free(base.s);
    free(base.lens);
    free(base.want);
    free(base.n_want);
    xi_tokenizer_free(t);
}

/* A 10 KB prompt must tokenize in milliseconds. The bound is relative to loading the tokenizer
 * in the same run (both are CPU-bound string work, so machine speed cancels out): encoding
 * 10 KB must cost under a tenth of parsing the 7 MB tokenizer.json. */
TEST(test_tokenizer_encodes_10kb_prompt_quickly) {
    char err[512] = "";
    double t0 = xi_now();
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data("tokenizers/qwen2.5"), err, sizeof err);
    double load_s = xi_now() - t0;
    CHECKF(t, "%s", err);
    char **s;
    size_t *lens;
    int n = read_strings("tokenizer-vectors/ggml-vocab-qwen2.gguf.inp", &s, &lens);
    CHECK(n == 46);
    xi_buf text = {0};
    for (int i = 0; text.len < 10240; i = (i + 1) % n)
        CHECK(xi_buf_append(&text, s[i], lens[i]) == 0);
    int32_t *ids;
    t0 = xi_now();
    int k = xi_tokenizer_encode(t, text.data, text.len, 0, 1, &ids, err, sizeof err);
    double enc_s = xi_now() - t0;
    CHECKF(k > 1000, "%s", err);
    XI_INFO("10 KB prompt: %d tokens, encode/load time ratio %.4f", k, enc_s / load_s);
    CHECKF(enc_s < load_s / 10, "encode %.1f ms vs load %.1f ms", enc_s * 1e3, load_s * 1e3);
    char *back = xi_tokenizer_decode(t, ids, k, 0, NULL, err, sizeof err);
    CHECK(back && strlen(back) == text.len);
    free(back);
    free(ids);
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
    free(lens);
    xi_buf_free(&text);
    xi_tokenizer_free(t);
}

/* Random text from pieces that NFC leaves alone (ASCII with runs of spaces, tabs and newlines,
 * precomposed Latin-1, CJK, emoji; not U+2581, which SentencePiece decodes as a space): encode
 * then decode gives it back, and streaming gives the
 * same as decode, for both tokenizer families. Fixed seed, so a failure reproduces. */
static size_t random_text(uint64_t *state, char *out, size_t cap) {
    static const char *const pool[] = {" ",
                                       "  ",
                                       "\t",
                                       "\n",
                                       "\r\n",
                                       "a",
                                       "Z",
                                       "7",
                                       "'s",
                                       "!",
                                       "\xc3\xa9",
                                       "\xc3\x9f",
                                       "\xe4\xb8\xad",
                                       "\xe6\x96\x87",
                                       "\xf0\x9f\xa6\x99",
                                       "\xf0\x9f\x98\x80",
                                       "<",
                                       "|",
                                       "-",
                                       "word",
                                       " the"};
    size_t len = 0;
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    int n = (int)(*state >> 59) + 1;
    for (int i = 0; i < n * 3; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        const char *p = pool[(*state >> 33) % XI_ARRAY_LEN(pool)];
        size_t l = strlen(p);
        if (len + l >= cap) break;
        memcpy(out + len, p, l);
        len += l;
    }
    out[len] = 0;
    return len;
}

TEST(test_tokenizer_random_text_round_trips_and_streams) {
    static const char *const dirs[] = {"tokenizers/qwen2.5", "models/stories260K"};
    for (size_t d = 0; d < XI_ARRAY_LEN(dirs); d++) {
        char err[512] = "";
        xi_tokenizer *t = xi_tokenizer_load(xi_test_data(dirs[d]), err, sizeof err);
        CHECKF(t, "%s", err);
        uint64_t state = 42;
        for (int iter = 0; iter < 300; iter++) {
            char text[512];
            size_t len = random_text(&state, text, sizeof text);
            int32_t *ids;
            int n = xi_tokenizer_encode(t, text, len, 1, 0, &ids, err, sizeof err);
            CHECKF(n >= 0, "%s", err);
            size_t back_len;
            char *back = xi_tokenizer_decode(t, ids, n, 1, &back_len, err, sizeof err);
            CHECKF(back && back_len == len && !memcmp(back, text, len), "%s: '%s' -> '%s'", dirs[d],
                   text, back ? back : err);
            CHECKF(!stream_equals_decode(t, ids, n, 1, err, sizeof err), "%s: '%s': %s", dirs[d],
                   text, err);
            free(back);
            free(ids);
        }
        xi_tokenizer_free(t);
    }
}
