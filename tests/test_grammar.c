/* The grammar engine behind structured outputs (sample/grammar*): each compiler on its own,
 * regexes against PCRE2 as the oracle, and the cached token mask against trying every token. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdlib.h>

#include "sample/grammar.h"
#include "sample/json_fsm.h"
#include "test.h"
#include "base/base.h"
#include "tokenizer/tokenizer.h"

/* -2: does not compile; -1: rejected; 0: a prefix; 1: complete */
static int run(xi_grammar_kind kind, const char *src, const char *text) {
    char err[256];
    xi_grammar *g = xi_grammar_compile(kind, src, strlen(src), err, sizeof err);
    if (!g) return -2;
    xi_grammar_state s;
    int r = -1;
    if (!xi_grammar_state_init(g, &s)) {
        r = xi_grammar_feed(g, &s, text, strlen(text)) ? -1 : xi_grammar_done(&s);
        xi_grammar_state_free(&s);
    }
    xi_grammar_free(g);
    return r;
}

static int compile_error(xi_grammar_kind kind, const char *src, const char *want) {
    char err[256];
    xi_grammar *g = xi_grammar_compile(kind, src, strlen(src), err, sizeof err);
    if (g) {
        xi_grammar_free(g);
        return 0;
    }
    return strstr(err, want) != NULL;
}

/* PCRE2's verdict on text for the pattern over the whole text: 1 full match, 0 a proper
 * prefix of a match (a hard partial match against pattern + \z), -1 neither */
static int pcre_verdict(const char *pattern, const char *text) {
    char wrapped[512];
    snprintf(wrapped, sizeof wrapped, "(?:%s)\\z", pattern);
    int ec, rc[2];
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)wrapped, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_UTF, &ec, &eo, NULL);
    if (!re) return -2;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    for (int k = 0; k < 2; k++)
        rc[k] = pcre2_match(re, (PCRE2_SPTR)text, strlen(text), 0, k ? PCRE2_PARTIAL_HARD : 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (rc[0] >= 0) return 1;
    /* PCRE2 reports no partial match on an empty subject: every pattern here matches something */
    return rc[1] == PCRE2_ERROR_PARTIAL || !*text ? 0 : -1;
}

TEST(test_grammar_regex_agrees_with_pcre2) {
    static const char *const pats[] = {
        "abc", "a|bc|", "(ab)*c", "[a-c]+x?", "\\d{2,4}-\\w+", "[^a-z]{1,3}", "(?:x|yz){2}q",
        "colou?r", "a.c", "[\\d\\s]*!", "(a|b)+?c", "h[é-ü]llo", "\\x41\\x{e9}+", "[-+]?[0-9]{1,3}(\\.[0-9]+)?",
        "^(yes|no)$", "(\\(|\\))*", "[\\]\\\\]x", "a{3}", "a{2,}", "(a?)*b",
    };
    static const char *const texts[] = {
        "", "a", "ab", "abc", "abcd", "bc", "c", "ababc", "aab", "aax", "cx", "12-ab", "1234-", "12345",
        "ABC", "é", "x", "yzxq", "xyzq", "color", "colour", "colouur", "abc", "a\nc", "1 2!", "aabc",
        "hello", "héllo", "hüllo", "Aéé", "+12.5", "-1.", "yes", "no", "y", "(()", "]x", "\\x", "aaa",
        "aaaa", "aa", "b", "aab", "ab",
    };
    for (size_t p = 0; p < sizeof pats / sizeof pats[0]; p++)
        for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
            int want = pcre_verdict(pats[p], texts[t]);
            int got = run(XI_GRAMMAR_REGEX, pats[p], texts[t]);
            CHECKF(want > -2 && got > -2, "/%s/ does not compile", pats[p]);
            CHECKF(want == got, "/%s/ on '%s': pcre2 %d, grammar %d", pats[p], texts[t], want, got);
        }
}

/* Chains of optional elements: the closure of a state reaches every (element, return frame)
 * pair along them, 42,000 here. It used to recurse once per reference (a stack overflow
 * under ASan) and look each pair up in a list (seconds); both found by fuzzing. */
