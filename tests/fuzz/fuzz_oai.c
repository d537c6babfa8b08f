/* Fuzz the OpenAI request parsing of the server (no HTTP, no engine). Input byte 0 picks the
 * parser: chat completions, completions, /tokenize, /detokenize, or the Authorization check;
 * the rest is the body (or header). A rejected body must come back as a 4xx/5xx error with a
 * message, and its OpenAI error JSON must be buildable. An accepted chat request's normalized
 * messages and tools then go through the Qwen2.5 chat template, as the server does. */
#include "base/base.h"
#include "fuzz_util.h"
#include "server/oai.h"
#include "tokenizer/chat_template.h"

static xi_chat_template *qwen;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[512], err[256];
    fuzz_data_path("chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja", path, sizeof path);
    char *src = xi_read_file(path, NULL, err, sizeof err);
    if (!src) fuzz_fail("%s (set XINFER_TEST_DATA)", err);
    qwen = xi_chat_template_parse(src, err, sizeof err);
    if (!qwen) fuzz_fail("%s: %s", path, err);
    free(src);
    return 0;
}

static void check_error(const xi_oai_error *e) {
    if (e->status < 400 || e->status > 599) fuzz_fail("error status %d", e->status);
    if (!e->message[0]) fuzz_fail("error without a message");
    char *j = xi_oai_error_json(e);
    if (!j) fuzz_fail("error JSON is NULL");
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    xi_oai_error e;
    memset(&e, 0, sizeof e);
    switch (data[0] % 5) {
    case 0:
    case 1: {
        xi_oai_request r;
        int chat = data[0] % 5 == 0;
        if (xi_oai_parse(&r, chat, body, len, &e) < 0) {
            check_error(&e);
        } else {
            if (r.chat != chat || r.n < 1) fuzz_fail("chat %d n %d", r.chat, r.n);
            if (chat && !r.messages_json) fuzz_fail("chat request without messages");
            if (chat) {
                xi_chat_render_params p = {
                    .messages_json = r.messages_json,
                    .tools_json = r.tools_json,
                    .add_generation_prompt = r.add_generation_prompt,
                    .continue_final_message = r.continue_final_message,
                    .max_output = 1 << 20,
                };
                char err[256] = "";
                char *prompt = xi_chat_template_render_ex(qwen, &p, err, sizeof err);
                if (!prompt && !err[0]) fuzz_fail("render failed without an error line");
                free(prompt);
            }
            if (!chat && r.n_prompts < 1) fuzz_fail("completion without a prompt");
            for (int i = 0; i < r.n_prompts; i++)
                if (!r.prompts[i].text && !r.prompts[i].ids && r.prompts[i].n_ids)
                    fuzz_fail("prompt %d has ids count without ids", i);
        }
        xi_oai_request_free(&r);
        break;
    }
    case 2: {
        xi_oai_tokenize t;
        if (xi_oai_parse_tokenize(&t, body, len, &e) < 0)
            check_error(&e);
        else if (!t.prompt && !t.messages_json)
            fuzz_fail("tokenize without prompt or messages");
        xi_oai_tokenize_free(&t);
        break;
    }
    case 3: {
        int32_t *ids = NULL;
        char *model = NULL;
        int n = xi_oai_parse_detokenize(body, len, &ids, &model, &e);
        if (n < 0) check_error(&e);
        free(ids);
        free(model);
        break;
    }
    default: {
        char *h = malloc(len + 1);
        memcpy(h, body, len);
        h[len] = 0;
        const char *keys[2] = {"sk-test", "secret key 2"};
        int ok = xi_oai_auth_ok(h, keys, 2);
        int want = !strcmp(h, "Bearer sk-test") || !strcmp(h, "Bearer secret key 2");
        if (ok != want) fuzz_fail("auth said %d for \"%s\"", ok, h);
        free(h);
        break;
    }
    }
    return 0;
}
