/* Tokenizer features the shared tokenizers do not use, checked on variants of them rewritten
 * at test time: Metaspace pre-tokenizer and decoder, added-token flags, GPT-2 ByteLevel regex. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* Defined in test_tokenizer.c: a JSON file read in one piece (json_load_file uses getc). */
json_t *tok_test_read_json(const char *path);

/* Write root (and cfg when not NULL) into a fresh folder under the test's tmpdir and load it.
 * Takes both references. */
static xi_tokenizer *write_and_load(json_t *root, json_t *cfg, const char *sub) {
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/%s", xi_test_tmpdir(), sub);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/tokenizer.json", xi_test_tmpdir(), sub);
    int bad = !root || json_dump_file(root, path, 0);
    snprintf(path, sizeof path, "%s/%s/tokenizer_config.json", xi_test_tmpdir(), sub);
    if (cfg) bad |= json_dump_file(cfg, path, 0);
    json_decref(root);
    json_decref(cfg);
    if (bad) return NULL;
    snprintf(path, sizeof path, "%s/%s", xi_test_tmpdir(), sub);
    xi_tokenizer *t = xi_tokenizer_load(path, err, sizeof err);
    if (!t) xi_test_fail(__FILE__, __LINE__, "variant %s: %s", sub, err);
    return t;
}

/* rel/tokenizer.json changed by edit(), with tokenizer_config.json changed by edit_cfg. */
static xi_tokenizer *load_variant_cfg(const char *rel, void (*edit)(json_t *root),
                                      void (*edit_cfg)(json_t *cfg), const char *sub) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", xi_test_data(rel));
    json_t *root = tok_test_read_json(path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", xi_test_data(rel));
    json_t *cfg = tok_test_read_json(path);
    if (!root || !cfg) {
        json_decref(root);
        json_decref(cfg);
        return NULL;
    }
    edit(root);
    edit_cfg(cfg);
    return write_and_load(root, cfg, sub);
}

static void keep(json_t *root) { (void)root; }

static xi_tokenizer *load_variant(const char *rel, void (*edit)(json_t *root), const char *sub) {
    return load_variant_cfg(rel, edit, keep, sub);
}

static int encode(const xi_tokenizer *t, const char *s, int add, int parse, int32_t **ids) {
    char err[256];
    return xi_tokenizer_encode(t, s, strlen(s), add, parse, ids, err, sizeof err);
}

static int same_ids(const xi_tokenizer *a, const xi_tokenizer *b, const char *s, int parse) {
    int32_t *x, *y;
    int nx = encode(a, s, 1, parse, &x), ny = encode(b, s, 1, parse, &y);
    int same = nx >= 0 && nx == ny && !memcmp(x, y, (size_t)nx * sizeof *x);
    free(x);
    free(y);
    return same;
}

/* ---- Metaspace ---- */

static const char *metaspace_scheme;

static void to_metaspace(json_t *root) {
    json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer",
                        json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement",
                                  "\xe2\x96\x81", "prepend_scheme", metaspace_scheme, "split", 0));
    json_object_set_new(root, "decoder",
                        json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement",
                                  "\xe2\x96\x81", "prepend_scheme", metaspace_scheme, "split", 0));
}

/* The older Metaspace pre-tokenizer (prepend "always", no split) tokenizes and decodes like
 * the Prepend + Replace normaliser pair it was replaced by, except that text starting with a
 * space gets no second U+2581 (Hugging Face's Metaspace, unlike SentencePiece). */
TEST(test_tokenizer_metaspace_pretokenizer_equals_prepend_replace_normalizer) {
    metaspace_scheme = "always";
    xi_tokenizer *a = load_variant("models/stories260K", keep, "orig");
    xi_tokenizer *b = load_variant("models/stories260K", to_metaspace, "meta");
    CHECK(a && b);
    static const char *texts[] = {"Once upon a time", "two  spaces\tand tab", "",
                                  "Lily<s>said \xe4\xbd\xa0\xe5\xa5\xbd", "\n\nend "};
    for (size_t i = 0; i < XI_ARRAY_LEN(texts); i++) {
        CHECKF(same_ids(a, b, texts[i], 1), "'%s'", texts[i]);
        int32_t *ids;
        int n = encode(b, texts[i], 1, 0, &ids);
        char err[256];
        char *back = xi_tokenizer_decode(b, ids, n, 1, NULL, err, sizeof err);
        CHECK_STR(back, texts[i]);
        free(back);
        free(ids);
    }
    int32_t *ids;
    CHECK_EQ(encode(b, " a", 0, 0, &ids), 1);
    CHECK_EQ(ids[0], xi_tokenizer_token_id(b, "\xe2\x96\x81"
                                              "a"));
    free(ids);
    CHECK_EQ(encode(a, " a", 0, 0, &ids), 2);
    free(ids);
    xi_tokenizer_free(a);
    xi_tokenizer_free(b);
}

