/* Fuzz rendering of the real chat templates (Qwen2.5, Llama-3.1, Llama-3.2) with arbitrary
 * request data. Input byte 0 picks the template and flags; then
 *   messages JSON NUL tools JSON NUL extra-variables JSON (absent parts are NULL).
 * Rendering either succeeds or returns an error line. */
#include "fuzz_util.h"
#include "base/base.h"
#include "tokenizer/chat_template.h"

#define N_TPL 3
static xi_chat_template *tpls[N_TPL];
static const char *const tpl_files[N_TPL] = {"chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja",
                                             "chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
                                             "chat-templates/meta-llama-Llama-3.2-3B-Instruct.jinja"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < N_TPL; i++) {
        char path[512], err[256];
        fuzz_data_path(tpl_files[i], path, sizeof path);
        char *src = xi_read_file(path, NULL, err, sizeof err);
        if (!src) fuzz_fail("%s (set XINFER_TEST_DATA)", err);
        tpls[i] = xi_chat_template_parse(src, err, sizeof err);
        if (!tpls[i]) fuzz_fail("%s: %s", path, err);
        free(src);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16384) return 0;
    char *parts[3];
    size_t lens[3];
    int n = fuzz_split(data + 1, size - 1, parts, lens, 3);
    xi_chat_render_params p = {
        .messages_json = parts[0],
        .tools_json = n > 1 ? parts[1] : NULL,
        .extra_json = n > 2 ? parts[2] : NULL,
        .add_generation_prompt = !((data[0] >> 2) & 1),
        .continue_final_message = (data[0] >> 2) & 1,
        .bos_token = "<|begin_of_text|>",
        .eos_token = "<|eot_id|>",
        .no_strftime_now = (data[0] >> 3) & 1,
        .max_output = 1 << 20,
    };
    char err[256] = "";
    char *out = xi_chat_template_render_ex(tpls[data[0] % N_TPL], &p, err, sizeof err);
    if (out)
        free(out);
    else if (!err[0])
        fuzz_fail("render failed without an error line");
    fuzz_parts_free(parts, n);
    return 0;
}
