/* Regressions for bugs the fuzz harnesses of tests/fuzz found (their minimised inputs also
 * live in tests/fuzz/corpus/<target>/ and are replayed by .ci/fuzz.sh). Each test states the
 * property that broke. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "ops/env.h"
#include "ops/plan.h"
#include "test.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

/* fuzz_tokenizer_text, fuzz_detok_ids: decoding no bytes at all (no ids, or only skipped
 * special tokens) did pointer arithmetic on a NULL buffer (UBSan: applying zero offset to
 * null pointer); it must give an empty string. */
TEST(test_fuzz_decode_of_nothing_is_empty_string) {
    char err[256];
    xi_tokenizer *t = xi_tokenizer_load(xi_test_data("models/stories260K"), err, sizeof err);
    CHECKF(t, "%s", err);
    size_t len = 99;
    char *s = xi_tokenizer_decode(t, NULL, 0, 0, &len, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(len, 0);
    CHECK_STR(s, "");
    free(s);
    int32_t bos = xi_tokenizer_bos_id(t);
    CHECK(bos >= 0 && xi_tokenizer_is_special(t, bos));
    s = xi_tokenizer_decode(t, &bos, 1, 1, &len, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(len, 0);
    CHECK_STR(s, "");
    free(s);
    xi_tokenizer_free(t);
}

/* fuzz_ops: memory figures of two chips near INT64_MAX overflowed the per-NPU sum (UBSan:
 * signed integer overflow). Absurd figures are now ignored; sane ones still add up. */
TEST(test_fuzz_npu_smi_huge_memory_is_ignored_not_summed) {
    static const char text[] =
        "npu-smi 1 NPU\n"
        "| 0 910B3 | OK | x |\n"
        "| 0 | 0000:C1:00.0 | 0 9223372036854775807 / 9223372036854775807 |\n"
        "| 1 | 0000:C1:00.1 | 0 9223372036854775807 / 9223372036854775807 |\n"
        "| 1 910B3 | OK | x |\n"
        "| 0 | 0000:C2:00.0 | 0 3338 / 65536 |\n"
        "| 1 | 0000:C2:00.1 | 0 100 / 65536 |\n";
    xi_npu_smi s;
    char err[256];
    CHECK_EQ(xi_npu_smi_parse(text, &s, err, sizeof err), 2);
    CHECK_EQ(s.npus[0].n_chips, 2);
    CHECK_EQ(s.npus[0].mem_total_mb, 0);
    CHECK_EQ(s.npus[1].mem_used_mb, 3438);
    CHECK_EQ(s.npus[1].mem_total_mb, 131072);
}

/* fuzz_ops: a MemTotal beyond INT64_MAX / 1024 kB overflowed the conversion to bytes. */
TEST(test_fuzz_meminfo_overflowing_total_is_unknown) {
    char path[512];
    const char *root = xi_test_tmpdir();
    snprintf(path, sizeof path, "%s/proc", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/proc/meminfo", root);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("MemTotal:       99999999999999999999 kB\nMemAvailable:    2048 kB\n", f);
    fclose(f);
    xi_env_cpu c;
    xi_env_probe_cpu(&c, root);
    CHECK_EQ(c.mem_total, -1);
    CHECK_EQ(c.mem_available, 2048 * 1024);
}

static const char *write_config(const char *json) {
    const char *dir = xi_test_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(json, f);
    fclose(f);
    return dir;
}

/* fuzz_config: hidden_size < num_attention_heads without head_dim gave head_dim 0, and
 * xi_plan_compute divided by the resulting 0 bytes of KV per sequence. */
TEST(test_fuzz_plan_rejects_zero_head_dim) {
    const char *dir = write_config(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":2,\"intermediate_size\":128,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":1000}");
    CHECK(dir);
    xi_plan_model m;
    char err[256] = "";
    CHECK_EQ(xi_plan_model_load(dir, &m, err, sizeof err), -1);
    CHECKF(strstr(err, "num_attention_heads 4"), "%s", err);
}

/* fuzz_config: fields of up to 2^30 each overflowed the planner's int64 byte counts. */
TEST(test_fuzz_plan_rejects_shapes_that_overflow) {
    const char *dir = write_config(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":1073741824,"
        "\"intermediate_size\":1073741824,\"num_hidden_layers\":1073741824,"
        "\"num_attention_heads\":1,\"head_dim\":1073741824,\"vocab_size\":1073741824}");
    CHECK(dir);
    xi_plan_model m;
    char err[256] = "";
    CHECK_EQ(xi_plan_model_load(dir, &m, err, sizeof err), -1);
    CHECKF(strstr(err, "parameters"), "%s", err);

    /* A loadable shape whose one-sequence KV at max_position_embeddings overflows. */
    dir = write_config(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":4096,\"intermediate_size\":4096,"
        "\"num_hidden_layers\":4096,\"num_attention_heads\":1024,\"head_dim\":4096,"
        "\"vocab_size\":1000,\"max_position_embeddings\":1073741824}");
    CHECK(dir);
    CHECKF(xi_plan_model_load(dir, &m, err, sizeof err) == 0, "%s", err);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan r;
    err[0] = 0;
    CHECK_EQ(xi_plan_compute(&m, xi_plan_device_at(0), &p, &r, err, sizeof err), -1);
    CHECKF(strstr(err, "--max-model-len"), "%s", err);
    /* The same model with a sane context plans. */
    p.max_model_len = 4096;
    CHECKF(xi_plan_compute(&m, xi_plan_device_at(0), &p, &r, err, sizeof err) == 0, "%s", err);
}

/* fuzz_config: a Qwen3 (q/k norm) shape with head_dim 2^30 and one head counted the norm
 * weights as 2 * head_dim in int, which overflows. */
TEST(test_fuzz_plan_counts_qk_norm_of_huge_head_dim) {
    const char *dir = write_config(
        "{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":1,\"intermediate_size\":1,"
        "\"num_hidden_layers\":1,\"num_attention_heads\":1,\"head_dim\":1073741824,"
        "\"vocab_size\":1,\"max_position_embeddings\":1}");
    CHECK(dir);
    xi_plan_model m;
    char err[256] = "";
    CHECKF(xi_plan_model_load(dir, &m, err, sizeof err) == 0, "%s", err);
    xi_plan_params p;
    xi_plan_params_default(&p);
    xi_plan r;
    (void)xi_plan_compute(&m, xi_plan_device_at(0), &p, &r, err, sizeof err);
    CHECK(r.w.params_other >= 2LL * 1073741824);
}

/* fuzz_tokenizer_load: a post-processor special token whose id is a hole of the vocabulary
 * (below the highest id, but naming no token) loaded, so encode emitted an id that decode
 * rejects. Such a tokenizer.json is now refused at load, naming the file and the id. */
TEST(test_fuzz_tokenizer_post_processor_must_name_real_tokens) {
    const char *dir = xi_test_tmpdir();
    char path[512], err[256] = "";
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
          "{\"id\":\"<s>\"}},{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":{\"ids\":[1]}}},"
          "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"<s>\":2},\"merges\":[]}}",
          f);
    fclose(f);
    xi_tokenizer *t = xi_tokenizer_load(dir, err, sizeof err);
    CHECK(t == NULL);
    CHECKF(strstr(err, "tokenizer.json") && strstr(err, "id 1"), "%s", err);
    /* The same file with the id of a real token loads and puts it first. */
    f = fopen(path, "w");
    CHECK(f);
    fputs("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
          "{\"id\":\"<s>\"}},{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":{\"ids\":[2]}}},"
          "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"<s>\":2},\"merges\":[]}}",
          f);
    fclose(f);
    t = xi_tokenizer_load(dir, err, sizeof err);
    CHECKF(t, "%s", err);
    int32_t *ids = NULL;
    CHECK_EQ(xi_tokenizer_encode(t, "a", 1, 1, 0, &ids, err, sizeof err), 2);
    CHECK_EQ(ids[0], 2);
    CHECK_EQ(ids[1], 0);
    free(ids);
    xi_tokenizer_free(t);
}

/* `select` with no arguments used to form a null-pointer offset for the test's arguments. */
TEST(test_fuzz_jinja_select_without_arguments) {
    char err[256] = "";
    xi_chat_template *t = xi_chat_template_parse(
        "{{ messages|select|map(attribute='role')|join(',') }}", err, sizeof err);
    CHECKF(t, "%s", err);
    char *out = xi_chat_template_render(
        t, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]", NULL,
        0, NULL, NULL, err, sizeof err);
    CHECKF(out, "%s", err);
    CHECK_STR(out, "user,assistant");
    free(out);
    xi_chat_template_free(t);
}
