/* Fuzz the Jinja chat-template engine with arbitrary template source. Input:
 *   template NUL messages JSON NUL extra-variables JSON
 * (messages default to a small system/user/assistant conversation). Parsing and rendering
 * either succeed or return an error line; a render never exceeds its output limit. */
#include "fuzz_util.h"
#include "tokenizer/chat_template.h"

static const char default_messages[] =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi "
    "there\"},{\"role\":\"assistant\",\"content\":\"Hello!\",\"tool_calls\":[{\"type\":"
    "\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}}]},{\"role\":\"tool\","
    "\"content\":[{\"type\":\"text\",\"text\":\"42\"}]}]";

#define MAX_OUT 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    char *parts[3];
    size_t lens[3];
    int n = fuzz_split(data, size, parts, lens, 3);
    char err[256] = "";
    xi_chat_template *t = xi_chat_template_parse(parts[0], err, sizeof err);
    if (!t) {
        if (!err[0]) fuzz_fail("parse failed without an error line");
        fuzz_parts_free(parts, n);
        return 0;
    }
    for (int mode = 0; mode < 2; mode++) {
        xi_chat_render_params p = {
            .messages_json = n > 1 && lens[1] ? parts[1] : default_messages,
            .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
            .extra_json = n > 2 ? parts[2] : NULL,
            .add_generation_prompt = !mode,
            .continue_final_message = mode,
            .bos_token = "<s>",
            .eos_token = "</s>",
            .no_strftime_now = mode,
            .max_output = MAX_OUT,
        };
        err[0] = 0;
        char *out = xi_chat_template_render_ex(t, &p, err, sizeof err);
        if (out) {
            if (strlen(out) > MAX_OUT) fuzz_fail("render output %zu > limit", strlen(out));
            free(out);
        } else if (!err[0]) {
            fuzz_fail("render failed without an error line");
        }
    }
    xi_chat_template_free(t);
    fuzz_parts_free(parts, n);
    return 0;
}
