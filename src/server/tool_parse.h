/* server/tool_parse: tool calls out of generated text, as vLLM's --tool-call-parser does.
 *
 *   hermes       (Qwen2.5, Qwen3, NousResearch Hermes; what their chat templates ask for):
 *                each call is <tool_call>{"name": "...", "arguments": {...}}</tool_call>, the
 *                last one possibly unclosed when generation ended; the text before the first
 *                <tool_call> is the message's content.
 *   llama3_json  (Llama 3.1 / 3.2 / 3.3): the whole answer is one or more objects
 *                {"name": "...", "parameters": {...}} separated by ';' (<|python_tag|> is a
 *                special token, gone from the text); there is no content then.
 * When any call is not a JSON object with a string "name" and its arguments, the whole text
 * stays content, as in vLLM. `parser` is a name xi_tool_parser_supported accepts. Pure
 * functions, any thread. */
#ifndef XI_TOOL_PARSE_H
#define XI_TOOL_PARSE_H

#include <jansson.h>
#include <stddef.h>

/* 1 when name is a parser this build has. */
int xi_tool_parser_supported(const char *name);
/* The names xi_tool_parser_supported accepts, for messages. */
const char *xi_tool_parser_names(void);

/* Bytes of text[0, len) that are content whatever comes next: hermes, all of it before the
 * first "<tool_call>", less a tail that could be the start of one; llama3_json, none while
 * the answer is blank or opens with '{', else all. */
size_t xi_tool_content_prefix(const char *parser, const char *text, size_t len);

/* The calls in text as OpenAI tool_calls entries {"type": "function", "function": {"name",
 * "arguments" (a JSON string)}}, without ids, or NULL when there are none (or one is
 * malformed). *content_len is then the bytes before the first call. */
json_t *xi_tool_calls_parse(const char *parser, const char *text, size_t len, size_t *content_len);

/* A streamed answer's state, zeroed before its first step: the content sent, and what was
 * searched already, so that each step looks only at the new bytes (a stream costs time
 * linear in its length; the calls are parsed once, at the end). */
typedef struct xi_tool_stream {
    size_t sent;                    /* content bytes sent */
    size_t scanned;                 /* hermes: no <tool_call> starts before this; llama3_json: blanks */
    size_t open_at;                 /* hermes: where the first <tool_call> starts, when found */
    int found;
} xi_tool_stream;

/* One streaming step over a choice's text so far (the same text each step, grown):
 * text[st->sent, st->sent + *n) is the content to send now (then sent advances past it).
 * Before the end, content stops where a <tool_call> may begin; at the end (final) the calls
 * are parsed and returned, and the content is what precedes them, or all the text when there
 * are none. */
json_t *xi_tool_stream_step(const char *parser, xi_tool_stream *st, const char *text, size_t len,
                            int final, size_t *n);

#endif
