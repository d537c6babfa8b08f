/* `xinfer serve --config FILE`: vLLM's YAML config, every kind of flag, command-line
 * overrides, unknown keys and malformed files. No model needed. */
#include <stdio.h>
#include <stdlib.h>

#include "server/serve_args.h"
#include "test.h"

static const char *no_env(const char *name) { (void)name; return NULL; }
static int no_dirs(const char *p) { (void)p; return 0; }

/* Writes text to a file in the test's folder; returns its path (static per call). */
static char *config(const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/xinfer.yaml", xi_test_tmpdir());
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

#define PARSE(a, err, ...)                                                                   \
    xi_serve_args_parse(a, (int)(sizeof((char *[]){"serve", __VA_ARGS__}) / sizeof(char *)), \
                        (char *[]){"serve", __VA_ARGS__, NULL}, no_env, no_dirs, err, sizeof err)

static const char every_kind[] =
    "# every kind of flag xinfer serve takes\n"
    "model: /models/qwen\n"
    "host: 127.0.0.1\n"
    "port: 8123\n"
    "max-model-len: 32k\n"
    "max_num_seqs: 7\n"                        /* underscores, as vLLM accepts */
    "gpu-memory-utilization: 0.5\n"
    "seed: -3\n"
    "dtype: half\n"
    "enable-log-requests: true\n"
    "enable-prefix-caching: false\n"            /* false: the --no- form */
    "disable-log-stats: no\n"                   /* false without a --no- form: the default */
    "served-model-name: [qwen, qwen-7b]\n"
    "api-key:\n  - k1\n  - \"k2\"\n"
    "override-generation-config: {temperature: 0.25, top_k: 40}\n"
    "enforce-eager: true\n";

TEST(test_config_file_sets_every_kind_of_flag) {
    xi_serve_args a;
    char err[512] = "";
    char *path = config(every_kind);
    CHECK(path);
    CHECKF(PARSE(&a, err, "--config", path) == 0, "%s", err);
    CHECK_STR(a.model_path, "/models/qwen");
    CHECK_STR(a.host, "127.0.0.1");
    CHECK_EQ(a.port, 8123);
    CHECK_EQ(a.engine.max_model_len, 32000);
    CHECK_EQ(a.engine.max_num_seqs, 7);
    CHECK_NEAR(a.engine.gpu_memory_utilization, 0.5, 0);
    CHECK_EQ((int64_t)a.engine.seed, -3);
    CHECK_STR(a.engine.dtype, "float16");
    CHECK_EQ(a.enable_log_requests, 1);
    CHECK_EQ(a.engine.enable_prefix_caching, 0);
    CHECK_EQ(a.disable_log_stats, 0);
    CHECK_EQ(a.n_served_names, 2);
    CHECK_STR(a.served_names[0], "qwen");
    CHECK_STR(a.served_names[1], "qwen-7b");
    CHECK_EQ(a.n_api_keys, 2);
    CHECK_STR(a.api_keys[0], "k1");
    CHECK_STR(a.api_keys[1], "k2");
    CHECK_NEAR(a.engine.override_temperature, 0.25, 0);
    CHECK_EQ(a.engine.override_top_k, 40);
    int ignored = 0;
    for (int i = 0; i < a.n_notices; i++) ignored |= strstr(a.notices[i], "--enforce-eager") != NULL;
    CHECK(ignored);
}

TEST(test_config_file_command_line_overrides_it) {
    xi_serve_args a;
    char err[512] = "";
    char *path = config(every_kind);
    CHECK(path);
    /* scalars, a list, a boolean pair and the model: the command line wins each */
    CHECKF(PARSE(&a, err, "/models/other", "--port=9000", "--config", path, "--served-model-name",
                 "cli-name", "--enable-prefix-caching", "--api-key", "k3", "--dtype", "bfloat16") == 0,
           "%s", err);
    CHECK_EQ(a.port, 9000);
    CHECK_STR(a.model_path, "/models/other");
    CHECK_EQ(a.n_served_names, 1);
    CHECK_STR(a.served_names[0], "cli-name");
    CHECK_EQ(a.n_api_keys, 1);
    CHECK_STR(a.api_keys[0], "k3");
    CHECK_EQ(a.engine.enable_prefix_caching, 1);
    CHECK_STR(a.engine.dtype, "bfloat16");
    CHECK_EQ(a.engine.max_model_len, 32000); /* not on the command line: from the file */
    /* the positional MODEL must not be taken as one more served name of the file's list */
    CHECKF(PARSE(&a, err, "--config", path, "/models/third") == 0, "%s", err);
    CHECK_STR(a.model_path, "/models/third");
    CHECK_EQ(a.n_served_names, 2);
}

TEST(test_config_file_unknown_keys_are_named) {
    xi_serve_args a;
    char err[512] = "";
    char *path = config("model: /m\nmax-modle-len: 4096\nport: 1\nhelp: true\ntp: 2\n");
    CHECK(path);
    CHECK(PARSE(&a, err, "--config", path) == -1);
    CHECKF(strstr(err, path) && strstr(err, "'max-modle-len' (line 2)") &&
               strstr(err, "'help' (line 4)") && strstr(err, "'tp' (line 5)") &&
               strstr(err, "unknown keys"), "%s", err);
    CHECKF(!strstr(err, "'port'") && !strstr(err, "'model'"), "%s", err);
}

TEST(test_config_file_malformed_or_mistyped_is_a_clear_error) {
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"model: /m\nport: [8000\n", "line 3"},                  /* unclosed flow list */
        {"model: /m\n  port: 8000\n", "line 2"},                 /* bad indentation */
        {"model: /m\nport: 1\nport: 2\n", "port is given twice"},
        {"- model\n- port\n", "expected a mapping"},
        {"model: /m\nport:\n", "port: no value"},
        {"model: /m\nport: [1, 2]\n", "port: expected a single value, got a list"},
        {"model: /m\nenable-log-requests: maybe\n", "enable-log-requests: expected true or false"},
        {"model: /m\nserved-model-name: []\n", "served-model-name: empty list"},
        {"model: /m\nconfig: other.yaml\n", "cannot name another"},
        {"model: /m\nport: eighty\n", "--port: expected an integer, got 'eighty'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        xi_serve_args a;
        char err[512] = "";
        char *path = config(cases[i].yaml);
        CHECK(path);
        CHECKF(PARSE(&a, err, "--config", path) == -1, "case %zu parsed", i);
        CHECKF(strstr(err, cases[i].want), "case %zu: '%s' lacks '%s'", i, err, cases[i].want);
    }
    xi_serve_args a;
    char err[512] = "";
    CHECK(PARSE(&a, err, "--config", "/nonexistent/xinfer.yaml") == -1);
    CHECKF(strstr(err, "/nonexistent/xinfer.yaml") && strstr(err, "No such file"), "%s", err);
    CHECK(PARSE(&a, err, "/m", "--config", "x.yaml", "--config=y.yaml") == -1);
    CHECKF(strstr(err, "given twice"), "%s", err);
}

TEST(test_config_file_cli_error_exits_nonzero_naming_the_key) {
    char *path = config("model: /m\nno-such-flag: 1\n");
    CHECK(path);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s serve --config %s 2>&1", xi_test_bin(), path);
    const int rc = xi_test_run(cmd, &out);
    CHECKF(rc != 0 && out && strstr(out, "'no-such-flag' (line 2)"), "rc %d: %s", rc, out ? out : "");
}
