/* Qwen3 and Qwen3-MoE: what tells a correct forward pass from the typical mistakes, the
 * router against its float64 reference, the per-layer spec read from config.json, and MoE
 * experts in place (mmap) and quantized (int8). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/model_internal.h"
#include "model_util.h"
#include "test.h"

/* Logits within 1e-4 of the fp64 reference and greedy 32 equal, on every kernel variant.
 * The reference also lists how far each typical mistake (no q/k norm, norm after RoPE,
 * head_dim from hidden/heads for the scale or for RoPE; for MoE no renormalisation or top-1)
 * moves the logits we compare: our error must be far below every one, so each mistake fails. */
static void reference_tells_apart(const char *rel) {
    double e8 = 0, elast = 0;
    TM_FOR_EACH_VARIANT(tm_reference, rel, &e8, &elast);
    CHECK(!xi_test_failed());
    char path[256];
    snprintf(path, sizeof path, "%s/reference.json", rel);
    json_t *ref = tm_load_json(path);
    CHECK(ref);
    json_t *bugs = json_object_get(ref, "bug_sensitivity_float64_len96");
    CHECK(json_object_size(bugs) >= 4);
    const char *name;
    json_t *b;
    int n = 0;
    json_object_foreach(bugs, name, b) {
        double b8 = json_number_value(json_object_get(b, "max_abs_diff_first8_all_positions"));
        double bl = json_number_value(json_object_get(b, "max_abs_diff_last"));
        if (b8 < 1e-9 && bl < 1e-9) continue; /* mathematically the same model (top-k softmax) */
        /* a mistake moves what we compare by b8 or bl; ours stays 100x below that */
        double ratio = (b8 > bl ? b8 : bl) / fmax(e8 > elast ? e8 : elast, 1e-9);
        CHECKF(ratio > 100 && (b8 > 1e-4 || bl > 1e-4), "%s: %s moves the logits by %g / %g, ours err %g / %g",
               rel, name, b8, bl, e8, elast);
        n++;
    }
    CHECK(n >= 4);
    json_decref(ref);
}

TEST(test_qwen3_tiny_matches_reference_far_below_every_bug_case) {
    reference_tells_apart("models/qwen3-tiny-random");
}
TEST(test_qwen3moe_tiny_matches_reference_far_below_every_bug_case) {
    reference_tells_apart("models/qwen3moe-tiny-random");
}

typedef struct route_log {
    int32_t sel[2][19][2];
    float w[2][19][2];
    int calls;
} route_log;

static void log_route(void *user, int layer, int T, int k, const int32_t *sel, const float *w) {
    route_log *r = user;
    if (layer < 0 || layer > 1 || T != 19 || k != 2) return;
    memcpy(r->sel[layer], sel, sizeof r->sel[layer]);
    memcpy(r->w[layer], w, sizeof r->w[layer]);
    r->calls++;
}

/* Chosen experts and their renormalised weights at every layer and position of the 19-token
 * prompt equal the float64 router's (the smallest 2nd/3rd logit gap there is 1.9e-3). */