TEST(test_grammar_regex_long_chains_of_optionals) {
    char pat[1024], text[800];
    int n = 0;
    for (int i = 0; i < 60; i++) pat[n++] = '(';
    n += snprintf(pat + n, sizeof pat - (size_t)n, "[8-c]?");
    for (int i = 0; i < 60; i++) n += snprintf(pat + n, sizeof pat - (size_t)n, ")?");
    snprintf(pat + n, sizeof pat - (size_t)n, "{700}");
    memset(text, '9', 700);
    text[700] = 0;
    CHECK_EQ(run(XI_GRAMMAR_REGEX, pat, text), 1);
    CHECK_EQ(run(XI_GRAMMAR_REGEX, pat, ""), 1);
    text[699] = 'z';
    CHECK_EQ(run(XI_GRAMMAR_REGEX, pat, text), -1);
    text[699] = '9';
    text[700] = '9';
    text[701] = 0;
    CHECK_EQ(run(XI_GRAMMAR_REGEX, pat, text), -1);
}

#define QMARKS "??????????????????????????????????????????????????????????????????"

TEST(test_grammar_regex_refuses_what_it_cannot_compile) {
    CHECK(compile_error(XI_GRAMMAR_REGEX, "(a)\\1", "backreferences"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "a(?=b)", "lookaround"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "\\bword", "word boundaries"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "a++", "possessive"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "(ab", "missing ')'"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "ab)", "unmatched ')'"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "[a-", "unterminated"));
    CHECK(compile_error(XI_GRAMMAR_REGEX, "*a", "nothing to repeat"));
    /* nested optional repetitions whose start state alone took over 11 s (found by fuzzing):
     * refused with a message instead */
    char pat[256];
    int n = snprintf(pat, sizeof pat, "[8-c]%.38sG???7%.61s{704},*{%.59s{704}?{352},*{oney1{1,",
                     QMARKS, QMARKS, QMARKS);
    CHECK(n > 0 && n < (int)sizeof pat);
    CHECK(compile_error(XI_GRAMMAR_REGEX, pat, "too complex"));
}

TEST(test_grammar_gbnf_as_llama_cpp_writes_it) {
    const char *g =
        "# a list of small words\n"
        "root ::= \"[\" ws item (\",\" ws item){0,3} \"]\"\n"
        "item ::= [a-z]{1,4} | \"\\\"\" [^\"\\n]* \"\\\"\"   # bare or quoted\n"
        "ws   ::= [ \\t]?\n"
        "  | \"\\n\"\n";
    CHECK_EQ(run(XI_GRAMMAR_GBNF, g, "[ab, \"x y\",\nc]"), 1);
    CHECK_EQ(run(XI_GRAMMAR_GBNF, g, "[abcd"), 0);
    CHECK_EQ(run(XI_GRAMMAR_GBNF, g, "[abcde"), -1);
    CHECK_EQ(run(XI_GRAMMAR_GBNF, g, "[a,b,c,d,e]"), -1);
    CHECK_EQ(run(XI_GRAMMAR_GBNF, g, "[\"é\"]"), 1);
    CHECK_EQ(run(XI_GRAMMAR_GBNF, "root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= [0-9]+ | \"(\" expr \")\"\n",
                 "(1+(2+3))+4"), 1);
    CHECK_EQ(run(XI_GRAMMAR_GBNF, "root ::= (\"a\" | \"b\")+ .", "abba☃"), 1);
    CHECK(compile_error(XI_GRAMMAR_GBNF, "root ::= foo\n", "'foo' is used but not defined"));
    CHECK(compile_error(XI_GRAMMAR_GBNF, "start ::= \"a\"\n", "no 'root'"));
    CHECK(compile_error(XI_GRAMMAR_GBNF, "root ::= \"a\n", "unterminated"));
    CHECK(compile_error(XI_GRAMMAR_GBNF, "root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"));
}

