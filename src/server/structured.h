/* server/structured: the request fields that ask for structured output, read into the
 * engine's guide (xi_request_params.guide / guide_src / guide_param), as vLLM reads them:
 *
 *   response_format      {"type": "json_object"} or {"type": "json_schema", "json_schema":
 *                        {"name", "schema", "strict"}} ("text": none)
 *   structured_outputs   {"json": schema | "regex": str | "choice": [str] | "grammar": GBNF |
 *                        "json_object": true}
 *   guided_json, guided_regex, guided_choice, guided_grammar   (the older names)
 *   tool_choice          "required": a JSON array of {"name", "parameters"} calls, one of the
 *                        tools each; {"type": "function", "function": {"name"}}: that
 *                        function's arguments, held to its parameters schema
 *
 * At most one may be given. The grammar itself is compiled by the engine at submit, so a
 * schema it cannot honour is a 400 naming the field and the keyword. Forced tool calls are
 * parsed back out of the text into OpenAI tool_calls here. Pure, any thread. */
#ifndef XI_SERVER_STRUCTURED_H
#define XI_SERVER_STRUCTURED_H

#include <jansson.h>
#include <stddef.h>

#include "server/oai.h"

/* Read the structured-output fields of body into r. 0, or -1 with e filled. */
int xi_structured_parse(xi_oai_request *r, json_t *body, xi_oai_error *e);
/* tool_choice "required" or a named function (c): the guide from r->tools_json. */
int xi_structured_tool_choice(xi_oai_request *r, json_t *c, xi_oai_error *e);

/* The forced calls in a finished answer as OpenAI tool_calls entries (no ids), or NULL when
 * the text is not what the guide allowed (cut short by max_tokens, say). */
json_t *xi_structured_tool_calls(const xi_oai_request *r, const char *text, size_t len);

#endif