/* prepend_scheme "first": only text at the very start gets the dummy-prefix space, not text
 * that follows an added token. */
TEST(test_tokenizer_metaspace_first_prepends_only_at_input_start) {
    metaspace_scheme = "first";
    xi_tokenizer *t = load_variant("tokenizers/llama2", to_metaspace, "first");
    CHECK(t);
    int32_t *ids;
    int n = encode(t, "Hello<s>Hello", 0, 1, &ids);
    CHECK_EQ(n, 3);
    CHECK_EQ(ids[0], xi_tokenizer_token_id(t, "\xe2\x96\x81Hello"));
    CHECK_EQ(ids[1], 1);
    CHECK_EQ(ids[2], xi_tokenizer_token_id(t, "Hello"));
    free(ids);
    xi_tokenizer_free(t);
}

/* ---- added-token flags ---- */

static void add_token(json_t *added, int id, const char *content, int single_word, int lstrip,
                      int rstrip, int special) {
    json_array_append_new(added,
                          json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content",
                                    content, "single_word", single_word, "lstrip", lstrip, "rstrip",
                                    rstrip, "normalized", 0, "special", special));
}

static void add_flagged_tokens(json_t *root) {
    json_t *added = json_object_get(root, "added_tokens");
    add_token(added, 512, "<mask>", 0, 1, 0, 1);
    add_token(added, 513, "[R]", 0, 0, 1, 0);
    add_token(added, 514, "ab", 1, 0, 0, 0);
    add_token(added, 515, "<mask>long", 0, 0, 0, 1);
}

/* ids of a concatenation of plain texts and added-token ids (-1 ends the list). */
static int expect(const xi_tokenizer *t, const char *text, int parse, const char *parts[],
                  const int32_t added[]) {
    int32_t want[256];
    int nw = 0;
    for (int i = 0; parts[i] || added[i] >= 0; i++) {
        if (parts[i] && *parts[i]) {
            int32_t *ids;
            int n = encode(t, parts[i], 0, 0, &ids);
            for (int k = 0; k < n; k++) want[nw++] = ids[k];
            free(ids);
        }
        if (added[i] >= 0) want[nw++] = added[i];
    }
    int32_t *got;
    int ng = encode(t, text, 0, parse, &got);
    int same = ng == nw && !memcmp(got, want, (size_t)nw * sizeof *got);
    free(got);
    return same;
}

TEST(test_tokenizer_added_token_flags_lstrip_rstrip_single_word_longest) {
    xi_tokenizer *t = load_variant("models/stories260K", add_flagged_tokens, "added");
    CHECK(t);
    CHECK_EQ(xi_tokenizer_vocab_size(t), 516);
    CHECK(xi_tokenizer_is_special(t, 512) && !xi_tokenizer_is_special(t, 513));
    /* lstrip: the spaces before <mask> belong to it. */
    CHECK(expect(t, "x  <mask> y", 1, (const char *[]){"x", " y", NULL},
                 (const int32_t[]){512, -1, -1}));
    /* rstrip: the spaces after [R] belong to it; a non-special token matches without parsing. */
    CHECK(
        expect(t, "x[R]  y", 0, (const char *[]){"x", "y", NULL}, (const int32_t[]){513, -1, -1}));
    /* A special token is plain text unless parsing is on. */
    CHECK(expect(t, "x <mask>", 0, (const char *[]){"x <mask>", NULL}, (const int32_t[]){-1, -1}));
    /* single_word: "ab" only as a whole word. */
    CHECK(expect(t, "ab cd", 1, (const char *[]){"", " cd", NULL}, (const int32_t[]){514, -1, -1}));
    CHECK(expect(t, "xab abc", 1, (const char *[]){"xab abc", NULL}, (const int32_t[]){-1, -1}));
    /* Longest match wins. */
    CHECK(expect(t, "<mask>longer", 1, (const char *[]){"", "er", NULL},
                 (const int32_t[]){515, -1, -1}));
    xi_tokenizer_free(t);
}

