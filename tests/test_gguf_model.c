/* GGUF files served directly: config from the metadata through the architecture files,
 * tensors bound by their GGUF names (Llama's q/k rows un-permuted, experts sliced from the
 * 3-D stacks, quantized types dequantized at load), the tokenizer and chat template from the
 * metadata. Checked against llama.cpp's logits on the same files, the safetensors folders of
 * the same weights, llama2.c's greedy ids and the fp64 references of the Qwen3 models. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model_util.h"
#include "server/server.h"
#include "test.h"
#include "xinfer.h"

/* The ids of a JSON array followed by those of more (may be NULL); count in *n. */
static int32_t *ids_of(json_t *a, json_t *more, int *n) {
    int na = (int)json_array_size(a), nm = (int)json_array_size(more);
    int32_t *ids = malloc(sizeof *ids * (size_t)(na + nm + 1));
    for (int k = 0; k < na; k++) ids[k] = (int32_t)json_integer_value(json_array_get(a, k));
    for (int k = 0; k < nm; k++) ids[na + k] = (int32_t)json_integer_value(json_array_get(more, k));
    *n = na + nm;
    return ids;
}

/* A llama.cpp reference on the same file: last prompt position's first 64 logits within tol64
 * and its top-50 within tol50; llama.cpp's greedy ids (teacher-forced) up to the first step
 * whose top-1/top-2 margin is <= 0.05. The largest differences go to worst[0] (first 64) and
 * worst[1] (top 50), the model's weight bytes in memory to worst[2]. */
static void near_llama_cpp(const char *model_rel, const char *ref_rel, double tol64,
                           double tol50, double worst[3]) {
    xi_model *m = tm_load(model_rel, NULL, NULL, 1);
    json_t *ref = tm_load_json(ref_rel);
    CHECK(m && ref);
    const int V = xi_model_config(m)->vocab_size;
    size_t s;
    json_t *seq;
    int steps = 0;
    json_array_foreach(json_object_get(ref, "sequences"), s, seq) {
        const char *name = json_string_value(json_object_get(seq, "name"));
        json_t *greedy = json_object_get(seq, "greedy_16");
        json_t *margin = json_object_get(seq, "greedy_16_step_margin_top1_minus_top2");
        int n, np = (int)json_array_size(json_object_get(seq, "ids"));
        int32_t *ids = ids_of(json_object_get(seq, "ids"), greedy, &n);
        float *l = tm_logits_all(m, ids, n);
        CHECK(l && np > 0 && json_array_size(greedy) == 16);
        const float *last = l + (size_t)(np - 1) * (size_t)V;
        json_t *first = json_object_get(seq, "last_first64"), *top = json_object_get(seq, "last_top50");
        for (int k = 0; k < 64; k++)
            worst[0] = fmax(worst[0], fabs(last[k] - json_number_value(json_array_get(first, k))));
        json_t *tid = json_object_get(top, "ids"), *tv = json_object_get(top, "values");
        if (!tv) tv = json_object_get(top, "logits");
        CHECK(json_array_size(tid) == 50 && json_array_size(tv) == 50);
        for (int k = 0; k < 50; k++) {
            int64_t id = json_integer_value(json_array_get(tid, k));
            CHECK(id >= 0 && id < V);
            worst[1] = fmax(worst[1], fabs(last[id] - json_number_value(json_array_get(tv, k))));
        }
        CHECKF(worst[0] <= tol64 && worst[1] <= tol50, "%s %s: logits %g (first 64), %g (top 50) "
               "from llama.cpp's", model_rel, name, worst[0], worst[1]);
        for (int k = 0; k < 16 && json_number_value(json_array_get(margin, k)) > 0.05; k++, steps++)
            CHECKF(tm_argmax(l + (size_t)(np - 1 + k) * (size_t)V, V) == ids[np + k],
                   "%s %s: greedy step %d", model_rel, name, k);
        free(l);
        free(ids);
    }
    CHECK(steps > 0);
    worst[2] = (double)xi_model_weight_bytes(m);
    json_decref(ref);
    xi_model_free(m);
}

static const char *const llama256_types[] = {"f32",    "f16",    "bf16", "q8_0", "q6_k",
                                             "q5_k_m", "q5_1",   "q5_0", "iq4_nl", "q4_k_m",
                                             "q4_1",   "q4_0",   "q3_k_m", "q2_k", "q4_k_m-mix"};

