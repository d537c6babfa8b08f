/* server/oai: the OpenAI protocol without HTTP: request bodies of /v1/chat/completions and
 * /v1/completions parsed and validated into engine parameters, and errors in OpenAI's shape.
 * Bodies are untrusted: every field is type- and range-checked and unknown fields are
 * ignored, as OpenAI and vLLM do. Any thread; no engine calls. */
#ifndef XI_SERVER_OAI_H
#define XI_SERVER_OAI_H

#include <stddef.h>
#include <stdint.h>

#include "xinfer.h"

/* An error answer: HTTP status, OpenAI type/code and the parameter it is about. */
typedef struct xi_oai_error {
    int status;                     /* 400, 401, 404, 413, 503, 500 */
    char param[64];                 /* "" when not about one parameter */
    char message[512];
} xi_oai_error;

/* Fill e and return -1, so that `return xi_oai_fail(...)` is the idiom. param may be NULL. */
int xi_oai_fail(xi_oai_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The JSON body {"error": {"message", "type", "param", "code"}}, malloc'ed. Bytes of the
 * request quoted in the message that are not valid UTF-8 become U+FFFD, so a 4xx answer
 * never turns into a failure to build it. */
char *xi_oai_error_json(const xi_oai_error *e);

/* s[n] with every invalid UTF-8 sequence replaced by U+FFFD (as Python's errors="replace"
 * decodes): a token can be part of a character, a client can send any bytes, and JSON
 * strings must be valid UTF-8. A heap string, NULL when out of memory. */
char *xi_srv_utf8_clean(const char *s, size_t n, size_t *out_len);

/* One prompt of a request: text (tokenized by the server) or token ids. */
typedef struct xi_oai_prompt {
    char *text;                     /* owned, or NULL */
    int32_t *ids;                   /* [n_ids] owned, or NULL */
    int n_ids;
} xi_oai_prompt;

/* "required" and a named function hold the answer to the tools' schemas (server/structured). */
enum { XI_TOOL_CHOICE_UNSET, XI_TOOL_CHOICE_NONE, XI_TOOL_CHOICE_AUTO, XI_TOOL_CHOICE_REQUIRED,
       XI_TOOL_CHOICE_NAMED };

typedef struct xi_oai_request {
    int chat;                       /* 1: /v1/chat/completions, 0: /v1/completions */
    char *model;                    /* requested model name (owned) or NULL */
    int stream, include_usage;
    int continuous_usage;           /* stream_options.continuous_usage_stats: usage on every chunk */
    int return_token_ids;           /* answers carry prompt_token_ids and token_ids (vLLM) */
    int prompt_logprobs;            /* -1, or vLLM's prompt_logprobs: top k for each prompt token */
    char ignored[256];              /* the body's fields this server does not know, ", "-joined */
    int n;                          /* samples per prompt */
    int max_tokens;                 /* -1: until max_model_len */
    int echo;                       /* completions: prompt text precedes the output (chat: chat_echo) */
    int logprobs;                   /* -1 none, else top-k alternatives per token */
    int add_special_tokens;         /* completions 1, chat 0 (the template writes BOS) */
    /* chat */
    char *messages_json;            /* normalized messages array (owned) */
    char *tools_json;               /* tools array (owned) or NULL */
    char *kwargs_json;              /* chat_template_kwargs object (owned) or NULL */
    int tool_choice;                /* XI_TOOL_CHOICE_* */
    char *forced_tool;              /* the named function of tool_choice (owned) or NULL */
    int add_generation_prompt, continue_final_message;
    char *chat_echo;                /* echo: the last message's content, which the answer starts
                                       with (owned), or NULL */
    /* completions */
    xi_oai_prompt *prompts;         /* [n_prompts] owned */
    int n_prompts;
    /* sampling; the pointers below point into the owned arrays */
    xi_request_params params;
    char **stop;                    /* [n_stop] owned */
    int32_t *stop_token_ids;        /* [n] owned */
    xi_logit_bias *logit_bias;      /* [n] owned */
    int32_t *allowed_token_ids;     /* [n] owned */
    char *cache_salt;
    char *guide_src;                /* structured output's source (owned; params.guide_src) */
} xi_oai_request;

/* Parse a request body (len bytes, not NUL-terminated). Returns 0, or -1 with e filled
 * (400 naming the parameter). The request must be freed either way. */
int xi_oai_parse(xi_oai_request *r, int chat, const char *body, size_t len, xi_oai_error *e);
void xi_oai_request_free(xi_oai_request *r);

/* Parse a /tokenize body: {"prompt": str, "add_special_tokens"} or {"messages": [...],
 * "add_generation_prompt", "continue_final_message", "tools"}. */
typedef struct xi_oai_tokenize {
    char *model;
    char *prompt;                   /* owned, or NULL when messages_json is set */
    char *messages_json, *tools_json;
    char *kwargs_json;              /* chat_template_kwargs object (owned) or NULL */
    int add_special_tokens, add_generation_prompt, continue_final_message;
    int return_token_strs;          /* answer the tokens' vocabulary spellings too */
} xi_oai_tokenize;
int xi_oai_parse_tokenize(xi_oai_tokenize *t, const char *body, size_t len, xi_oai_error *e);
void xi_oai_tokenize_free(xi_oai_tokenize *t);

/* Parse a /detokenize body {"tokens": [ids]}: ids malloc'ed, count returned, -1 on error. */
int xi_oai_parse_detokenize(const char *body, size_t len, int32_t **ids, char **model,
                            xi_oai_error *e);

/* POST /invocations (SageMaker's route): which API the body is a request for, by its fields
 * as vLLM tells them apart: "messages" chat, "prompt" completions, "input" embeddings (a
 * pooling model only). -1 when none fits. */
enum { XI_OAI_API_CHAT, XI_OAI_API_COMPLETIONS, XI_OAI_API_EMBEDDINGS };
int xi_oai_invocation_api(const char *body, size_t len, int pooling);

/* Constant-time check of an "Authorization" header value ("Bearer KEY") against keys:
 * the time taken depends on neither where the strings differ nor which key matches. */
int xi_oai_auth_ok(const char *header, const char *const *keys, int n_keys);

#endif