TEST(test_qwen3moe_routing_matches_float64_router) {
    xi_model *m = tm_load("models/qwen3moe-tiny-random", "float32", NULL, 2);
    CHECK(m);
    json_t *ref = tm_load_json("models/qwen3moe-tiny-random/reference.json");
    CHECK(ref);
    json_t *rt = json_object_get(ref, "moe_routing_float64"), *ids = json_object_get(rt, "ids");
    CHECK(json_array_size(ids) == 19);
    int32_t tok[19];
    for (int i = 0; i < 19; i++) tok[i] = (int32_t)json_integer_value(json_array_get(ids, i));
    route_log log = {0};
    m->route_hook = log_route;
    m->route_user = &log;
    char err[256];
    xi_kv_store *kv = xi_kv_store_new(xi_model_config(m), 4, 16, XI_F32, err, sizeof err);
    CHECK(kv);
    tm_seq s;
    tm_seq_init(&s, 0, 4);
    tm_seq *sp = &s;
    const int32_t *ip = tok;
    int n = 19;
    float *logits = malloc(sizeof(float) * (size_t)xi_model_config(m)->vocab_size);
    CHECK(tm_forward(m, kv, &sp, &ip, &n, 1, 0, logits) == 0);
    CHECK(log.calls == 2);
    double maxw = 0;
    for (int l = 0; l < 2; l++) {
        json_t *pl = json_array_get(json_object_get(rt, "per_layer"), (size_t)l);
        for (int t = 0; t < 19; t++) {
            json_t *ex = json_array_get(json_object_get(pl, "experts"), (size_t)t);
            json_t *wt = json_array_get(json_object_get(pl, "weights"), (size_t)t);
            for (int c = 0; c < 2; c++) { /* reference: descending probability; ours: ascending id */
                int e = (int)json_integer_value(json_array_get(ex, (size_t)c));
                int at = log.sel[l][t][0] == e ? 0 : log.sel[l][t][1] == e ? 1 : -1;
                CHECKF(at >= 0, "layer %d token %d: expert %d not chosen (%d, %d)", l, t, e,
                       log.sel[l][t][0], log.sel[l][t][1]);
                maxw = fmax(maxw, fabs(log.w[l][t][at] - json_number_value(json_array_get(wt, (size_t)c))));
            }
            CHECK(log.sel[l][t][0] < log.sel[l][t][1]);
        }
    }
    CHECKF(maxw < 1e-5, "routing weights differ by %g", maxw);
    free(logits);
    xi_kv_store_free(kv);
    json_decref(ref);
    xi_model_free(m);
}

/* config.json with `edit` applied (a replacement of one "key": value) in a fresh folder. */
static char *edited_config(const char *name, const char *from, const char *to) {
    char *src = xi_test_data("models/qwen3moe-tiny-random/config.json");
    char *text = xi_read_file(src, NULL, NULL, 0);
    char *dir = xi_path_join(xi_test_tmpdir(), name), *dst = xi_path_join(dir, "config.json");
    mkdir(dir, 0755);
    char *at = text ? strstr(text, from) : NULL;
    FILE *f = fopen(dst, "w");
    if (at && f) fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    if (f) fclose(f);
    free(src);
    free(text);
    free(dst);
    return at ? dir : NULL;
}

/* The spec: decoder_sparse_step and mlp_only_layers pick the dense layers; Qwen3 layers
 * have q/k norm and no required bias; the tensor names in both namings. */
TEST(test_qwen3moe_spec_follows_sparse_step_and_mlp_only_layers) {
    char err[256] = "";
    xi_config c;
    char *dir = edited_config("step2", "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2");
    CHECK(dir);
    CHECKF(xi_config_load(&c, dir, err, sizeof err) == 0, "%s", err);
    CHECK(c.layer[0].mlp == XI_MLP_DENSE && c.layer[0].ffn == 128);
    CHECK(c.layer[1].mlp == XI_MLP_MOE && c.layer[1].ffn == 32 && c.layer[1].n_experts == 8 &&
          c.layer[1].top_k == 2 && c.layer[1].norm_topk && c.layer[1].qk_norm);
    CHECK(c.layer[1].qkv_bias == XI_BIAS_OPTIONAL && !strcmp(c.family->name, "qwen3_moe"));
    xi_config_free(&c);
    free(dir);
    dir = edited_config("only1", "\"mlp_only_layers\": []", "\"mlp_only_layers\": [1]");
    CHECK(dir);
    CHECKF(xi_config_load(&c, dir, err, sizeof err) == 0, "%s", err);
    CHECK(c.layer[0].mlp == XI_MLP_MOE && c.layer[1].mlp == XI_MLP_DENSE);
    char name[128];
    CHECK(xi_arch_tensor_name(c.family, XI_NAMES_HF, XI_T_EXP_DOWN, 1, 7, name, sizeof name) == 0);
    CHECK_STR(name, "model.layers.1.mlp.experts.7.down_proj");
    CHECK(xi_arch_tensor_name(c.family, XI_NAMES_GGUF, XI_T_EXP_DOWN, 1, 7, name, sizeof name) == 0);
    CHECK_STR(name, "blk.1.ffn_down_exps");
    CHECK(xi_arch_tensor_name(c.family, XI_NAMES_GGUF, XI_T_ATTN_Q_NORM, 0, 0, name, sizeof name) == 0);
    CHECK_STR(name, "blk.0.attn_q_norm");
    xi_config_free(&c);
    free(dir);
    dir = edited_config("badk", "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9");
    CHECK(dir);
    CHECK(xi_config_load(&c, dir, err, sizeof err) == -1);
    CHECKF(strstr(err, "num_experts_per_tok 9"), "%s", err);
    free(dir);
}