/* ---- GPT-2 ByteLevel regex ---- */

/* A small byte-level tokenizer written at test time: the 256 GPT-2 byte characters (id = byte)
 * plus merges of ASCII pairs, merged token i getting id 256 + i, so "Ġ I" -> "ĠI" = 256 when
 * it is the first. norm and pre are its normalizer and pre_tokenizer (references taken). */
static xi_tokenizer *tiny_byte_level_norm(json_t *norm, json_t *pre, const char *const merges[][2],
                                          int n_merges, const char *sub) {
    json_t *vocab = json_object(), *mj = json_array();
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        /* GPT-2 bytes_to_unicode, written out independently of the library. */
        int keep = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        int cp = keep ? b : 256 + extra++;
        char u[3] = {(char)cp, 0, 0};
        if (cp >= 0x80) {
            u[0] = (char)(0xc0 | cp >> 6);
            u[1] = (char)(0x80 | (cp & 0x3f));
        }
        json_object_set_new(vocab, u, json_integer(b));
    }
    for (int i = 0; i < n_merges; i++) {
        char both[16];
        snprintf(both, sizeof both, "%s%s", merges[i][0], merges[i][1]);
        json_object_set_new(vocab, both, json_integer(256 + i));
        json_array_append_new(mj, json_pack("[s, s]", merges[i][0], merges[i][1]));
    }
    json_t *root = json_pack("{s:o, s:o, s:o, s:{s:s}, s:{s:s, s:o, s:o}}", "normalizer", norm,
                             "pre_tokenizer", pre, "added_tokens", json_array(), "decoder", "type",
                             "ByteLevel", "model", "type", "BPE", "vocab", vocab, "merges", mj);
    return write_and_load(root, NULL, sub);
}

static xi_tokenizer *tiny_byte_level(json_t *pre, const char *const merges[][2], int n_merges,
                                     const char *sub) {
    return tiny_byte_level_norm(json_null(), pre, merges, n_merges, sub);
}

static const char *const contraction_merges[][2] = {{"\xc4\xa0", "I"}, {"'", "M"}};

/* GPT-2's regex knows lower-case contractions only, so "'M" is punctuation + letter and the
 * "' M" merge cannot apply; Qwen2's case-insensitive regex keeps "'M" together. add_prefix_space
 * turns "I" into " I". */
TEST(test_tokenizer_bytelevel_gpt2_regex_and_prefix_space) {
    xi_tokenizer *g =
        tiny_byte_level(json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                                  1, "trim_offsets", 1, "use_regex", 1),
                        contraction_merges, 2, "gpt2");
    xi_tokenizer *q = tiny_byte_level(
        json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type", "Sequence",
                  "pretokenizers", "type", "Split", "pattern", "Regex",
                  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
                  "behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0,
                  "use_regex", 0),
        contraction_merges, 2, "qwen");
    CHECK(g && q);
    int32_t *ids;
    int n = encode(g, "I'M", 0, 0, &ids);
    CHECK_EQ(n, 3);
    CHECK_EQ(ids[0], 256);
    CHECK_EQ(ids[1], '\'');
    CHECK_EQ(ids[2], 'M');
    free(ids);
    n = encode(q, "I'M", 0, 0, &ids);
    CHECK_EQ(n, 2);
    CHECK_EQ(ids[0], 'I');
    CHECK_EQ(ids[1], 257);
    free(ids);
    /* ASCII bytes, space and control bytes included, map to their byte-level characters and
     * back. */
    char all[256];
    for (int b = 0; b < 256; b++) all[b] = (char)b;
    int32_t bytes[256];
    for (int b = 0; b < 256; b++) bytes[b] = b;
    char err[256];
    size_t len;
    char *text = xi_tokenizer_decode(q, bytes + 1, 127, 0, &len, err, sizeof err);
    CHECK(text && len == 127 && !memcmp(text, all + 1, 127));
    free(text);
    n = xi_tokenizer_encode(q, all + 1, 127, 0, 0, &ids, err, sizeof err);
    CHECK_EQ(n, 127);
    for (int k = 0; k < n; k++) CHECK_EQ(ids[k], k + 1);
    free(ids);
    xi_tokenizer_free(q);
    xi_tokenizer_free(g);
}

/* ---- Split behaviours ---- */