/* The default path: every file's weights kept in its format (memory no larger than the
 * file), quantized ones computed with 8-bit activations and integer dots as llama.cpp does:
 * the K-quants, Q4_1, Q5_0 and Q5_1 then give its logits to 1e-4; Q4_0, Q8_0 and IQ4_NL, which
 * llama.cpp repacks and computes another way on x86, differ by up to 0.015 (measured). */
TEST(test_gguf_model_llama256_every_type_near_llama_cpp) {
    printf("  %-11s %9s %9s %22s\n", "file", "first 64", "top 50", "file / in memory (KiB)");
    for (size_t t = 0; t < XI_ARRAY_LEN(llama256_types); t++) {
        char rel[128], ref_rel[128];
        snprintf(rel, sizeof rel, "gguf/llama256-random-%s.gguf", llama256_types[t]);
        snprintf(ref_rel, sizeof ref_rel, "gguf/llama256-random-%s.reference.json", llama256_types[t]);
        double worst[3] = {0, 0, 0};
        near_llama_cpp(rel, ref_rel, 0.02, 0.025, worst);
        char *path = xi_test_data(rel);
        struct stat st;
        double file_kib = stat(path, &st) ? 0 : (double)st.st_size / 1024;
        free(path);
        printf("  %-11s %9.4f %9.4f %10.0f / %9.0f\n", llama256_types[t], worst[0], worst[1],
               file_kib, worst[2] / 1024);
        CHECKF(worst[2] / 1024 <= file_kib, "%s: %.0f KiB of weights in memory for a %.0f KiB file",
               llama256_types[t], worst[2] / 1024, file_kib);
        CHECK(!xi_test_failed());
    }
}

/* Same last-position logits (every prompt, whole vocabulary) as the folder of the same weights. */
static void same_as_folder(const char *gguf_rel, const char *folder_rel, const char *ref_rel,
                           double tol) {
    xi_model *a = tm_load(gguf_rel, "float32", NULL, 1), *b = tm_load(folder_rel, "float32", NULL, 1);
    json_t *ref = tm_load_json(ref_rel);
    CHECK(a && b && ref);
    const int V = xi_model_config(b)->vocab_size;
    CHECK_EQ(xi_model_config(a)->vocab_size, V);
    json_t *seqs = json_object_get(ref, "sequences");
    CHECK(json_array_size(seqs) >= 3);
    double worst = 0;
    size_t s;
    json_t *seq;
    json_array_foreach(seqs, s, seq) {
        int n;
        int32_t *ids = ids_of(json_object_get(seq, "ids"), NULL, &n);
        float *la = tm_logits_all(a, ids, n), *lb = tm_logits_all(b, ids, n);
        CHECK(la && lb);
        for (size_t i = 0; i < (size_t)n * (size_t)V; i++) worst = fmax(worst, fabs(la[i] - lb[i]));
        free(la);
        free(lb);
        free(ids);
    }
    printf("  %s: max |logit difference| to %s %.3g\n", gguf_rel, folder_rel, worst);
    CHECKF(worst <= tol, "%s: logits differ by %g", gguf_rel, worst);
    json_decref(ref);
    xi_model_free(a);
    xi_model_free(b);
}

TEST(test_gguf_model_llama256_f32_gives_the_safetensors_logits) {
    same_as_folder("gguf/llama256-random-f32.gguf", "gguf/llama256-random-hf",
                   "gguf/llama256-random-f32.reference.json", 1e-5);
}

/* Teacher-forced: prompt + llama2.c's continuation in one batch; every argmax from the
 * prompt's last position on is the next llama2.c id. */
TEST(test_gguf_model_stories260k_gives_llama2c_greedy_ids) {
    xi_model *m = tm_load("gguf/stories260K-f32.gguf", NULL, NULL, 1);
    json_t *ref = tm_load_json("gguf/stories260K-f32.reference.json");
    CHECK(m && ref);
    json_t *seqs = json_object_get(ref, "sequences"), *greedy = json_object_get(ref, "llama2c_run_c_greedy");
    CHECK(json_array_size(seqs) == 3 && json_array_size(greedy) == 3);
    const int V = xi_model_config(m)->vocab_size;
    CHECK(xi_model_config(m)->tie_word_embeddings);
    int checked = 0;
    for (size_t s = 0; s < 3; s++) {
        int n, np = (int)json_array_size(json_object_get(json_array_get(seqs, s), "ids"));
        int32_t *ids = ids_of(json_object_get(json_array_get(seqs, s), "ids"), json_array_get(greedy, s), &n);
        float *l = tm_logits_all(m, ids, n);
        CHECK(l);
        for (int k = np; k < n; k++, checked++)
            CHECKF(tm_argmax(l + (size_t)(k - 1) * (size_t)V, V) == ids[k], "prompt %zu step %d", s, k - np);
        free(l);
        free(ids);
    }
    CHECK_EQ(checked, 48);
    json_decref(ref);
    xi_model_free(m);
}

