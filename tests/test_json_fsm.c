/* The JSON-object recogniser behind response_format json_object (sample/json_fsm). */
#include <stdlib.h>

#include "sample/json_fsm.h"
#include "test.h"

/* -1: rejected; 0: a prefix; 1: a complete object */
static int run(const char *s) {
    xi_json_fsm f;
    xi_json_fsm_init(&f);
    if (xi_json_fsm_feed(&f, s, strlen(s))) return -1;
    return xi_json_fsm_done(&f);
}

TEST(test_json_fsm_complete_objects) {
    static const char *const docs[] = {
        "{}", " {}\n", "{\"a\":1}", "{\"a\": [1, -2.5e+3, 0, 0.25, 1E9, true, false, null]}",
        "{\"k\": {\"n\": {\"m\": []}}, \"s\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"}",
        "{\"北京\": \"晴 ☀️\"}", "{\"a\":-0}", "{ \"a\" : [ { } , [ ] ] }",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) CHECKF(run(docs[i]) == 1, "%s", docs[i]);
}

TEST(test_json_fsm_prefixes_are_accepted_and_not_done) {
    const char *doc = "{\"a\": [1.5, {\"b\": \"x\\u00e9y\"}, true], \"c\": -12e-3}";
    char buf[128];
    const size_t n = strlen(doc);
    for (size_t k = 0; k < n; k++) {
        memcpy(buf, doc, k);
        buf[k] = 0;
        CHECKF(run(buf) == 0, "prefix '%s'", buf);
    }
    CHECK(run(doc) == 1);
}

TEST(test_json_fsm_rejects_what_is_not_an_object) {
    static const char *const bad[] = {
        "[]", "\"s\"", "1", "x", "{a:1}", "{\"a\" 1}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1.}",
        "{\"a\":.5}", "{\"a\":1e}", "{\"a\":tru }", "{\"a\":nul}x", "{\"a\":[1 2]}", "{\"a\":[}",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"\xff\"}",
        "{\"a\":\"\xc3(\"}", "{}}", "{} {}", "{\"a\":1]", "{\"a\":[1}", "{\"a\":+1}", "{\"a\":--1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECKF(run(bad[i]) == -1, "%s", bad[i]);
}

TEST(test_json_fsm_limits_depth_and_whitespace_runs) {
    char deep[80] = "";
    for (int i = 0; i < XI_JSON_MAX_DEPTH; i++) strcat(deep, i ? "[" : "{\"a\":");
    CHECK(run(deep) == 0);
    strcat(deep, "[");
    CHECK(run(deep) == -1);
    char ws[64] = "{";
    memset(ws + 1, ' ', XI_JSON_MAX_WS);
    ws[1 + XI_JSON_MAX_WS] = 0;
    CHECK(run(ws) == 0);
    strcat(ws, " ");
    CHECK(run(ws) == -1);
    /* strings may hold any amount of it, and so may the end */
    char s[128] = "{\"a\":\"";
    memset(s + 6, ' ', 60);
    strcpy(s + 66, "\"}");
    memset(s + 68, '\n', 50);
    s[118] = 0;
    CHECK(run(s) == 1);
}

TEST(test_json_fsm_numbers_stay_within_a_double) {
    CHECK(run("{\"a\":1e99}") == 1);
    CHECK(run("{\"a\":-1E+05}") == 1);
    CHECK(run("{\"a\":1e100}") == -1);
    CHECK(run("{\"a\":5e+444}") == -1);
    char big[300] = "{\"a\":";
    memset(big + 5, '9', XI_JSON_MAX_INT_DIGITS);
    strcpy(big + 5 + XI_JSON_MAX_INT_DIGITS, ".5e99}");
    CHECK(run(big) == 1);
    big[5 + XI_JSON_MAX_INT_DIGITS] = '9';
    CHECK(run(big) == -1);
}

TEST(test_json_fsm_copies_try_bytes_without_committing) {
    xi_json_fsm f, t;
    xi_json_fsm_init(&f);
    CHECK(xi_json_fsm_feed(&f, "{\"a\":", 5) == 0);
    t = f;
    CHECK(xi_json_fsm_feed(&t, "}", 1) == -1); /* a value is due */
    t = f;
    CHECK(xi_json_fsm_feed(&t, " 12}", 4) == 0 && xi_json_fsm_done(&t));
    CHECK(!xi_json_fsm_done(&f));
    CHECK(xi_json_fsm_feed(&f, "\"x\"}", 4) == 0 && xi_json_fsm_done(&f));
}

/* fuzz_json_fsm: byte sequences jansson refuses were accepted inside strings: overlong forms
 * ("\xe0\x91\x8a"), UTF-16 surrogates in UTF-8 ("\xed\xa0\x80") and past U+10FFFF
 * ("\xf4\x90\x80\x80"), and the escapes \u0000 and lone or paired surrogates. Their
 * neighbours at the edges of each range stay accepted. */
TEST(test_json_fsm_strings_hold_only_what_jansson_decodes) {
    static const char *const bad[] = {
        "{\"a:4} EE\xe0\x91\x8a\"}", "{\"a\":\"\xe0\x9f\xbf\"}", "{\"a\":\"\xed\xa0\x80\"}",
        "{\"a\":\"\xf0\x8f\xbf\xbf\"}", "{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":\"\\u0000\"}",
        "{\"a\":\"\\ud800\"}", "{\"a\":\"\\uDFFF\"}", "{\"a\":\"\\ud83d\\ude00\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECKF(run(bad[i]) == -1, "%s", bad[i]);
    static const char *const good[] = {
        "{\"a\":\"\xe0\xa0\x80\"}", "{\"a\":\"\xed\x9f\xbf\"}", "{\"a\":\"\xee\x80\x80\"}",
        "{\"a\":\"\xf0\x90\x80\x80\"}", "{\"a\":\"\xf4\x8f\xbf\xbf\"}", "{\"a\":\"\\u0001\"}",
        "{\"a\":\"\\ud7ff\"}", "{\"a\":\"\\ue000\"}", "{\"a\":\"\\u0100\"}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) CHECKF(run(good[i]) == 1, "%s", good[i]);
}
