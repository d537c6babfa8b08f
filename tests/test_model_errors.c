/* Broken model folders give one clear error naming the file and tensor, never a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "test.h"

/* Copy stories260K into tmp/name with config.json replaced (when config != NULL) and the
 * safetensors bytes transformed by fn. */
static char *make_model(const char *name, const char *config,
                        void (*fn)(char **data, size_t *len)) {
    char *src = xi_test_data("models/stories260K");
    char *dst = xi_path_join(xi_test_tmpdir(), name);
    mkdir(dst, 0755);
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json", "generation_config.json"};
    for (size_t i = 0; i < XI_ARRAY_LEN(files); i++) {
        char *a = xi_path_join(src, files[i]), *b = xi_path_join(dst, files[i]);
        size_t len;
        char *data = xi_read_file(a, &len, NULL, 0);
        if (i == 0 && config) {
            free(data);
            data = strdup(config);
            len = strlen(config);
        }
        if (i == 1 && fn) fn(&data, &len);
        FILE *f = fopen(b, "wb");
        fwrite(data, 1, len, f);
        fclose(f);
        free(data);
        free(a);
        free(b);
    }
    free(src);
    return dst;
}

static int load_fails(const char *dir, char *err, size_t errlen) {
    xi_model_params p = {.dir = dir, .n_threads = 1};
    xi_model *m = xi_model_load(&p, err, errlen);
    if (m) {
        xi_model_free(m);
        return 0;
    }
    return 1;
}

static void truncate_half(char **d, size_t *len) { *len /= 2; (void)d; }

/* Make the header claim one tensor's data ends far beyond the file. */
static void bad_offsets(char **d, size_t *len) {
    char *p = strstr(*d + 8, "\"model.norm.weight\"");
    if (!p) return;
    char *off = strstr(p, "data_offsets\":[");
    if (!off) off = strstr(p, "data_offsets\": [");
    char *end = strchr(off, ']');
    /* overwrite the second number with a huge one of the same width */
    char *comma = strchr(off, ',');
    for (char *q = comma + 1; q < end; q++)
        if (*q >= '0' && *q <= '9') *q = '9';
    (void)len;
}

TEST(test_truncated_safetensors_is_a_clear_error) {
    char err[512] = "";
    char *dir = make_model("trunc", NULL, truncate_half);
    CHECK(load_fails(dir, err, sizeof err));
    CHECKF(strstr(err, "model.safetensors") != NULL, "message: %s", err);
    free(dir);
}

TEST(test_offsets_beyond_file_name_the_tensor) {
    char err[512] = "";
    char *dir = make_model("offsets", NULL, bad_offsets);
    CHECK(load_fails(dir, err, sizeof err));
    CHECKF(strstr(err, "model.safetensors") && strstr(err, "model.norm.weight"), "message: %s", err);
    free(dir);
}

static char *config_with(const char *from, const char *to) {
    char *p = xi_test_data("models/stories260K/config.json");
    char *cfg = xi_read_file(p, NULL, NULL, 0);
    free(p);
    char *at = strstr(cfg, from);
    if (!at) return cfg;
    size_t n = strlen(cfg) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    free(cfg);
    return out;
}

TEST(test_wrong_shape_names_tensor_expected_and_found) {
    char err[512] = "";
    char *cfg = config_with("\"intermediate_size\": 172", "\"intermediate_size\": 180");
    char *dir = make_model("shape", cfg, NULL);
    CHECK(load_fails(dir, err, sizeof err));
    CHECKF(strstr(err, "model.layers.0.mlp.gate_proj.weight") && strstr(err, "[180, 64]") &&
               strstr(err, "[172, 64]"),
           "message: %s", err);
    free(cfg);
    free(dir);
}

TEST(test_unknown_architecture_is_rejected_by_name) {
    char err[512] = "";
    char *cfg = config_with("LlamaForCausalLM", "MambaForCausalLM");
    char *dir = make_model("arch", cfg, NULL);
    CHECK(load_fails(dir, err, sizeof err));
    CHECKF(strstr(err, "MambaForCausalLM") && strstr(err, "config.json"), "message: %s", err);
    free(cfg);
    free(dir);
}

TEST(test_unsupported_rope_scaling_is_an_error_not_ignored) {
    char err[512] = "";
    char *cfg = config_with("\"rope_theta\": 10000.0",
                            "\"rope_theta\": 10000.0, \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}");
    char *dir = make_model("rope", cfg, NULL);
    CHECK(load_fails(dir, err, sizeof err));
    CHECKF(strstr(err, "rope_scaling") && strstr(err, "dynamic"), "message: %s", err);
    free(cfg);
    free(dir);
}

TEST(test_missing_tensor_is_named) {
    char err[512] = "";
    char *cfg = config_with("\"num_hidden_layers\": 5", "\"num_hidden_layers\": 6");
    char *dir = make_model("layers", cfg, NULL);
    CHECK(load_fails(dir, err, sizeof err));
    CHECKF(strstr(err, "model.layers.5."), "message: %s", err);
    free(cfg);
    free(dir);
}

TEST(test_llama3_and_yarn_rope_configs_load) {
    /* Both scaling types are implemented, so the model loads; frequencies differ from plain. */
    const char *variants[] = {
        "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
        "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}",
        "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 128}",
    };
    for (int i = 0; i < 2; i++) {
        char to[512];
        snprintf(to, sizeof to, "\"rope_theta\": 10000.0, %s", variants[i]);
        char *cfg = config_with("\"rope_theta\": 10000.0", to);
        char name[16];
        snprintf(name, sizeof name, "rs%d", i);
        char *dir = make_model(name, cfg, NULL);
        char err[512] = "";
        xi_config c;
        CHECKF(xi_config_load(&c, dir, err, sizeof err) == 0, "%s", err);
        CHECK(c.rope_type == (i ? XI_ROPE_YARN : XI_ROPE_LLAMA3));
        xi_config_free(&c);
        CHECKF(!load_fails(dir, err, sizeof err), "%s", err);
        free(cfg);
        free(dir);
    }
}

/* Values that would load and then fail every request are refused at load, each naming the
 * value and its range (rope_theta -1 used to load and answer 500s; hidden_size 2^31 was "not
 * a non-negative integer"). */
TEST(test_config_values_out_of_range_name_the_value) {
    static const struct { const char *from, *to, *want; } cases[] = {
        {"\"rope_theta\": 10000.0", "\"rope_theta\": -1", "rope_theta -1 is out of range"},
        {"\"rope_theta\": 10000.0", "\"rope_theta\": 0", "rope_theta 0 is out of range"},
        {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1e-05", "rms_norm_eps -1e-05 is out of range"},
        {"\"hidden_size\": 64", "\"hidden_size\": 2147483648", "\"hidden_size\" 2147483648 is out of range"},
    };
    for (size_t i = 0; i < XI_ARRAY_LEN(cases); i++) {
        char err[512] = "";
        char *cfg = config_with(cases[i].from, cases[i].to);
        char *dir = make_model("range", cfg, NULL);
        CHECKF(load_fails(dir, err, sizeof err), "%s loaded", cases[i].to);
        CHECKF(strstr(err, cases[i].want) && strstr(err, "config.json"), "%s: %s", cases[i].to, err);
        free(cfg);
        free(dir);
    }
}