/* Weights exact in BF16, experts sliced from the 3-D stacks: the fp64 reference of the folder. */
TEST(test_gguf_model_qwen3moe_matches_the_fp64_reference) {
    double e8 = 0, elast = 0;
    tm_reference_of(NULL, "gguf/qwen3moe-tiny-bf16.gguf", "models/qwen3moe-tiny-random/reference.json",
                    1e-3, &e8, &elast);
    printf("  qwen3moe-tiny-bf16.gguf vs fp64: first8 %.3g, last %.3g\n", e8, elast);
}

/* models/<folder> as a GGUF of arch `arch` written by the project's writer: the config.json
 * fields as metadata, every tensor under the family's GGUF name, bytes as stored. */
static char *write_gguf(const char *folder, const char *arch) {
    char err[512] = "";
    char *dir = xi_test_data(folder), *cfgp = xi_path_join(dir, "config.json");
    json_t *cfg = json_load_file(cfgp, 0, NULL);
    xi_st_set *st = xi_st_open_dir(dir, err, sizeof err);
    const xi_arch_family *f = cfg ? xi_arch_find(json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0))) : NULL;
    if (!st || !f) {
        fprintf(stderr, "    %s: %s\n", folder, err);
        return NULL;
    }
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "general.architecture", arch);
    static const char *const keys[][2] = {
        {"hidden_size", "embedding_length"}, {"intermediate_size", "feed_forward_length"},
        {"num_hidden_layers", "block_count"}, {"num_attention_heads", "attention.head_count"},
        {"num_key_value_heads", "attention.head_count_kv"}, {"head_dim", "attention.key_length"},
        {"max_position_embeddings", "context_length"}};
    char k[128];
    for (size_t i = 0; i < XI_ARRAY_LEN(keys); i++) {
        snprintf(k, sizeof k, "%s.%s", arch, keys[i][1]);
        xi_gguf_write_u32(w, k, (uint32_t)json_integer_value(json_object_get(cfg, keys[i][0])));
    }
    snprintf(k, sizeof k, "%s.rope.freq_base", arch);
    xi_gguf_write_f32(w, k, (float)json_number_value(json_object_get(cfg, "rope_theta")));
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    xi_gguf_write_f32(w, k, (float)json_number_value(json_object_get(cfg, "rms_norm_eps")));
    int L = (int)json_integer_value(json_object_get(cfg, "num_hidden_layers"));
    char (*names)[160] = calloc((size_t)xi_st_count(st), sizeof *names);
    for (int i = 0; i < xi_st_count(st); i++) {
        const xi_st_tensor *t = xi_st_at(st, i);
        char hf[160], gg[160];
        for (int r = 0; r < XI_T_COUNT && !names[i][0]; r++)
            for (int l = 0; l < L && !names[i][0]; l++)
                if (!xi_arch_tensor_name(f, XI_NAMES_HF, r, l, 0, hf, sizeof hf) &&
                    !strncmp(t->name, hf, strlen(hf)) && t->name[strlen(hf)] == '.' &&
                    !xi_arch_tensor_name(f, XI_NAMES_GGUF, r, l, 0, gg, sizeof gg))
                    snprintf(names[i], sizeof names[i], "%s%s", gg, t->name + strlen(hf));
        int64_t ne[2] = {t->shape[t->n_dims - 1], t->n_dims == 2 ? t->shape[0] : 1};
        int type = t->dtype == XI_BF16 ? XI_GGML_BF16 : t->dtype == XI_F16 ? XI_GGML_F16 : XI_GGML_F32;
        if (names[i][0]) xi_gguf_write_tensor(w, names[i], type, t->n_dims, ne, t->data);
    }
    char *path = xi_path_join(xi_test_tmpdir(), "model.gguf");
    if (xi_gguf_writer_write(w, path, err, sizeof err)) fprintf(stderr, "    %s\n", err);
    xi_gguf_writer_free(w);
    xi_st_close(st);
    free(names);
    json_decref(cfg);
    free(cfgp);
    free(dir);
    return path;
}

