/* GGUF models served through the dequantizing export: the F32 files give the safetensors
 * folders' logits (so the name map, the un-permuted q/k rows and the config are right), and
 * every quantized llama256 file lands near llama.cpp's logits on the same file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/safetensors.h"
#include "model_util.h"
#include "test.h"

static xi_model *load_dir(const char *dir) {
    char err[512] = "";
    xi_model_params p = {.dir = dir, .dtype = "float32", .n_threads = 1};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    if (!m) fprintf(stderr, "    load %s: %s\n", dir, err);
    return m;
}

/* Last-position logits of each reference prompt; returns the vocab size or -1. */
static int prompt_logits(xi_model *m, json_t *seqs, float *out /* [n_seq][vocab] */) {
    const xi_config *c = xi_model_config(m);
    char err[256];
    size_t i;
    json_t *s;
    json_array_foreach(seqs, i, s) {
        xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
        json_t *ids = json_object_get(s, "ids");
        int n = (int)json_array_size(ids);
        int32_t *tok = malloc(sizeof *tok * (size_t)n);
        for (int k = 0; k < n; k++) tok[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        tm_seq seq;
        tm_seq_init(&seq, 0, 16);
        tm_seq *sp = &seq;
        const int32_t *tp = tok;
        int rc = tm_forward(m, kv, &sp, &tp, &n, 1, 0, out + i * (size_t)c->vocab_size);
        free(tok);
        xi_kv_store_free(kv);
        if (rc) return -1;
    }
    return c->vocab_size;
}

/* rel: in the shared data, or an absolute path. */
static char *export(const char *rel, char *err, size_t errlen) {
    char name[128];
    snprintf(name, sizeof name, "%s.hf", strrchr(rel, '/') + 1);
    char *dir = xi_path_join(xi_test_tmpdir(), name), cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    char *src = rel[0] == '/' ? xi_strdup(rel) : xi_test_data(rel);
    int rc = system(cmd) || xi_gguf_export_hf(src, dir, XI_F32, err, errlen);
    free(src);
    if (rc) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* The F32 GGUF against the safetensors folder of the same weights. */
static void check_same_as_folder(const char *gguf_rel, const char *folder_rel, const char *ref_rel,
                                 double tol) {
    char err[512] = "";
    char *dir = export(gguf_rel, err, sizeof err);
    CHECKF(dir, "%s", err);
    json_t *ref = tm_load_json(ref_rel);
    json_t *seqs = json_object_get(ref, "sequences");
    if (!seqs) seqs = json_object_get(ref, "cases");
    CHECK(json_array_size(seqs) >= 3);
    xi_model *a = load_dir(dir), *b = tm_load(folder_rel, "float32", NULL, 1);
    CHECK(a && b);
    int V = xi_model_config(b)->vocab_size;
    CHECK_EQ(xi_model_config(a)->vocab_size, V);
    size_t n = json_array_size(seqs);
    float *la = malloc(sizeof *la * n * (size_t)V), *lb = malloc(sizeof *lb * n * (size_t)V);
    CHECK(prompt_logits(a, seqs, la) == V && prompt_logits(b, seqs, lb) == V);
    double worst = 0;
    for (size_t i = 0; i < n * (size_t)V; i++) worst = fmax(worst, fabs(la[i] - lb[i]));
    printf("  %s: max |logit difference| to %s %.3g\n", gguf_rel, folder_rel, worst);
    CHECKF(worst <= tol, "%s: logits differ by %g", gguf_rel, worst);
    free(la);
    free(lb);
    xi_model_free(a);
    xi_model_free(b);
    json_decref(ref);
    free(dir);
}

TEST(test_gguf_export_llama256_f32_gives_the_safetensors_logits) {
    check_same_as_folder("gguf/llama256-random-f32.gguf", "gguf/llama256-random-hf",
                         "gguf/llama256-random-f32.reference.json", 1e-5);
}

TEST(test_gguf_export_stories260k_f32_gives_the_safetensors_logits) {
    check_same_as_folder("gguf/stories260K-f32.gguf", "models/stories260K",
                         "gguf/stories260K-f32.reference.json", 1e-5);
}

/* Dequantized weights with fp32 activations against llama.cpp's logits on the same file
 * (llama.cpp rounds activations to 8 bits, so the two differ by that rounding only). */
TEST(test_gguf_export_quantized_llama256_near_llama_cpp_logits) {
    static const char *const types[] = {"f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_1",
                                        "q5_0", "iq4_nl", "q4_k_m", "q4_1", "q4_0", "q3_k_m",
                                        "q2_k", "q4_k_m-mix"};
    printf("  %-11s %10s %10s\n", "file", "max |diff|", "RMS diff");
    for (size_t t = 0; t < XI_ARRAY_LEN(types); t++) {
        char rel[128], ref_rel[128], err[512] = "";
        snprintf(rel, sizeof rel, "gguf/llama256-random-%s.gguf", types[t]);
        snprintf(ref_rel, sizeof ref_rel, "gguf/llama256-random-%s.reference.json", types[t]);
        char *dir = export(rel, err, sizeof err);
        CHECKF(dir, "%s", err);
        xi_model *m = load_dir(dir);
        CHECK(m);
        json_t *ref = tm_load_json(ref_rel);
        json_t *seqs = json_object_get(ref, "sequences");
        int V = xi_model_config(m)->vocab_size;
        size_t n = json_array_size(seqs);
        float *l = malloc(sizeof *l * n * (size_t)V);
        CHECK(n == 3 && prompt_logits(m, seqs, l) == V);
        double worst = 0, sum2 = 0;
        int cnt = 0;
        for (size_t s = 0; s < n; s++) {
            json_t *first = json_object_get(json_array_get(seqs, s), "last_first64");
            for (int k = 0; k < 64; k++) {
                double d = l[s * (size_t)V + (size_t)k] - json_real_value(json_array_get(first, k));
                worst = fmax(worst, fabs(d));
                sum2 += d * d;
                cnt++;
            }
        }
        printf("  %-11s %10.4f %10.4f\n", types[t], worst, sqrt(sum2 / cnt));
        /* Float files match to fp32 rounding (BF16: llama.cpp rounds activations to BF16). */
        double tol = t == 0 ? 1e-4 : t <= 2 ? 0.005 : 0.03; /* measured: 0, 3e-3, <= 0.02 */
        CHECKF(worst <= tol, "%s: logits %g from llama.cpp's (tolerance %g)", types[t], worst, tol);
        free(l);
        json_decref(ref);
        xi_model_free(m);
        free(dir);
    }
}

TEST(test_gguf_export_refuses_other_architectures_by_name) {
    char err[512] = "";
    char *dir = export("gguf/qwen3moe-tiny-bf16.gguf", err, sizeof err);
    CHECKF(!dir && strstr(err, "qwen3moe-tiny-bf16.gguf") && strstr(err, "'qwen3moe'"), "%s", err);
}

/* stories260K-f32.gguf continues each prompt with llama2.c run.c's greedy ids. Teacher-forced:
 * one batch of prompt + reference continuation; the argmax at each position from the prompt's
 * last on must be the next reference id. */
TEST(test_gguf_export_stories260k_gives_llama2c_greedy_ids) {
    char err[512] = "";
    char *dir = export("gguf/stories260K-f32.gguf", err, sizeof err);
    CHECKF(dir, "%s", err);
    xi_model *m = load_dir(dir);
    CHECK(m);
    json_t *ref = tm_load_json("gguf/stories260K-f32.reference.json");
    json_t *seqs = json_object_get(ref, "sequences"), *greedy = json_object_get(ref, "llama2c_run_c_greedy");
    CHECK(json_array_size(seqs) == 3 && json_array_size(greedy) == 3);
    const xi_config *c = xi_model_config(m);
    int V = c->vocab_size, checked = 0;
    for (size_t s = 0; s < 3; s++) {
        json_t *ids = json_object_get(json_array_get(seqs, s), "ids"), *g = json_array_get(greedy, s);
        int np = (int)json_array_size(ids), ng = (int)json_array_size(g), n = np + ng;
        int32_t *tok = malloc(sizeof *tok * (size_t)n);
        for (int k = 0; k < np; k++) tok[k] = (int32_t)json_integer_value(json_array_get(ids, k));
        for (int k = 0; k < ng; k++) tok[np + k] = (int32_t)json_integer_value(json_array_get(g, k));
        float *l = malloc(sizeof *l * (size_t)n * (size_t)V);
        xi_kv_store *kv = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
        tm_seq seq;
        tm_seq_init(&seq, 0, 16);
        tm_seq *sp = &seq;
        const int32_t *tp = tok;
        CHECK(tm_forward(m, kv, &sp, &tp, &n, 1, 1, l) == 0);
        for (int k = 0; k < ng; k++, checked++)
            CHECKF(tm_argmax(l + (size_t)(np - 1 + k) * (size_t)V, V) == tok[np + k],
                   "prompt %zu step %d", s, k);
        xi_kv_store_free(kv);
        free(l);
        free(tok);
    }
    CHECK_EQ(checked, 48);
    json_decref(ref);
    xi_model_free(m);
    free(dir);
}

/* Qwen2 (q/k/v biases, rows not permuted, tied embeddings): models/qwen2-tiny-random written
 * as GGUF with llama.cpp's names by the project's writer, exported back, gives the folder's
 * logits. */
TEST(test_gguf_export_qwen2_with_biases_gives_the_safetensors_logits) {
    static const char *const renames[][2] = {
        {"model.embed_tokens.", "token_embd."}, {"model.norm.", "output_norm."},
        {"model.layers.", "blk."}, {"self_attn.q_proj.", "attn_q."}, {"self_attn.k_proj.", "attn_k."},
        {"self_attn.v_proj.", "attn_v."}, {"self_attn.o_proj.", "attn_output."},
        {"input_layernorm.", "attn_norm."}, {"post_attention_layernorm.", "ffn_norm."},
        {"mlp.gate_proj.", "ffn_gate."}, {"mlp.up_proj.", "ffn_up."}, {"mlp.down_proj.", "ffn_down."},
    };
    char err[512] = "";
    xi_st_set *st = xi_st_open_dir(xi_test_data("models/qwen2-tiny-random"), err, sizeof err);
    CHECKF(st, "%s", err);
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "general.architecture", "qwen2");
    static const struct {
        const char *key;
        uint32_t v;
    } u32[] = {{"qwen2.embedding_length", 64}, {"qwen2.feed_forward_length", 160},
               {"qwen2.block_count", 2}, {"qwen2.attention.head_count", 4},
               {"qwen2.attention.head_count_kv", 2}, {"qwen2.context_length", 4096}};
    for (size_t i = 0; i < XI_ARRAY_LEN(u32); i++) xi_gguf_write_u32(w, u32[i].key, u32[i].v);
    xi_gguf_write_f32(w, "qwen2.rope.freq_base", 1e6f);
    xi_gguf_write_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    char names[64][96];
    CHECK(xi_st_count(st) <= 64);
    for (int i = 0; i < xi_st_count(st); i++) {
        const xi_st_tensor *t = xi_st_at(st, i);
        snprintf(names[i], sizeof names[i], "%s", t->name);
        for (size_t r = 0; r < XI_ARRAY_LEN(renames); r++) {
            char *at = strstr(names[i], renames[r][0]);
            if (!at) continue;
            char tail[96];
            snprintf(tail, sizeof tail, "%s", at + strlen(renames[r][0]));
            snprintf(at, sizeof names[i] - (size_t)(at - names[i]), "%s%s", renames[r][1], tail);
        }
        int64_t ne[2] = {t->shape[t->n_dims - 1], t->n_dims == 2 ? t->shape[0] : 1};
        CHECK(t->dtype == XI_BF16);
        xi_gguf_write_tensor(w, names[i], XI_GGML_BF16, t->n_dims, ne, t->data);
    }
    char *path = xi_path_join(xi_test_tmpdir(), "qwen2-tiny.gguf");
    CHECKF(xi_gguf_writer_write(w, path, err, sizeof err) == 0, "%s", err);
    xi_gguf_writer_free(w);
    xi_st_close(st);
    check_same_as_folder(path, "models/qwen2-tiny-random", "models/qwen2-tiny-random/reference.json",
                         1e-5);
    free(path);
}
