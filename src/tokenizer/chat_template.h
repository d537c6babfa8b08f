/* chat_template: render a model's Jinja chat template the way transformers'
 * apply_chat_template (and so vLLM) does. Parse once, render from any thread.
 *
 * The template sees what transformers passes: messages (the OpenAI messages array as given),
 * tools (the tools array, or none when absent: transformers passes tools=None), documents
 * (none unless given in extra_json), add_generation_prompt, bos_token and eos_token (left
 * undefined when NULL, as transformers omits unset special tokens), any extra variables
 * (chat_template_kwargs), raise_exception(msg), and strftime_now(fmt) unless disabled. strftime_now formats the local date and time; set env
 * XINFER_TEMPLATE_DATE=YYYY-MM-DD to pin the date (midnight) for reproducible prompts.
 *
 * Errors (template syntax, runtime errors, raise_exception, limits) come back as NULL and one
 * line in err; a template's own raise_exception message reads "chat template: <message>". */
#ifndef XI_CHAT_TEMPLATE_H
#define XI_CHAT_TEMPLATE_H

#include <stddef.h>

typedef struct xi_chat_template xi_chat_template;

/* Parse a template source (UTF-8). err: "chat template line N: ..." on a syntax error,
 * an unknown filter/test or an unsupported tag. */
xi_chat_template *xi_chat_template_parse(const char *source, char *err, size_t errlen);
void xi_chat_template_free(xi_chat_template *t);

typedef struct xi_chat_render_params {
    const char *messages_json;      /* JSON array of messages (required) */
    const char *tools_json;         /* JSON array of tools, or NULL */
    const char *extra_json;         /* JSON object of extra template variables, or NULL */
    int add_generation_prompt;
    /* vLLM / transformers: render without the generation prompt, then cut the text right
     * after the last occurrence of the final message's (stripped) content, so the model
     * continues that message. Excludes add_generation_prompt. */
    int continue_final_message;
    const char *bos_token;          /* NULL: undefined in the template */
    const char *eos_token;          /* NULL: undefined in the template */
    int no_strftime_now;            /* leave strftime_now undefined (as older transformers) */
    size_t max_output;              /* 0: 16 MiB */
} xi_chat_render_params;

/* Returns the prompt text (malloc'ed, NUL-terminated) or NULL with err. */
char *xi_chat_template_render_ex(const xi_chat_template *t, const xi_chat_render_params *p,
                                 char *err, size_t errlen);

/* The common case: messages, optional tools, the generation prompt flag and special tokens. */
char *xi_chat_template_render(const xi_chat_template *t, const char *messages_json,
                              const char *tools_json, int add_generation_prompt,
                              const char *bos_token, const char *eos_token, char *err,
                              size_t errlen);

#endif