TEST(test_gguf_model_qwen3_written_by_our_writer_matches_the_fp64_reference) {
    char *path = write_gguf("models/qwen3-tiny-random", "qwen3");
    CHECK(path);
    double e8 = 0, elast = 0;
    tm_reference_of(NULL, path, "models/qwen3-tiny-random/reference.json", 1e-4, &e8, &elast);
    printf("  qwen3-tiny GGUF vs fp64: first8 %.3g, last %.3g\n", e8, elast);
    free(path);
}

/* A copy of the GGUF file rel with every BF16 matrix whose rows are whole blocks of 32
 * requantized to Q8_0 (3-D expert stacks too); metadata copied as is. */
static char *requantize_q8_0(const char *rel, const char *out_name) {
    char err[512] = "", *src = xi_test_data(rel);
    xi_gguf *g = xi_gguf_open(src, err, sizeof err);
    free(src);
    if (!g) return NULL;
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    tm_gguf_copy_kv(w, g);
    float **bufs = calloc((size_t)xi_gguf_tensor_count(g), sizeof *bufs);
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
        const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && t->type->id == XI_GGML_BF16 && t->ne[0] % 32 == 0) {
            const int64_t n = (int64_t)(t->nbytes / 2);
            bufs[i] = malloc((size_t)n * sizeof(float));
            xi_to_f32(bufs[i], t->data, XI_BF16, (size_t)n);
            xi_gguf_write_tensor_f32(w, t->name, XI_GGML_Q8_0, t->n_dims, t->ne, bufs[i]);
        } else {
            xi_gguf_write_tensor(w, t->name, t->type->id, t->n_dims, t->ne, t->data);
        }
    }
    char *path = xi_path_join(xi_test_tmpdir(), out_name);
    if (xi_gguf_writer_write(w, path, err, sizeof err)) fprintf(stderr, "    %s\n", err);
    xi_gguf_writer_free(w);
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) free(bufs[i]);
    free(bufs);
    xi_gguf_close(g);
    return path;
}

/* Q8_0 experts (3-D ffn_*_exps) of a Qwen3-MoE file run the integer path: kept at 34 bytes
 * per 32 weights, logits near the exact (dequantize + fp32) path and not equal to it, the
 * same argmax at every position, and the same bits alone, batched, chunked. */
TEST(test_gguf_model_qwen3moe_q8_0_experts_run_the_integer_path) {
    char *path = requantize_q8_0("gguf/qwen3moe-tiny-bf16.gguf", "moe-q8_0.gguf");
    CHECK(path);
    xi_model *a = tm_load(path, NULL, NULL, 1);
    setenv("XINFER_KERNEL_PRECISION", "exact", 1);
    xi_model *b = tm_load(path, NULL, NULL, 1);
    unsetenv("XINFER_KERNEL_PRECISION");
    CHECK(a && b);
    CHECK(!strcmp(xi_model_quantization(a), "gguf"));
    const int32_t ids[] = {1, 40, 71, 200, 13, 99, 4, 150, 31, 7};
    const int n = (int)XI_ARRAY_LEN(ids), V = xi_model_config(a)->vocab_size;
    float *la = tm_logits_all(a, ids, n), *lb = tm_logits_all(b, ids, n);
    CHECK(la && lb);
    double worst = 0, range = 0;
    int differ = 0;
    for (int t = 0; t < n; t++) {
        int ma = 0, mb = 0;
        for (int v = 0; v < V; v++) {
            const float x = la[t * V + v], y = lb[t * V + v];
            worst = fmax(worst, fabs((double)x - y));
            range = fmax(range, fabs((double)y));
            differ |= memcmp(&x, &y, 4) != 0;
            if (x > la[t * V + ma]) ma = v;
            if (y > lb[t * V + mb]) mb = v;
        }
        CHECKF(ma == mb, "position %d: argmax %d (int8) vs %d (exact)", t, ma, mb);
    }
    printf("  qwen3moe Q8_0: max |int8 - exact| %.4f of |logit| <= %.2f\n", worst, range);
    CHECK(differ);
    CHECKF(worst < 0.02 * range, "int8 experts off by %.4f", worst);
    free(la);
    free(lb);
    xi_model_free(a);
    xi_model_free(b);
    tm_invariance(NULL, path, XI_F32, NULL);
    free(path);
}

