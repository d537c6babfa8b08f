/* Fuzz the structured-output grammar compilers and matcher (sample/grammar*). The input is
 * a mode byte, a source (regex, GBNF, JSON Schema) and, after a NUL, a text fed byte by byte.
 * Properties: feeding the text in one call and byte by byte agree (the accepted bytes are
 * always a prefix the grammar allows); for regexes PCRE2 is the oracle: the text is a proper
 * prefix of a match exactly when the grammar accepts it unfinished, a full match exactly when
 * the grammar calls it complete; a json_object or JSON Schema text called complete parses as
 * JSON (an object for json_object). Sources the compilers refuse are fine; crashes are not. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>

#include "fuzz_util.h"
#include "sample/grammar.h"

/* PCRE2: 1 full match, 0 a proper prefix of one, -1 neither, -2 cannot tell */
static int pcre_verdict(const char *pattern, size_t plen, const char *text, size_t n) {
    char *wrapped = malloc(plen + 16);
    if (!wrapped) abort();
    memcpy(wrapped, "(?:", 3);
    memcpy(wrapped + 3, pattern, plen);
    memcpy(wrapped + 3 + plen, ")\\z", 4);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)wrapped, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_UTF, &ec, &eo, NULL);
    free(wrapped);
    if (!re) return -2;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc[2];
    for (int k = 0; k < 2; k++) rc[k] = pcre2_match(re, (PCRE2_SPTR)text, n, 0, k ? PCRE2_PARTIAL_HARD : 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (rc[0] <= PCRE2_ERROR_UTF8_ERR1 && rc[0] >= PCRE2_ERROR_UTF8_ERR21) return -2; /* text not UTF-8 */
    if (rc[0] >= 0) return 1;
    if (rc[0] != PCRE2_ERROR_NOMATCH) return -2; /* match limits */
    return rc[1] == PCRE2_ERROR_PARTIAL ? 0 : n ? -1 : -2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    const int mode = data[0] % 5;
    char *parts[2];
    size_t lens[2];
    const int np = fuzz_split(data + 1, size - 1, parts, lens, 2);
    const char *text = np > 1 ? parts[1] : "";
    const size_t n = np > 1 ? lens[1] : 0;
    static const xi_grammar_kind kinds[] = {XI_GRAMMAR_REGEX, XI_GRAMMAR_GBNF, XI_GRAMMAR_JSON_SCHEMA,
                                            XI_GRAMMAR_JSON_OBJECT, XI_GRAMMAR_CHOICE};
    char err[256];
    xi_grammar *g = lens[0] > 512 ? NULL : xi_grammar_compile(kinds[mode], parts[0], lens[0], err, sizeof err);
    if (g) {
        xi_grammar_state whole, step;
        if (xi_grammar_state_init(g, &whole) || xi_grammar_state_init(g, &step)) abort();
        const int ok = xi_grammar_feed(g, &whole, text, n) == 0;
        size_t accepted = 0;
        while (accepted < n && xi_grammar_feed(g, &step, text + accepted, 1) == 0) accepted++;
        if (ok != (accepted == n)) fuzz_fail("one call %d, byte by byte %zu of %zu", ok, accepted, n);
        const int done = ok && xi_grammar_done(&whole);
        if (kinds[mode] == XI_GRAMMAR_REGEX) {
            const int want = pcre_verdict(parts[0], lens[0], text, n);
            const int got = !ok ? -1 : done ? 1 : 0;
            /* a full match that can also go on is both: PCRE2 reports the full match */
            if (want > -2 && want != got) fuzz_fail("/%s/ on '%.*s': pcre2 %d, grammar %d", parts[0], (int)n, text, want, got);
        }
        if (done && (kinds[mode] == XI_GRAMMAR_JSON_OBJECT || kinds[mode] == XI_GRAMMAR_JSON_SCHEMA)) {
            json_error_t je;
            json_t *j = json_loadb(text, n, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);
            if (!j || (kinds[mode] == XI_GRAMMAR_JSON_OBJECT && !json_is_object(j)))
                fuzz_fail("complete but jansson says: %s", je.text);
            json_decref(j);
        }
        xi_grammar_state_free(&whole);
        xi_grammar_state_free(&step);
        xi_grammar_free(g);
    }
    fuzz_parts_free(parts, np);
    return 0;
}
