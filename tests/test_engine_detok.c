/* The text of a continuation is what vLLM returns: decode(prompt + generated) minus
 * decode(prompt), so the first generated word keeps its leading space. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "test.h"
#include "xinfer.h"

typedef struct {
    xi_buf text;
    int done;
} collected;

static void collect(void *user, const xi_output *o) {
    collected *c = user;
    xi_buf_append(&c->text, o->text, o->text_len);
    if (o->finish_reason != XI_FINISH_NONE) c->done = 1;
}

static char *complete(xi_engine *e, const char *prompt, int max_tokens) {
    xi_request_params rp;
    xi_request_params_default(&rp);
    rp.prompt = prompt;
    rp.temperature = 0;
    rp.max_tokens = max_tokens;
    collected c = {0};
    char err[256];
    if (xi_engine_submit(e, &rp, collect, &c, err, sizeof err) < 0) return NULL;
    while (xi_engine_step(e) > 0) {}
    xi_buf_append(&c.text, "", 0);
    return c.text.data;
}

TEST(test_continuation_keeps_the_first_words_space) {
    char *dir = xi_test_data("models/stories260K");
    xi_engine_params p;
    xi_engine_params_default(&p);
    p.model_dir = dir;
    p.kv_cache_memory_bytes = 4 << 20;
    p.n_threads = 1;
    char err[512];
    xi_engine *e = xi_engine_open(&p, err, sizeof err);
    CHECKF(e, "%s", err);
    /* "Once" continues with " upon a time" (llama2.c's reference text starts that way) */
    char *t = complete(e, "Once", 3);
    CHECKF(t && !strncmp(t, " upon a time", 12), "got '%s'", t ? t : "(null)");
    free(t);
    /* from BOS only, the story starts without a space */
    t = complete(e, "", 3);
    CHECKF(t && !strncmp(t, "Once upon", 9), "got '%s'", t ? t : "(null)");
    free(t);
    xi_engine_close(e);
    free(dir);
}