/* A quantized GGUF: the same bits alone or batched, in chunks, and on 1 or 2 threads. */
TEST(test_gguf_model_quantized_is_bitwise_invariant) {
    const char *path = "gguf/llama256-random-q4_k_m.gguf";
    tm_invariance(NULL, path, XI_F32, NULL);
    CHECK(!xi_test_failed());
    xi_model *a = tm_load(path, NULL, NULL, 1), *b = tm_load(path, NULL, NULL, 2);
    CHECK(a && b);
    const int32_t ids[] = {1, 403, 407, 261, 378, 20, 300, 17, 99, 4, 250, 311};
    float *la = tm_logits_all(a, ids, 12), *lb = tm_logits_all(b, ids, 12);
    CHECK(la && lb);
    CHECK(!memcmp(la, lb, sizeof *la * 12 * (size_t)xi_model_config(a)->vocab_size));
    free(la);
    free(lb);
    xi_model_free(a);
    xi_model_free(b);
}

/* Bad input is named: an unknown architecture, a type without a dequantizer, a missing tensor. */
TEST(test_gguf_model_refuses_what_it_cannot_serve_by_name) {
    char err[512] = "";
    char *path = xi_path_join(xi_test_tmpdir(), "bad.gguf");
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "general.architecture", "gemma3");
    CHECK(xi_gguf_writer_write(w, path, err, sizeof err) == 0);
    xi_gguf_writer_free(w);
    xi_model_params p = {.dir = path, .n_threads = 1};
    CHECK(!xi_model_load(&p, err, sizeof err));
    CHECKF(strstr(err, "bad.gguf") && strstr(err, "'gemma3'"), "%s", err);
    /* A type without a dequantizer. */
    const xi_qtype *iq2 = xi_qtype_get(16);
    CHECK(iq2 && !xi_qtype_supported(iq2));
    uint8_t *blocks = calloc(4, (size_t)iq2->block_bytes);
    w = xi_gguf_writer_new(0);
    xi_gguf_write_str(w, "general.architecture", "llama");
    static const char *const keys[] = {"llama.embedding_length", "llama.feed_forward_length",
                                       "llama.block_count", "llama.attention.head_count"};
    const uint32_t vals[] = {256, 32, 1, 2};
    for (size_t i = 0; i < XI_ARRAY_LEN(keys); i++) xi_gguf_write_u32(w, keys[i], vals[i]);
    const int64_t ne[2] = {256, 4};
    xi_gguf_write_tensor(w, "token_embd.weight", iq2->id, 2, ne, blocks);
    CHECK(xi_gguf_writer_write(w, path, err, sizeof err) == 0);
    xi_gguf_writer_free(w);
    free(blocks);
    CHECK(!xi_model_load(&p, err, sizeof err));
    CHECKF(strstr(err, "bad.gguf") && strstr(err, "token_embd.weight") && strstr(err, "iq2_xxs"),
           "%s", err);
    free(path);
    path = write_gguf("models/qwen3-tiny-random", "qwen2"); /* no q/k biases, as qwen2 needs */
    p.dir = path;
    CHECK(!xi_model_load(&p, err, sizeof err));
    CHECKF(strstr(err, "blk.0.attn_q.bias") && strstr(err, "missing"), "%s", err);
    free(path);
}

/* An engine on qwen3moe-tiny-bf16.gguf (chat_template NULL: the metadata's). */
static xi_engine *open_qwen3moe(const char *chat_template, char *err, size_t errlen) {
    xi_engine_params ep;
    xi_engine_params_default(&ep);
    ep.model_dir = xi_test_data("gguf/qwen3moe-tiny-bf16.gguf");
    ep.kv_cache_memory_bytes = 16 << 20;
    ep.n_threads = 1;
    ep.max_model_len = 256;
    ep.chat_template = chat_template;
    return xi_engine_open(&ep, err, errlen);
}

/* The tokenizer and chat template come from the metadata; a chat completion is served over
 * HTTP and its prompt is the template's rendering of the messages. */