static const char *const dash_merges[][2] = {
    {"a", "-"}, {"-", "b"}, {"-", "-"}, {"a-", "-"}, {"\xc4\xa0", "-"}};
enum { A_DASH = 256, DASH_B, DASH_DASH, A_DASH_DASH, SPACE_DASH };

/* "a--b -b" split on " " (Isolated), then on "-" with each behaviour: which merges apply shows
 * which pieces BPE saw. A delimiter never joins a piece of another input piece. */
TEST(test_tokenizer_split_behaviors_shape_pieces) {
    static const struct {
        const char *behavior;
        int invert;
        int n;
        int32_t ids[8];
    } cases[] = {
        {"Isolated", 0, 7, {'a', '-', '-', 'b', ' ', '-', 'b'}},
        {"Removed", 0, 4, {'a', 'b', ' ', 'b'}},
        {"MergedWithPrevious", 0, 6, {A_DASH, '-', 'b', ' ', '-', 'b'}},
        {"MergedWithNext", 0, 5, {'a', '-', DASH_B, ' ', DASH_B}},
        {"Contiguous", 0, 6, {'a', DASH_DASH, 'b', ' ', '-', 'b'}},
        {"Removed", 1, 3, {'-', '-', '-'}},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(cases); i++) {
        json_t *pre = json_pack(
            "{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type",
            "Sequence", "pretokenizers", "type", "Split", "pattern", "String", " ", "behavior",
            "Isolated", "type", "Split", "pattern", "String", "-", "behavior", cases[i].behavior,
            "invert", cases[i].invert, "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0);
        char sub[32];
        snprintf(sub, sizeof sub, "split%zu", i);
        xi_tokenizer *t = tiny_byte_level(pre, dash_merges, 5, sub);
        CHECK(t);
        int32_t *ids;
        int n = encode(t, "a--b -b", 0, 0, &ids);
        char got[128] = "";
        for (int k = 0; k < n; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[k]);
        CHECKF(n == cases[i].n && !memcmp(ids, cases[i].ids, (size_t)n * sizeof *ids),
               "%s invert=%d: got%s", cases[i].behavior, cases[i].invert, got);
        free(ids);
        xi_tokenizer_free(t);
    }
}

/* ---- character-class pre-tokenizers and normalizers ---- */

static const char *const class_merges[][2] = {{"1", "2"}, {"a", "!"}, {"a", "b"}, {"f", "i"}};
enum { ONE_TWO = 256, A_BANG, A_B, F_I };

TEST(test_tokenizer_digits_punctuation_whitespace_pretokenizers) {
    static const struct {
        const char *pre; /* JSON of the pre-tokenizer before ByteLevel */
        const char *text;
        int n;
        int32_t ids[8];
    } cases[] = {
        {"{\"type\": \"Digits\", \"individual_digits\": true}", "a123", 4, {'a', '1', '2', '3'}},
        {"{\"type\": \"Digits\", \"individual_digits\": false}", "a123", 3, {'a', ONE_TWO, '3'}},
        {"{\"type\": \"Punctuation\", \"behavior\": \"Isolated\"}", "a!b", 3, {'a', '!', 'b'}},
        {"{\"type\": \"Whitespace\"}", "ab  a!", 3, {A_B, 'a', '!'}},
        {"{\"type\": \"WhitespaceSplit\"}", "ab  a!", 2, {A_B, A_BANG}},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(cases); i++) {
        json_error_t je;
        json_t *first = json_loads(cases[i].pre, 0, &je);
        CHECKF(first, "%s", je.text);
        json_t *pre =
            json_pack("{s:s, s:[o, {s:s, s:b, s:b}]}", "type", "Sequence", "pretokenizers", first,
                      "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0);
        char sub[32];
        snprintf(sub, sizeof sub, "class%zu", i);
        xi_tokenizer *t = tiny_byte_level(pre, class_merges, 4, sub);
        CHECK(t);
        int32_t *ids;
        int n = encode(t, cases[i].text, 0, 0, &ids);
        CHECKF(n == cases[i].n && !memcmp(ids, cases[i].ids, (size_t)n * sizeof *ids),
               "%s on '%s': %d ids", cases[i].pre, cases[i].text, n);
        free(ids);
        xi_tokenizer_free(t);
    }
}

TEST(test_tokenizer_nfkc_nfd_lowercase_normalizers) {
    static const struct {
        const char *type, *text;
        int n;
        int32_t ids[4];
    } cases[] = {
        {"NFKC", "\xef\xac\x81", 1, {F_I}},        /* U+FB01 ligature -> "fi" */
        {"NFD", "\xc3\xa9", 3, {'e', 0xcc, 0x81}}, /* e + combining acute */
        {"NFC", "e\xcc\x81", 2, {0xc3, 0xa9}},     /* composed again */
        {"Lowercase", "AB", 1, {A_B}},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(cases); i++) {
        json_t *pre = json_pack("{s:s, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                                "use_regex", 0);
        char sub[32];
        snprintf(sub, sizeof sub, "norm%zu", i);
        xi_tokenizer *t = tiny_byte_level_norm(json_pack("{s:s}", "type", cases[i].type), pre,
                                               class_merges, 4, sub);
        CHECK(t);
        int32_t *ids;
        int n = encode(t, cases[i].text, 0, 0, &ids);
        CHECKF(n == cases[i].n && !memcmp(ids, cases[i].ids, (size_t)n * sizeof *ids),
               "%s: %d ids, first %d", cases[i].type, n, n ? ids[0] : -1);
        free(ids);
        xi_tokenizer_free(t);
    }
}

/* ---- BOS / EOS ---- */

static void no_bos_with_eos(json_t *cfg) {
    json_object_set_new(cfg, "add_bos_token", json_false());
    json_object_set_new(cfg, "add_eos_token", json_true());
}

static void not_llama_class(json_t *cfg) {
    no_bos_with_eos(cfg);
    json_object_set_new(cfg, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
}

/* transformers' LlamaTokenizerFast rebuilds the template from add_bos_token/add_eos_token;
 * a generic fast tokenizer keeps the template of tokenizer.json. Either way BOS appears at
 * most once. */
TEST(test_tokenizer_llama_class_follows_add_bos_token_over_template) {
    xi_tokenizer *l = load_variant_cfg("models/stories260K", keep, no_bos_with_eos, "llama");
    xi_tokenizer *g = load_variant_cfg("models/stories260K", keep, not_llama_class, "generic");
    CHECK(l && g);
    int32_t *ids;
    int n = encode(l, "Once", 1, 1, &ids);
    CHECK(n >= 2);
    CHECK(ids[0] != 1);
    CHECK_EQ(ids[n - 1], 2);
    free(ids);
    n = encode(g, "Once", 1, 1, &ids);
    CHECK(n >= 2);
    CHECK_EQ(ids[0], 1);
    CHECK(ids[n - 1] != 2);
    for (int k = 1; k < n; k++) CHECK(ids[k] != 1);
    free(ids);
    xi_tokenizer_free(l);
    xi_tokenizer_free(g);
}

/* Qwen3-Embedding's tokenizer.json: Sequence[ByteLevel, TemplateProcessing "$A <|endoftext|>"].
 * ByteLevel adds no ids (Qwen2's ByteLevel-only post-processor adds nothing: see the
 * reference-ids test); the template appends <|endoftext|> only with special tokens. */
static json_t *append_endoftext(void) {
    return json_pack("{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}}],s:{s:{s:s,s:[i],s:[s]}}}", "type",
                     "TemplateProcessing", "single", "Sequence", "id", "A", "type_id", 0,
                     "SpecialToken", "id", "<|endoftext|>", "type_id", 0, "special_tokens",
                     "<|endoftext|>", "id", "<|endoftext|>", "ids", 151643, "tokens", "<|endoftext|>");
}

static void embedding_post(json_t *root) {
    json_t *bl = json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                           "trim_offsets", 0, "use_regex", 0);
    json_object_set_new(root, "post_processor",
                        json_pack("{s:s,s:[o,o]}", "type", "Sequence", "processors", bl,
                                  append_endoftext()));
}

TEST(test_tokenizer_template_post_processor_appends_endoftext_for_embeddings) {
    xi_tokenizer *emb = load_variant("models/qwen2-tiny-random", embedding_post, "emb");
    CHECK(emb);
    int32_t *ids;
    CHECK_EQ(encode(emb, "Hello", 1, 1, &ids), 2);
    CHECK(ids[0] == 9707 && ids[1] == 151643);
    free(ids);
    CHECK_EQ(encode(emb, "Hello", 0, 1, &ids), 1);
    CHECK_EQ(ids[0], 9707);
    free(ids);
    CHECK_EQ(xi_tokenizer_bos_id(emb), -1); /* an appended token is no BOS */
    xi_tokenizer_free(emb);
}