TEST(test_grammar_choice_is_one_of_the_strings) {
    const char *c = "[\"red\", \"green\", \"gr\\u00fcn\"]";
    CHECK_EQ(run(XI_GRAMMAR_CHOICE, c, "red"), 1);
    CHECK_EQ(run(XI_GRAMMAR_CHOICE, c, "gr"), 0);
    CHECK_EQ(run(XI_GRAMMAR_CHOICE, c, "grün"), 1);
    CHECK_EQ(run(XI_GRAMMAR_CHOICE, c, "blue"), -1);
    CHECK(compile_error(XI_GRAMMAR_CHOICE, "[]", "non-empty array"));
    CHECK(compile_error(XI_GRAMMAR_CHOICE, "[1]", "not a string"));
}

/* json_object: the same verdicts as the json_fsm recogniser it replaces */
TEST(test_grammar_json_object_agrees_with_json_fsm) {
    static const char *const docs[] = {
        "{}", " {}", "{\"a\":1}", "{\"a\": [1, -2.5e+3, 0, 0.25, 1E9, true, false, null]}",
        "{\"k\": {\"n\": {\"m\": []}}, \"s\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"}", "{\"北京\": \"晴 ☀️\"}",
        "{\"a\":-0}", "{ \"a\" : [ { } , [ ] ] }", "[]", "\"s\"", "1", "{a:1}", "{\"a\" 1}", "{\"a\":1,}",
        "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":tru }", "{\"a\":[1 2]}",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"\xff\"}", "{\"a\": {\"b\"",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        xi_json_fsm f;
        xi_json_fsm_init(&f);
        const int want = xi_json_fsm_feed(&f, docs[i], strlen(docs[i])) ? -1 : xi_json_fsm_done(&f);
        CHECKF(run(XI_GRAMMAR_JSON_OBJECT, "", docs[i]) == want, "%s: json_fsm says %d", docs[i], want);
    }
}

TEST(test_grammar_json_schema_objects_and_types) {
    const char *s = "{\"type\":\"object\",\"properties\":{"
                    "\"name\":{\"type\":\"string\",\"maxLength\":5},"
                    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
                    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",3]},\"minItems\":1,\"maxItems\":2},"
                    "\"ok\":{\"type\":\"boolean\"},"
                    "\"nick\":{\"type\":[\"string\",\"null\"]}},"
                    "\"required\":[\"name\",\"age\",\"tags\"]}";
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"Ann\",\"age\":42,\"tags\":[\"a\",3]}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{ \"name\": \"Ann\", \"age\": 120, \"tags\": [3], \"ok\": true, \"nick\": null }"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"Ann\",\"age\":42,\"tags\":[\"a\"],\"nick\":\"x\"}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"Ann\",\"age\":121"), -1);     /* above maximum */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"Ann\",\"age\":-1"), -1);      /* below minimum */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"Annabel\""), -1);             /* maxLength */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"age\":1"), -1);                         /* order, required */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"A\",\"age\":1,\"tags\":[]"), -1); /* minItems */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"A\",\"age\":1,\"tags\":[3,3,3"), -1); /* maxItems */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"A\",\"age\":1,\"tags\":[3],\"x\""), -1); /* no extras */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"name\":\"A\",\"age\":1,\"tags\":[\"c\"]"), -1); /* enum */
    /* optional properties only: any subset in order, commas right */
    const char *o = "{\"properties\":{\"a\":{\"const\":1},\"b\":{\"const\":2}},\"additionalProperties\":false}";
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, o, "{}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, o, "{\"b\":2}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, o, "{\"a\":1,\"b\":2}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, o, "{,"), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, o, "{\"a\":1,}"), -1);
    /* additionalProperties as a schema */
    const char *m = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}},\"additionalProperties\":{\"type\":\"integer\"}}";
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, m, "{\"x\":1,\"y\":-2}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, m, "{\"a\":null,\"x\":1}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, m, "{\"x\":true"), -1);
    /* numbers */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"number\"}", "-12.5e+3"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"number\"}", "01"), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"number\",\"minimum\":0,\"maximum\":10}", "9.99"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"number\",\"minimum\":0,\"maximum\":10}", "10.0"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"number\",\"minimum\":0,\"maximum\":10}", "10.5"), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\",\"exclusiveMinimum\":-5,\"exclusiveMaximum\":3}", "-4"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\",\"exclusiveMinimum\":-5,\"exclusiveMaximum\":3}", "-5"), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\",\"exclusiveMinimum\":-5,\"exclusiveMaximum\":3}", "3"), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\"}", "1234567890123456"), -1); /* 16 digits */
}

