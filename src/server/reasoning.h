/* server/reasoning: a chat answer's thinking split from its content, as vLLM's
 * --reasoning-parser does (the reasoning goes out as "reasoning_content").
 *
 *   deepseek_r1  (DeepSeek-R1 and its Qwen2 / Llama distills, whose template opens <think> in
 *                the prompt): everything up to </think> is reasoning, a leading <think> is
 *                dropped; no </think> at all means the answer was all reasoning.
 *   qwen3        (Qwen3, QwQ): reasoning only when the answer starts with <think>, then as
 *                deepseek_r1; otherwise all of it is content (thinking switched off).
 * A thought cut off by max_tokens is reasoning with no content for both, streamed or not
 * (vLLM's non-streaming qwen3 parser returns it as content instead). Pure, any thread. */
#ifndef XI_REASONING_H
#define XI_REASONING_H

#include <stddef.h>

/* 1 when name is a parser this build has. */
int xi_reasoning_parser_supported(const char *name);
/* The names xi_reasoning_parser_supported accepts, for messages. */
const char *xi_reasoning_parser_names(void);

/* Where the parts of text[0, len) lie so far: reasoning is [r_begin, r_end) and content
 * starts at c_begin (len while the thought goes on). Before the end (final == 0) r_end stops
 * short of a tail that may still become </think>, and nothing is decided while the text could
 * still become a leading <think>; both only ever move forward as text grows. has_reasoning
 * is 0 when the answer has no reasoning part at all. */
typedef struct xi_reasoning_span {
    size_t r_begin, r_end, c_begin;
    int has_reasoning;
} xi_reasoning_span;

void xi_reasoning_scan(const char *parser, const char *text, size_t len, int final,
                       xi_reasoning_span *out);

/* A streamed answer's split so far, zeroed before its first step. What was decided and
 * searched is kept, so each step looks only at the bytes that are new (and a tag's length
 * before them): a stream costs time linear in its length, not quadratic. */
typedef struct xi_reasoning_stream {
    int phase;                      /* undecided, thinking, thought ended, no reasoning */
    size_t r_begin;                 /* where the reasoning starts (after a leading <think>) */
    size_t r_sent;                  /* end of the reasoning sent */
    size_t scanned;                 /* no </think> starts before this */
    size_t c_begin;                 /* where the content starts, once the thought ended */
} xi_reasoning_stream;

/* One streaming step over the text so far (the same text each step, grown): the reasoning to
 * send now is text[start, st->r_sent) (the return value is start; r_sent advances, never
 * back), and *c_begin is where the content part starts (len while the thought goes on).
 * Streamed in any pieces, the parts end up where xi_reasoning_scan puts them. */
size_t xi_reasoning_stream_step(const char *parser, xi_reasoning_stream *st, const char *text, size_t len,
                                int final, size_t *c_begin);

#endif
