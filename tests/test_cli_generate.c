/* xinfer generate through the real binary: golden text, stats line, JSONL mode, bad input. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static char *run_cli(const char *args, int *rc) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", xi_test_bin(), args);
    char *out = NULL;
    *rc = xi_test_run(cmd, &out);
    return out;
}

static void rstrip(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) s[--n] = 0;
}

TEST(test_cli_generate_stories_from_bos_prints_reference_text) {
    char *model = xi_test_data("models/stories260K");
    char *refp = xi_test_data("models/stories260K/reference.json");
    json_t *ref = json_load_file(refp, 0, NULL);
    CHECK(ref);
    json_t *c0 = json_array_get(json_object_get(ref, "cases"), 0);
    char args[1024], cmd[2048];
    snprintf(args, sizeof args, "generate --model %s --prompt '' --max-tokens 200 --temperature 0", model);
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", xi_test_bin(), args);
    char *out = NULL;
    CHECK(xi_test_run(cmd, &out) == 0);
    char *want = strdup(json_string_value(json_object_get(c0, "text")));
    rstrip(out);
    rstrip(want);
    CHECKF(!strcmp(out, want), "got:\n%s\nwant:\n%s", out, want);
    /* the stats line goes to stderr */
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", xi_test_bin(), args);
    char *err = NULL;
    CHECK(xi_test_run(cmd, &err) == 0);
    CHECKF(strstr(err, "prompt: 1 tokens") && strstr(err, "generated: 200 tokens") &&
               strstr(err, "GB/s") && strstr(err, "logits hash: "),
           "stats line: %s", err);
    free(out);
    free(err);
    free(want);
    json_decref(ref);
    free(model);
    free(refp);
}

TEST(test_cli_generate_prompts_file_matches_single_prompts) {
    char *model = xi_test_data("models/stories260K");
    const char *prompts[] = {"Once upon a time", "Lily and Tom", "The little dog"};
    char in[512], outp[512];
    snprintf(in, sizeof in, "%s/in.jsonl", xi_test_tmpdir());
    snprintf(outp, sizeof outp, "%s/out.jsonl", xi_test_tmpdir());
    FILE *f = fopen(in, "w");
    for (int i = 0; i < 3; i++)
        fprintf(f, "{\"prompt\": \"%s\", \"max_tokens\": %d, \"temperature\": 0}\n", prompts[i], 20 + i);
    fclose(f);
    char args[2048];
    int rc;
    snprintf(args, sizeof args, "generate --model %s --prompts-file %s --output %s", model, in, outp);
    char *o = run_cli(args, &rc);
    CHECKF(rc == 0, "%s", o);
    free(o);
    f = fopen(outp, "r");
    CHECK(f);
    char line[65536];
    for (int i = 0; i < 3; i++) {
        CHECK(fgets(line, sizeof line, f));
        json_t *j = json_loads(line, 0, NULL);
        CHECK(j);
        CHECK_STR(json_string_value(json_object_get(j, "prompt")), prompts[i]);
        CHECK_STR(json_string_value(json_object_get(j, "finish_reason")), "length");
        CHECK_EQ(json_array_size(json_object_get(j, "token_ids")), 20 + i);
        /* the same prompt alone gives the same text */
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s generate --model %s --prompt '%s' --max-tokens %d --temperature 0 2>/dev/null",
                 xi_test_bin(), model, prompts[i], 20 + i);
        char *single = NULL;
        CHECK(xi_test_run(cmd, &single) == 0);
        rstrip(single);
        char *t = strdup(json_string_value(json_object_get(j, "text")));
        rstrip(t);
        CHECKF(!strcmp(single, t), "prompt %d: batch '%s' vs alone '%s'", i, t, single);
        free(single);
        free(t);
        json_decref(j);
    }
    fclose(f);
    free(model);
}

TEST(test_cli_generate_bad_inputs_exit_1_with_a_message) {
    char *model = xi_test_data("models/stories260K");
    char args[2048];
    int rc;
    /* a prompt that is not UTF-8 */
    snprintf(args, sizeof args, "generate --model %s --prompt $'\\xff\\xfe bad' --max-tokens 4", model);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "bash -c \"%s %s\" 2>&1", xi_test_bin(), args);
    char *o = NULL;
    rc = xi_test_run(cmd, &o);
    CHECKF(rc == 1 && strstr(o, "UTF-8"), "rc %d: %s", rc, o);
    free(o);
    /* a folder that is not a model */
    snprintf(args, sizeof args, "generate --model %s --prompt hi", xi_test_tmpdir());
    o = run_cli(args, &rc);
    CHECKF(rc == 1 && strstr(o, "config.json"), "rc %d: %s", rc, o);
    free(o);
    /* an unknown flag */
    snprintf(args, sizeof args, "generate --model %s --prompt hi --frobnicate 3", model);
    o = run_cli(args, &rc);
    CHECKF(rc == 1 && strstr(o, "--frobnicate"), "rc %d: %s", rc, o);
    free(o);
    free(model);
}