TEST(test_unknown_architecture_names_it_and_lists_known_ones) {
    char err[512] = "";
    xi_config c;
    char *dir = edited_config("unknown", "Qwen3MoeForCausalLM", "Gemma3ForCausalLM");
    CHECK(dir);
    CHECK(xi_config_load(&c, dir, err, sizeof err) == -1);
    CHECKF(strstr(err, "Gemma3ForCausalLM") && strstr(err, "LlamaForCausalLM") &&
               strstr(err, "Qwen2ForCausalLM") && strstr(err, "Qwen3ForCausalLM") &&
               strstr(err, "Qwen3MoeForCausalLM") && !strchr(err, '\n'),
           "%s", err);
    free(dir);
}

/* --load-format mmap: BF16 experts run in place from the file (row-major, never copied) and
 * the logits still match the reference, which computes with exactly these BF16 values. */
TEST(test_qwen3moe_mmap_experts_run_in_place) {
    char err[256] = "";
    char *dir = xi_test_data("models/qwen3moe-tiny-random");
    xi_model_params p = {.dir = dir, .load_format = "mmap", .n_threads = 2};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    CHECKF(m, "%s", err);
    const xi_weight *w = &m->layers[1].edown[5];
    CHECK(w->dtype == XI_BF16 && w->block == 0);
    const xi_st_tensor *t = xi_st_find(m->st, "model.layers.1.mlp.experts.5.down_proj.weight");
    CHECK(t && w->data == t->data);
    json_t *ref = tm_load_json("models/qwen3moe-tiny-random/reference.json");
    CHECK(ref);
    json_t *sq = json_array_get(json_object_get(ref, "sequences"), 1), *ids = json_object_get(sq, "ids");
    int n = (int)json_array_size(ids);
    CHECK(n == 19);
    int32_t tok[19];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)json_integer_value(json_array_get(ids, i));
    const xi_config *c = xi_model_config(m);
    xi_kv_store *kv = xi_kv_store_new(c, 4, 16, XI_F32, err, sizeof err);
    tm_seq s;
    tm_seq_init(&s, 0, 4);
    tm_seq *sp = &s;
    const int32_t *ip = tok;
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    CHECK(kv && tm_forward(m, kv, &sp, &ip, &n, 1, 0, logits) == 0);
    double maxd = 0;
    json_t *last = json_object_get(sq, "logits_last");
    for (int j = 0; j < c->vocab_size; j++)
        maxd = fmax(maxd, fabs(logits[j] - json_number_value(json_array_get(last, (size_t)j))));
    CHECKF(maxd < 1e-4, "mmap: max abs logit error %g", maxd);
    free(logits);
    xi_kv_store_free(kv);
    json_decref(ref);
    xi_model_free(m);
    free(dir);
}

/* --quantization int8 quantizes every expert (not the router) and stays close. */
TEST(test_qwen3moe_int8_experts_track_float_model) {
    const int32_t ids[12] = {785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 11, 1221, 308};
    tm_int8_tracks_float("models/qwen3moe-tiny-random", ids, 12, 1.0); /* the bf16 embedding dominates */
    CHECK(!xi_test_failed());
    char err[256] = "", *dir = xi_test_data("models/qwen3moe-tiny-random");
    xi_model_params p = {.dir = dir, .quantization = "int8", .n_threads = 1};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    free(dir);
    CHECKF(m, "%s", err);
    CHECK(m->layers[0].egate[3].dtype == XI_Q8 && m->layers[1].edown[7].dtype == XI_Q8);
    CHECK(m->layers[0].router.dtype == XI_BF16);
    xi_model_free(m);
}
