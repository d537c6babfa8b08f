/* Regressions for bugs the fuzz harnesses of tests/fuzz found (their minimised inputs also
 * live in tests/fuzz/corpus/<target>/ and are replayed by .ci/fuzz.sh). Each test states the
 * property that broke. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* fuzz_tokenizer_text, fuzz_detok_ids: decoding no bytes at all (no ids, or only skipped
 * special tokens) did pointer arithmetic on a NULL buffer (UBSan: applying zero offset to
 * null pointer); it must give an empty string. */
TEST(test_fuzz_decode_of_nothing_is_empty_string) {
    char err[256];
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data("models/stories260K"), err, sizeof err);
    CHECKF(t, "%s", err);
    size_t len = 99;
    char *s = xi_tokenizer_decode(t, NULL, 0, 0, &len, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(len, 0);
    CHECK_STR(s, "");
    free(s);
    int32_t bos = xi_tokenizer_bos_id(t);
    CHECK(bos >= 0 && xi_tokenizer_is_special(t, bos));
    s = xi_tokenizer_decode(t, &bos, 1, 1, &len, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(len, 0);
    CHECK_STR(s, "");
    free(s);
    xi_tokenizer_free(t);
}
