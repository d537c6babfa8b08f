/* sample/json_fsm: is this byte string a prefix of a JSON object? A hand-written recogniser,
 * independent of the grammar engine (sample/grammar) that now guides response_format
 * {"type": "json_object"}: the tests hold that grammar to this automaton's verdicts.
 *
 * RFC 8259, with the root an object. Limits that keep a guided model from wandering: nesting
 * up to XI_JSON_MAX_DEPTH, at most XI_JSON_MAX_WS whitespace bytes in a row between tokens
 * (any amount after the root closes), no control characters in strings, strings valid UTF-8,
 * numbers that fit a double (at most XI_JSON_MAX_INT_DIGITS integer digits and a two-digit
 * exponent, so no client's parser overflows).
 * The state is a small value: copy it to try bytes without committing them. Pure, any
 * thread. */
#ifndef XI_JSON_FSM_H
#define XI_JSON_FSM_H

#include <stddef.h>
#include <stdint.h>

#define XI_JSON_MAX_DEPTH 32
#define XI_JSON_MAX_WS 16
#define XI_JSON_MAX_INT_DIGITS 200

typedef struct xi_json_fsm {
    uint32_t stack;  /* bit d: container at depth d is an object (1) or an array (0) */
    uint8_t depth;   /* open containers */
    uint8_t st;      /* what comes next (json_fsm.c) */
    uint8_t sub;     /* inside a token: literal, escape, number or UTF-8 progress */
    uint8_t ws;      /* whitespace bytes in a row */
    uint8_t key;     /* the string being read is an object key */
    uint8_t digits;  /* digits so far in the number's integer part, then its exponent */
} xi_json_fsm;

void xi_json_fsm_init(xi_json_fsm *f);
/* Feed n bytes: 0 when text so far is still a prefix of a JSON object (f advanced), -1 when
 * not (f then holds an unspecified state: feed a copy to test). */
int xi_json_fsm_feed(xi_json_fsm *f, const char *bytes, size_t n);
/* 1 when the root object has closed. */
int xi_json_fsm_done(const xi_json_fsm *f);

#endif