/* every integer in and around a range: the grammar agrees with arithmetic */
TEST(test_grammar_json_schema_integer_ranges_are_exact) {
    static const long long ranges[][2] = {{0, 0}, {7, 7}, {3, 47}, {-13, 205}, {-999, -10}, {100, 1099}, {9, 10}, {-1, 1}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        char schema[128], text[32];
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", ranges[r][0], ranges[r][1]);
        for (long long v = ranges[r][0] - 30; v <= ranges[r][1] + 30; v++) {
            snprintf(text, sizeof text, "%lld", v);
            const int in = v >= ranges[r][0] && v <= ranges[r][1];
            const int got = run(XI_GRAMMAR_JSON_SCHEMA, schema, text);
            CHECKF(in ? got == 1 : got != 1, "%s on %s: %d", schema, text, got);
        }
    }
}

TEST(test_grammar_json_schema_refs_strings_and_alternatives) {
    const char *s = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                    "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
                    "\"$ref\":\"#/$defs/node\"}";
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, s, "{\"v\":1,\"next\":{\"v\":2}}"), -1);
    const char *p = "{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}";
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, p, "\"AB-123\""), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, p, "\"AB-1234"), -1);
    /* a pattern's quote and backslash come out escaped */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"pattern\":\"a\\\"[\\\\\\\\]\"}", "\"a\\\"\\\\\""), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\""), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"date\"}", "\"2024-13"), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"é\\n\""), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"minLength\":2}", "\"a\""), -1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\"}", "\"\\ud800\""), -1); /* lone surrogate */
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"oneOf\":[{\"type\":\"integer\"},{\"const\":\"x\"}]}", "\"x\""), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"allOf\":[{\"type\":\"boolean\"}]}", "false"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{}", "[{\"a\":null}]"), 1);
    CHECK_EQ(run(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"object\"}", "{\"any\":[1]}"), 1);
}

TEST(test_grammar_json_schema_names_what_it_cannot_honour) {
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"not\":{}}", "unsupported keyword 'not'"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf'"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties'"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"hostname\"}", "'format' (hostname)"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"$ref\":\"#/$defs/missing\"}", "does not resolve"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"allOf\":[{},{}]}", "allOf"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"string\",\"pattern\":\"(a\"}", "regex"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems"));
    CHECK(compile_error(XI_GRAMMAR_JSON_SCHEMA, "{\"type\":", "not valid JSON"));
}

/* ---- the mask ---- */

typedef struct vocab_fixture {
    xi_tokenizer *tok;
    int vocab;
    uint32_t *off;
    char *bytes;
    uint8_t *usable;
    xi_token_table t;
} vocab_fixture;

static int load_vocab(vocab_fixture *v, const char *rel) {
    char err[256];
    memset(v, 0, sizeof *v);
    v->tok = xi_tokenizer_load(xi_test_data(rel), err, sizeof err);
    if (!v->tok) return -1;
    v->vocab = xi_tokenizer_vocab_size(v->tok);
    v->off = malloc(((size_t)v->vocab + 1) * sizeof *v->off);
    v->usable = calloc((size_t)v->vocab, 1);
    xi_buf all = {0};
    for (int i = 0; i < v->vocab; i++) {
        v->off[i] = (uint32_t)all.len;
        if (xi_tokenizer_is_special(v->tok, i)) continue;
        if (xi_token_bytes(v->tok, i, &all)) return -1;
        v->usable[i] = all.len > v->off[i];
    }
    v->off[v->vocab] = (uint32_t)all.len;
    v->bytes = all.data;
    return xi_token_table_init(&v->t, v->vocab, v->off, v->bytes, v->usable);
}

