/* Chat template renders share one process-wide memory budget: past it a render fails with a
 * message a server turns into 503, and what a finished render held is returned. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokenizer/jinja.h"

TEST(test_jinja_renders_share_one_memory_budget) {
    char err[512] = "";
    xi_jinja *t = xi_jinja_parse("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}", err, sizeof err);
    CHECKF(t, "%s", err);
    json_t *msgs = json_array();
    for (int i = 0; i < 20000; i++) json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", "hi"));
    json_t *vars = json_pack("{s:o}", "messages", msgs);
    xi_jinja_render_opts o = {.vars = vars};
    CHECK_EQ(xi_jinja_shared_in_use(), 0);
    size_t len;
    char *out = xi_jinja_render(t, &o, &len, err, sizeof err);
    CHECKF(out && len == 20000 * strlen("user:hi;"), "%s", err);
    free(out);
    CHECK_EQ(xi_jinja_shared_in_use(), 0);
    /* the same render against a budget smaller than it needs: refused, nothing kept */
    xi_jinja_set_shared_budget(256 << 10);
    out = xi_jinja_render(t, &o, &len, err, sizeof err);
    CHECKF(!out && strstr(err, "retry later"), "%s", out ? "rendered" : err);
    CHECK_EQ(xi_jinja_shared_in_use(), 0);
    xi_jinja_set_shared_budget((size_t)1 << 30);
    out = xi_jinja_render(t, &o, &len, err, sizeof err);
    CHECKF(out, "%s", err);
    free(out);
    json_decref(vars);
    xi_jinja_free(t);
}