TEST(test_gguf_model_served_over_http_with_its_metadata_template) {
    static const char *const names[] = {"tiny"};
    char err[512] = "";
    xi_engine *e = open_qwen3moe(NULL, err, sizeof err);
    CHECKF(e && !xi_engine_start(e, err, sizeof err), "%s", err);
    const char *msgs = "[{\"role\":\"user\",\"content\":\"Hi there\"}]";
    char *text = xi_engine_apply_chat_template(e, msgs, NULL, NULL, 1, 0, err, sizeof err);
    CHECKF(text && strstr(text, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"),
           "%s", text ? text : err);
    int32_t *ids = NULL;
    int n_prompt = xi_engine_tokenize(e, text, 0, &ids, err, sizeof err);
    CHECK(n_prompt > 6 && ids[0] == 151644); /* <|im_start|> is one special token */
    int port = 0;
    int fd = xi_server_listen("127.0.0.1", 0, NULL, &port, err, sizeof err);
    xi_server_config cfg = {.served_names = names, .n_served_names = 1, .model_path = "/none",
                            .max_body_bytes = 1 << 20};
    xi_server *srv = fd < 0 ? NULL : xi_server_start(&cfg, fd, err, sizeof err);
    CHECKF(srv && !xi_server_set_engine(srv, e, err, sizeof err), "%s", err);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "curl -s -m 60 -H 'Content-Type: application/json' http://127.0.0.1:%d/v1/chat/completions "
             "-d '{\"model\":\"tiny\",\"messages\":%s,\"max_tokens\":4,\"temperature\":0}'",
             port, msgs);
    CHECK(xi_test_run(cmd, &out) == 0);
    json_t *r = json_loads(out, 0, NULL);
    json_t *usage = json_object_get(r, "usage");
    CHECKF(usage && json_integer_value(json_object_get(usage, "prompt_tokens")) == n_prompt &&
               json_integer_value(json_object_get(usage, "completion_tokens")) == 4,
           "%s", out);
    json_decref(r);
    free(out);
    free(ids);
    free(text);
    xi_server_stop(srv);
    xi_engine_close(e);
    xi_server_free(srv);
}

/* --chat-template wins over the template in the metadata. */
TEST(test_gguf_model_chat_template_flag_overrides_the_metadata) {
    char err[512] = "";
    xi_engine *e = open_qwen3moe("[{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}]",
                                 err, sizeof err);
    CHECKF(e, "%s", err);
    char *text = xi_engine_apply_chat_template(e, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, NULL,
                                               1, 0, err, sizeof err);
    CHECKF(text && !strcmp(text, "[user=Hi;]"), "%s", text ? text : err);
    free(text);
    xi_engine_close(e);
}

/* The CLI on a GGUF: an Ollama store's extension-less blob (found by its magic) tokenizes with
 * the metadata's special tokens and inspects as GGUF; generate runs a .gguf path. */
TEST(test_gguf_model_cli_tokenize_ollama_blob_and_generate) {
    const char *root = xi_test_tmpdir();
    char *src = xi_test_data("gguf/qwen3moe-tiny-bf16.gguf"), *abs = realpath(src, NULL);
    CHECK(abs);
    const char *hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/blobs %s/manifests/registry.ollama.ai/library/tiny && "
             "ln -s %s %s/blobs/sha256-%s && printf '{\"schemaVersion\":2,\"layers\":[{\"mediaType\":"
             "\"application/vnd.ollama.image.model\",\"digest\":\"sha256:%s\",\"size\":1}]}' > "
             "%s/manifests/registry.ollama.ai/library/tiny/latest",
             root, root, abs, root, hex, hex, root);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "OLLAMA_MODELS=%s %s tokenize --model ollama:tiny --text '<|im_start|>user'",
             root, xi_test_bin());
    CHECK(xi_test_run(cmd, &out) == 0);
    CHECKF(!strncmp(out, "[151644, ", 9), "%s", out); /* one special token, then "user" */
    free(out);
    snprintf(cmd, sizeof cmd, "OLLAMA_MODELS=%s %s inspect ollama:tiny", root, xi_test_bin());
    CHECK(xi_test_run(cmd, &out) == 0);
    CHECKF(strstr(out, "qwen3moe.expert_count") && strstr(out, "blk.1.ffn_down_exps.weight"), "%s", out);
    free(out);
    char *stories = xi_test_data("gguf/stories260K-f32.gguf");
    snprintf(cmd, sizeof cmd, "%s generate --model %s --prompt 'Once upon a time' --max-tokens 4 "
             "--temperature 0 --threads 1 2>&1", xi_test_bin(), stories);
    CHECK(xi_test_run(cmd, &out) == 0);
    CHECKF(strstr(out, "generated: 4 tokens"), "%s", out);
    free(out);
    free(stories);
    free(abs);
    free(src);
}
