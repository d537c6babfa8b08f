/* xinfer pull through the real binary against the fake hub: the folder on stdout, one error
 * line and exit code 1 on failure, offline re-use of the cache. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test.h"
#include "base/base.h"
#include "fake_hub.h"

/* Run `xinfer pull ARGS` against the hub; stdout into *out, stderr into *err_out. */
static int run_pull(const fake_hub *h, const char *env, const char *args, char **out,
                    char **err_out) {
    char errfile[512], cmd[4096];
    snprintf(errfile, sizeof errfile, "%s/pull.stderr", xi_test_tmpdir());
    snprintf(cmd, sizeof cmd, "env -u HF_HUB_OFFLINE -u HF_TOKEN HF_ENDPOINT=%s %s %s pull %s 2>%s",
             fake_hub_url(h), env, xi_test_bin(), args, errfile);
    int rc = xi_test_run(cmd, out);
    *err_out = xi_read_file(errfile, NULL, NULL, 0);
    return rc;
}

static void chomp(char *s) {
    size_t n = s ? strlen(s) : 0;
    while (n && s[n - 1] == '\n') s[--n] = 0;
}

TEST(test_hub_cli_pull_prints_the_snapshot_folder_and_works_offline) {
    fake_hub *h = fake_hub_start(xi_test_data("models/stories260K"));
    CHECK(h);
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "xi-test/stories260K --download-dir %s/cache", xi_test_tmpdir());
    int rc = run_pull(h, "", args, &out, &err);
    CHECKF(rc == 0, "rc %d: %s", rc, err);
    chomp(out);
    char want[1024];
    snprintf(want, sizeof want, "%s/cache/models--xi-test--stories260K/snapshots/%s",
             xi_test_tmpdir(), fake_hub_commit(h));
    CHECK_STR(out, want);
    CHECKF(strstr(err, "5 files, 5 downloaded"), "%s", err);
    /* the folder is a model folder: inspect opens it */
    char cmd[2048], *insp = NULL;
    snprintf(cmd, sizeof cmd, "%s inspect %s 2>&1", xi_test_bin(), out);
    CHECKF(xi_test_run(cmd, &insp) == 0, "%s", insp);
    CHECKF(strstr(insp, "LlamaForCausalLM"), "%s", insp);
    /* offline: same folder, no request reaches the hub */
    int before = fake_hub_requests(h);
    char *out2 = NULL, *err2 = NULL;
    CHECK(run_pull(h, "HF_HUB_OFFLINE=1", args, &out2, &err2) == 0);
    chomp(out2);
    CHECK_STR(out2, want);
    CHECK_EQ(fake_hub_requests(h), before);
    fake_hub_stop(h);
}

TEST(test_hub_cli_pull_failure_is_one_line_and_exit_code_1) {
    fake_hub *h = fake_hub_start(xi_test_data("models/stories260K"));
    CHECK(h);
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "xi-test/missing --download-dir %s/cache --quiet", xi_test_tmpdir());
    CHECK_EQ(run_pull(h, "HF_TOKEN_PATH=/nonexistent", args, &out, &err), 1);
    CHECK_STR(out, "");
    CHECKF(err && !strncmp(err, "xinfer pull: xi-test/missing: no such model", 43), "%s", err);
    CHECKF(strchr(err, '\n') == err + strlen(err) - 1, "not one line: %s", err);
    CHECK_EQ(run_pull(h, "", "--source nowhere x/y", &out, &err), 2);
    fake_hub_stop(h);
}

/* The acceptance check: a hub name wherever a model folder goes. Passes once
 * `generate` resolves --model through xi_hub_resolve. */
TEST(test_hub_cli_generate_accepts_a_hub_name) {
    fake_hub *h = fake_hub_start(xi_test_data("models/stories260K"));
    CHECK(h);
    char *refp = xi_test_data("models/stories260K/reference.json");
    char *ref = xi_read_file(refp, NULL, NULL, 0);
    CHECK(ref);
    json_t *j = json_loads(ref, 0, NULL);
    CHECK(j);
    const char *want = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "cases"), 0), "text"));
    CHECK(want);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "env -u HF_HUB_OFFLINE HF_ENDPOINT=%s HF_HUB_CACHE=%s/cache %s "
             "generate --model xi-test/stories260K --prompt '' --max-tokens 200 --temperature 0 "
             "2>/dev/null", fake_hub_url(h), xi_test_tmpdir(), xi_test_bin());
    CHECK(xi_test_run(cmd, &out) == 0);
    chomp(out);
    size_t n = strlen(want);
    while (n && (want[n - 1] == '\n' || want[n - 1] == ' ')) n--;
    CHECKF(strlen(out) == n && !strncmp(out, want, n), "got:\n%s\nwant:\n%.*s", out, (int)n, want);
    CHECK(fake_hub_downloads(h, "model.safetensors") == 1);
    json_decref(j);
    fake_hub_stop(h);
}
