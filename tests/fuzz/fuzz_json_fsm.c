/* Fuzz the JSON-object recogniser that guides response_format json_object (sample/json_fsm).
 * Sound: whatever it calls a complete object, jansson parses as an object (integers read as
 * reals: past 64 bits is a limit of jansson, not of JSON). Prefix-closed:
 * every prefix of accepted bytes is accepted, byte by byte as in one call. */
#include <jansson.h>

#include "fuzz_util.h"
#include "sample/json_fsm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    xi_json_fsm whole, step;
    xi_json_fsm_init(&whole);
    xi_json_fsm_init(&step);
    const int ok = xi_json_fsm_feed(&whole, s, size) == 0;
    size_t accepted = 0;
    while (accepted < size && xi_json_fsm_feed(&step, s + accepted, 1) == 0) accepted++;
    if (ok != (accepted == size)) fuzz_fail("one call %d, byte by byte %zu of %zu", ok, accepted, size);
    if (ok && xi_json_fsm_done(&whole)) {
        json_error_t e;
        json_t *j = json_loadb(s, size, JSON_DECODE_INT_AS_REAL, &e);
        if (!json_is_object(j)) fuzz_fail("accepted as an object, jansson says: %s", e.text);
        json_decref(j);
    }
    return 0;
}
