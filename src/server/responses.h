/* server/responses: POST /v1/responses (OpenAI's Responses API) as vLLM serves it, on top
 * of the chat completion job (completion_job.h):
 *
 *   request   `input` (a string or items: messages with text parts, function_call and
 *             function_call_output), `instructions` (a system message first),
 *             `max_output_tokens`, temperature/top_p/top_k/seed, function `tools` (flat, as
 *             the Responses API writes them) and `tool_choice`, `text.format` json_schema /
 *             json_object (the structured-output fields), `stream`. It is rewritten into a
 *             chat completion body, so it meets exactly the chat endpoint's checks.
 *   answer    a `response` object whose `output` holds a reasoning item (from the reasoning
 *             parser), a message item with one output_text part, and function_call items;
 *             streamed as typed SSE events (response.created, response.in_progress,
 *             response.output_item.added, response.content_part.added,
 *             response.output_text.delta, ... .done, response.completed).
 *   store     responses are not stored (vLLM's default without its store switch): `store` is
 *             answered false, and previous_response_id or background is a 400.
 *
 * The output is built by feeding the parsed parts of the answer in order (xi_resp_add);
 * streaming, each step appends its events to a buffer. No engine calls, any thread. */
#ifndef XI_SERVER_RESPONSES_H
#define XI_SERVER_RESPONSES_H

#include <jansson.h>
#include <stddef.h>

#include "base/base.h"
#include "server/oai.h"

typedef struct xi_resp xi_resp;

/* Read a Responses request body. Returns the state and *chat_body (a chat completion request,
 * malloc'ed), or NULL with e filled (400 naming the field). */
xi_resp *xi_resp_parse(const char *body, size_t len, char **chat_body, xi_oai_error *e);
void xi_resp_free(xi_resp *r);

/* Where streamed events go: a buffer they are appended to; NULL when the answer is not
 * streamed (nothing is written then). */
typedef struct xi_resp_sink {
    xi_buf *buf;
} xi_resp_sink;

/* The response's identity; streaming, response.created and response.in_progress. */
void xi_resp_begin(xi_resp *r, const char *id, long created, const char *model, xi_resp_sink out);
/* The next parts of the answer, in order: reasoning text, content text and finished tool
 * calls (OpenAI chat tool_calls entries with ids, borrowed; or NULL). */
void xi_resp_add(xi_resp *r, const char *reasoning, size_t rlen, const char *content, size_t clen,
                 const json_t *calls, xi_resp_sink out);
/* The end: closes the open item and returns the response object (new reference);
 * streaming, response.completed carries it. length: cut short by max_output_tokens. */
json_t *xi_resp_end(xi_resp *r, int length, int input_tokens, int cached_tokens, int output_tokens,
                    xi_resp_sink out);

#endif