static void free_vocab(vocab_fixture *v) {
    xi_token_table_free(&v->t);
    free(v->off);
    free(v->bytes);
    free(v->usable);
    xi_tokenizer_free(v->tok);
}

/* Walk a text through the grammar and at every byte boundary where a state is reached compare
 * the cached mask with feeding each token to a copy of the state (the reference twin). */
static int mask_matches_reference(vocab_fixture *v, xi_grammar_kind kind, const char *src, const char *text,
                                  int *n_states) {
    char err[256];
    xi_grammar *g = xi_grammar_compile(kind, src, strlen(src), err, sizeof err);
    if (!g) return 0;
    uint8_t *allow = malloc((size_t)v->vocab);
    const size_t mem0 = xi_grammar_memory(g);
    xi_grammar_state s = {0}, t = {0};
    int ok = 1;
    const size_t n = strlen(text);
    for (size_t k = 0; k <= n && ok; k += 2 + k % 5) {
        xi_grammar_state_init(g, &s);
        if (xi_grammar_feed(g, &s, text, k)) {
            ok = 0;
            xi_test_fail(__FILE__, __LINE__, "'%s' refuses the first %zu bytes of %s", src, k, text);
            break;
        }
        const int count = xi_grammar_mask(g, &s, &v->t, allow);
        int ref = 0;
        for (int i = 0; i < v->vocab && ok; i++) {
            int want = 0;
            if (v->usable[i]) {
                xi_grammar_state_copy(&t, &s);
                want = !xi_grammar_feed(g, &t, v->bytes + v->off[i], v->off[i + 1] - v->off[i]);
            }
            ref += want;
            if (want != allow[i]) {
                ok = 0;
                xi_test_fail(__FILE__, __LINE__, "'%s' after %zu bytes of %s: token %d '%.*s' mask %d, fed %d", src, k,
                             text, i, (int)(v->off[i + 1] - v->off[i]), v->bytes + v->off[i], allow[i], want);
            }
        }
        if (ok && count != ref) ok = 0;
        (*n_states)++;
        xi_grammar_state_free(&s);
    }
    /* the caches are counted: at least one accept bitmap over the vocabulary */
    if (ok && xi_grammar_memory(g) < mem0 + (size_t)v->vocab / 8) {
        ok = 0;
        xi_test_fail(__FILE__, __LINE__, "memory %zu after masking, %zu before", xi_grammar_memory(g), mem0);
    }
    xi_grammar_state_free(&s);
    xi_grammar_state_free(&t);
    free(allow);
    xi_grammar_free(g);
    return ok;
}

TEST(test_grammar_mask_equals_trying_every_token_qwen) {
    vocab_fixture v;
    CHECK(load_vocab(&v, "tokenizers/qwen2.5") == 0);
    CHECK(v.vocab > 150000);
    int states = 0;
    CHECK(mask_matches_reference(&v, XI_GRAMMAR_JSON_SCHEMA,
                                 "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
                                 "\"n\":{\"type\":\"integer\",\"minimum\":-20,\"maximum\":300},"
                                 "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":3}},"
                                 "\"required\":[\"name\",\"n\",\"l\"]}",
                                 "{\"name\": \"Zoë \\\"Q\\\"\", \"n\": -7, \"l\": [1.5, -2e3]}", &states));
    CHECK(mask_matches_reference(&v, XI_GRAMMAR_REGEX, "(\\d{3}-){2}[a-f]+|[A-Z][a-z]*( [A-Z][a-z]*)?", "123-456-abc", &states));
    CHECK(mask_matches_reference(&v, XI_GRAMMAR_JSON_OBJECT, "", "{\"a\": [true, {\"b\": \"x y\"}], \"c\": 1}", &states));
    CHECK(mask_matches_reference(&v, XI_GRAMMAR_CHOICE, "[\"positive\", \"negative\", \"neutral\"]", "neutral", &states));
    CHECKF(states > 12, "%d states", states);
    free_vocab(&v);
}
