#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/gguf.h"
#include "model/model_internal.h"
#include "model/safetensors.h"
#include "tensor/dtype.h"
#include "tokenizer/tokenizer_gguf.h"
#include "model_util.h"
#include "test.h"

static char *genmodel(const char *sub, const char *args) { return tm_genmodel(sub, "tiny", args); }

/* genmodel, then open the folder; NULL (with the reason on stderr) when either fails. */
static xi_st_set *gen_open(const char *sub, const char *args, char **dir_out) {
    char *dir = genmodel(sub, args);
    char err[512] = "";
    xi_st_set *s = dir ? xi_st_open_dir(dir, err, sizeof err) : NULL;
    if (dir && !s) fprintf(stderr, "    %s: %s\n", dir, err);
    if (dir_out) *dir_out = dir;
    else free(dir);
    return s;
}

static int same_bytes(const char *dir_a, const char *dir_b, const char *file) {
    char *pa = xi_path_join(dir_a, file), *pb = xi_path_join(dir_b, file);
    size_t la = 0, lb = 0;
    char *a = xi_read_file(pa, &la, NULL, 0), *b = xi_read_file(pb, &lb, NULL, 0);
    int same = a && b && la == lb && !memcmp(a, b, la);
    free(a);
    free(b);
    free(pa);
    free(pb);
    return same;
}

static json_t *load_config(const char *dir) {
    char *p = xi_path_join(dir, "config.json");
    json_t *j = json_load_file(p, 0, NULL);
    free(p);
    return j;
}

static int shape_is(const xi_st_set *s, const char *name, xi_dtype dt, int64_t d0, int64_t d1) {
    const xi_st_tensor *t = xi_st_find(s, name);
    if (!t) fprintf(stderr, "    missing %s\n", name);
    else if (t->dtype != dt || t->shape[0] != d0 || t->n_dims != (d1 ? 2 : 1) || (d1 && t->shape[1] != d1))
        fprintf(stderr, "    %s: %s [%lld, %lld]\n", name, xi_dtype_name(t->dtype), (long long)t->shape[0],
                (long long)(t->n_dims > 1 ? t->shape[1] : 0));
    else return 1;
    return 0;
}

/* tiny: hidden 64, intermediate 128, 2 layers, 4 heads of 16, 2 KV heads, vocab 151936, tied. */
TEST(test_genmodel_tiny_f32_has_qwen2_shapes_and_config) {
    char *dir = genmodel("f32", "--dtype f32 --seed 7");
    CHECK(dir);
    char err[512] = "";
    xi_st_set *s = xi_st_open_dir(dir, err, sizeof err);
    CHECKF(s, "%s", err);
    CHECK_EQ(xi_st_count(s), 2 + 2 * 12);
    CHECK(shape_is(s, "model.embed_tokens.weight", XI_F32, 151936, 64));
    CHECK(shape_is(s, "model.layers.1.self_attn.q_proj.weight", XI_F32, 64, 64));
    CHECK(shape_is(s, "model.layers.1.self_attn.k_proj.weight", XI_F32, 32, 64));
    CHECK(shape_is(s, "model.layers.0.self_attn.v_proj.bias", XI_F32, 32, 0));
    CHECK(shape_is(s, "model.layers.0.self_attn.o_proj.weight", XI_F32, 64, 64));
    CHECK(shape_is(s, "model.layers.0.mlp.gate_proj.weight", XI_F32, 128, 64));
    CHECK(shape_is(s, "model.layers.0.mlp.down_proj.weight", XI_F32, 64, 128));
    CHECK(shape_is(s, "model.norm.weight", XI_F32, 64, 0));
    CHECK(!xi_st_find(s, "lm_head.weight"));
    /* Linear weights look like std-0.02 noise, norms like 1 + small noise. */
    const xi_st_tensor *t = xi_st_find(s, "model.embed_tokens.weight");
    const float *w = t->data;
    double sum = 0, sq = 0;
    size_t n = 151936 * 64;
    for (size_t i = 0; i < n; i++) sum += w[i], sq += (double)w[i] * w[i];
    CHECK_NEAR(sum / n, 0.0, 1e-4);
    CHECK_NEAR(sqrt(sq / n), 0.02, 5e-4);
    const float *g = xi_st_find(s, "model.norm.weight")->data;
    for (int i = 0; i < 64; i++) CHECKF(g[i] > 0.9f && g[i] < 1.1f, "norm[%d] = %g", i, g[i]);
    xi_st_close(s);

    json_t *c = load_config(dir);
    CHECK(c);
    CHECK_STR(json_string_value(json_array_get(json_object_get(c, "architectures"), 0)), "Qwen2ForCausalLM");
    CHECK_STR(json_string_value(json_object_get(c, "torch_dtype")), "float32");
    CHECK(json_is_true(json_object_get(c, "tie_word_embeddings")));
    CHECK_EQ(json_integer_value(json_object_get(c, "num_key_value_heads")), 2);
    CHECK_NEAR(json_number_value(json_object_get(c, "rms_norm_eps")), 1e-6, 1e-12);
    CHECK(!json_object_get(c, "quantization_config"));
    json_decref(c);
    char *tok = xi_path_join(dir, "tokenizer.json");
    CHECK(xi_file_exists(tok));
    free(tok);
}

TEST(test_genmodel_same_seed_same_bytes_other_seed_differs) {
    char *a = genmodel("a", "--dtype bf16 --seed 11");
    char *b = genmodel("b", "--dtype bf16 --seed 11");
    char *c = genmodel("c", "--dtype bf16 --seed 12");
    CHECK(a && b && c);
    CHECK(same_bytes(a, b, "model.safetensors"));
    CHECK(same_bytes(a, b, "config.json"));
    CHECK(!same_bytes(a, c, "model.safetensors"));
    char err[512];
    xi_st_set *sa = xi_st_open_dir(a, err, sizeof err), *sc = xi_st_open_dir(c, err, sizeof err);
    CHECKF(sa && sc, "%s", err);
    /* Not just one byte: almost every element of every tensor changes with the seed. */
    for (int i = 0; i < xi_st_count(sa); i++) {
        const xi_st_tensor *x = xi_st_at(sa, i), *y = xi_st_find(sc, x->name);
        CHECK(y && y->nbytes == x->nbytes && x->dtype == XI_BF16);
        const uint16_t *p = x->data, *q = y->data;
        size_t n = x->nbytes / 2, diff = 0;
        for (size_t k = 0; k < n; k++) diff += p[k] != q[k];
        CHECKF(diff > n / 2, "%s: %zu of %zu differ", x->name, diff, n);
    }
    xi_st_close(sa);
    xi_st_close(sc);
}

TEST(test_genmodel_bf16_is_f32_rounded) {
    xi_st_set *sa = gen_open("f32", "--dtype f32 --seed 3 --layers 1", NULL);
    xi_st_set *sb = gen_open("bf16", "--dtype bf16 --seed 3 --layers 1", NULL);
    CHECK(sa && sb);
    CHECK_EQ(xi_st_count(sa), 2 + 12);
    CHECK_EQ(xi_st_count(sb), xi_st_count(sa));
    for (int i = 0; i < xi_st_count(sa); i++) {
        const xi_st_tensor *x = xi_st_at(sa, i), *y = xi_st_find(sb, x->name);
        CHECK(y && y->dtype == XI_BF16 && y->nbytes * 2 == x->nbytes);
        const float *f = x->data;
        const uint16_t *h = y->data;
        for (size_t k = 0; k < y->nbytes / 2; k++)
            CHECKF(xi_f32_to_bf16(f[k]) == h[k], "%s[%zu]", x->name, k);
    }
    xi_st_close(sa);
    xi_st_close(sb);
}

/* AutoAWQ GEMM dequantization, written from the format description: w[o][i] =
 * (q - z) * s where nibble j of qweight[i][c] is output column 8c + order[j]. */
static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static int nibble(const int32_t *packed, int64_t row, int64_t out, int64_t col) {
    uint32_t word = (uint32_t)packed[row * (out / 8) + col / 8];
    for (int j = 0; j < 8; j++)
        if (awq_order[j] == col % 8) return (int)((word >> (4 * j)) & 15);
    return -1;
}

/* Largest |dequant(awq) - ref| over the first ref_rows outputs, in units of that group's scale.
 * ref is [ref_rows, in] f32; returns -1 on a shape mismatch. */
static double awq_max_err_in_scales(const xi_st_set *s, const char *base, const float *ref, int64_t ref_rows) {
    char nq[160], nz[160], ns[160];
    snprintf(nq, sizeof nq, "%s.qweight", base);
    snprintf(nz, sizeof nz, "%s.qzeros", base);
    snprintf(ns, sizeof ns, "%s.scales", base);
    const xi_st_tensor *q = xi_st_find(s, nq), *z = xi_st_find(s, nz), *sc = xi_st_find(s, ns);
    if (!q || !z || !sc || q->dtype != XI_I32 || z->dtype != XI_I32 || sc->dtype != XI_F16) return -1;
    int64_t in = q->shape[0], out = q->shape[1] * 8, groups = sc->shape[0], G = in / groups;
    if (sc->shape[1] != out || z->shape[0] != groups || ref_rows > out) return -1;
    const uint16_t *scales = sc->data;
    double worst = 0;
    for (int64_t o = 0; o < ref_rows; o++)
        for (int64_t i = 0; i < in; i++) {
            int64_t g = i / G;
            float s = xi_f16_to_f32(scales[g * out + o]);
            int qv = nibble(q->data, i, out, o), zv = nibble(z->data, g, out, o);
            double e = fabs((qv - zv) * s - ref[o * in + i]) / s;
            if (e > worst) worst = e;
        }
    return worst;
}

/* Is every dequantized weight of `base` in q within tol steps of base.weight in f? */
static int awq_close_to(const xi_st_set *f, const xi_st_set *q, const char *base, double tol) {
    char wn[160];
    snprintf(wn, sizeof wn, "%s.weight", base);
    const xi_st_tensor *w = xi_st_find(f, wn);
    double e = w ? awq_max_err_in_scales(q, base, w->data, w->shape[0]) : -1;
    if (e >= 0 && e <= tol) return 1;
    fprintf(stderr, "    %s: max error %.4f steps (tolerance %.4f)\n", base, e, tol);
    return 0;
}

TEST(test_awq_dequant_reader_matches_shared_stories260k_awq) {
    /* The shared AWQ folder was made by others from stories260K; if our reading of the nibble
     * order is right, dequantized weights sit within half a step of the f32 originals. */
    char err[512];
    xi_st_set *f = xi_st_open_dir(xi_test_data("models/stories260K"), err, sizeof err);
    xi_st_set *q = xi_st_open_dir(xi_test_data("models/stories260K-awq"), err, sizeof err);
    CHECKF(f && q, "%s", err);
    const char *names[] = {"model.layers.0.mlp.gate_proj", "model.layers.3.self_attn.q_proj",
                           "model.layers.4.self_attn.v_proj"};
    for (size_t k = 0; k < XI_ARRAY_LEN(names); k++) CHECK(awq_close_to(f, q, names[k], 0.5 + 1e-2));
    xi_st_close(f);
    xi_st_close(q);
}

TEST(test_genmodel_awq_is_rtn_quantization_of_f32) {
    char *b = NULL;
    xi_st_set *sf = gen_open("f32", "--dtype f32 --seed 5 --layers 1", NULL);
    xi_st_set *sq = gen_open("awq", "--awq --group-size 32 --seed 5 --layers 1", &b);
    CHECK(sf && sq);
    /* 2 norms + 3 biases + 7 linears x (qweight, qzeros, scales) per layer, embeddings, norm. */
    CHECK_EQ(xi_st_count(sq), 2 + 5 + 7 * 3);
    CHECK(shape_is(sq, "model.embed_tokens.weight", XI_F16, 151936, 64));
    CHECK(shape_is(sq, "model.layers.0.self_attn.q_proj.bias", XI_F16, 64, 0));
    CHECK(shape_is(sq, "model.layers.0.self_attn.k_proj.qweight", XI_I32, 64, 4));
    CHECK(shape_is(sq, "model.layers.0.self_attn.k_proj.qzeros", XI_I32, 2, 4));
    CHECK(shape_is(sq, "model.layers.0.self_attn.k_proj.scales", XI_F16, 2, 32));
    CHECK(shape_is(sq, "model.layers.0.mlp.down_proj.qweight", XI_I32, 128, 8));
    CHECK(shape_is(sq, "model.layers.0.mlp.down_proj.qzeros", XI_I32, 4, 8));
    CHECK(shape_is(sq, "model.layers.0.mlp.down_proj.scales", XI_F16, 4, 64));
    CHECK(!xi_st_find(sq, "model.layers.0.mlp.down_proj.weight"));
    const char *lin[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    for (size_t k = 0; k < XI_ARRAY_LEN(lin); k++) {
        char base[160];
        snprintf(base, sizeof base, "model.layers.0.%s", lin[k]);
        CHECK(awq_close_to(sf, sq, base, 0.5 + 1e-3));
    }
    json_t *c = load_config(b);
    CHECK(c);
    json_t *qc = json_object_get(c, "quantization_config");
    CHECK_STR(json_string_value(json_object_get(qc, "quant_method")), "awq");
    CHECK_EQ(json_integer_value(json_object_get(qc, "bits")), 4);
    CHECK_EQ(json_integer_value(json_object_get(qc, "group_size")), 32);
    CHECK(json_is_true(json_object_get(qc, "zero_point")));
    CHECK_STR(json_string_value(json_object_get(qc, "version")), "gemm");
    CHECK_STR(json_string_value(json_object_get(c, "torch_dtype")), "float16");
    json_decref(c);
    xi_st_close(sf);
    xi_st_close(sq);
}

TEST(test_genmodel_shards_with_index_and_same_tensors) {
    /* The 38 MB embedding table alone exceeds a 10 MB shard, so the rest goes to a second file. */
    char *b = NULL;
    xi_st_set *s1 = gen_open("one", "--dtype f32 --seed 9 --layers 1", NULL);
    xi_st_set *s2 = gen_open("two", "--dtype f32 --seed 9 --layers 1 --max-shard-mb 10", &b);
    CHECK(s1 && s2);
    char *idx = xi_path_join(b, "model.safetensors.index.json");
    char *single = xi_path_join(b, "model.safetensors");
    CHECK(xi_file_exists(idx));
    CHECK(!xi_file_exists(single));
    CHECK_EQ(xi_st_count(s2), xi_st_count(s1));
    CHECK(strstr(xi_st_find(s2, "model.embed_tokens.weight")->file, "model-00001-of-00002.safetensors"));
    CHECK(strstr(xi_st_find(s2, "model.norm.weight")->file, "model-00002-of-00002.safetensors"));
    for (int i = 0; i < xi_st_count(s1); i++) {
        const xi_st_tensor *x = xi_st_at(s1, i), *y = xi_st_find(s2, x->name);
        CHECK(y && y->nbytes == x->nbytes && !memcmp(x->data, y->data, x->nbytes));
    }
    xi_st_close(s1);
    xi_st_close(s2);
    /* inspect sees both files and counts every parameter once:
     * 151936x64 embeddings + (2x64 norms + 2x64x64 q/o + 2x32x64 k/v + 128 biases + 3x128x64) + 64. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect '%s' --json", xi_test_bin(), b);
    char *out = NULL;
    CHECK_EQ(xi_test_run(cmd, &out), 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    CHECK(j);
    CHECK_EQ(json_integer_value(json_object_get(j, "files")), 2);
    CHECK_EQ(json_integer_value(json_object_get(j, "parameters")),
             151936 * 64 + (128 + 2 * 4096 + 2 * 2048 + 128 + 3 * 8192) + 64);
    json_decref(j);
    free(idx);
    free(single);
}

TEST(test_genmodel_rejects_bad_arguments) {
    const char *tools = getenv("XINFER_TOOLS");
    char cmd[512];
    const char *bad[] = {"--preset nope", "--preset tiny --dtype f8", "--preset tiny --awq --group-size 48",
                         "--preset tiny --awq --dtype bf16", "--preset tiny --layers two", "--preset tiny --seed -1",
                         "--preset tiny --gguf q4_0", "--preset tiny --gguf f16 --dtype f16",
                         "--preset tiny --gguf f16 --awq"};
    for (size_t i = 0; i < XI_ARRAY_LEN(bad); i++) {
        snprintf(cmd, sizeof cmd, "%s/genmodel %s '%s/x' 2>&1", tools ? tools : "build/tools", bad[i],
                 xi_test_tmpdir());
        char *out = NULL;
        int rc = xi_test_run(cmd, &out);
        CHECKF(rc != 0 && out && strstr(out, "genmodel:"), "%s -> %d: %s", bad[i], rc, out ? out : "");
        free(out);
    }
}

/* The float folder of an AWQ folder: every AWQ module dequantized with the reader above into
 * f32 `.weight` [out, in], every other tensor as f32, config.json without quantization. */
static char *dequantized_copy(const char *qdir, const char *sub) {
    char err[512] = "";
    xi_st_set *q = xi_st_open_dir(qdir, err, sizeof err);
    char *dir = xi_path_join(xi_test_tmpdir(), sub), *path = xi_path_join(dir, "model.safetensors");
    mkdir(dir, 0755);
    int n = q ? xi_st_count(q) : 0, k = 0, ok = q != NULL;
    xi_st_spec *sp = calloc((size_t)n + 1, sizeof *sp);
    const xi_st_tensor **src = calloc((size_t)n + 1, sizeof *src);
    char (*names)[160] = calloc((size_t)n + 1, sizeof *names);
    for (int i = 0; i < n; i++) {
        const xi_st_tensor *t = xi_st_at(q, i);
        const char *dot = strrchr(t->name, '.');
        if (!strcmp(dot, ".qzeros") || !strcmp(dot, ".scales")) continue;
        src[k] = t;
        if (!strcmp(dot, ".qweight")) {
            snprintf(names[k], sizeof names[k], "%.*s.weight", (int)(dot - t->name), t->name);
            sp[k] = (xi_st_spec){names[k], XI_F32, 2, {t->shape[1] * 8, t->shape[0]}};
        } else {
            snprintf(names[k], sizeof names[k], "%s", t->name);
            sp[k] = (xi_st_spec){names[k], XI_F32, t->n_dims, {t->shape[0], t->n_dims > 1 ? t->shape[1] : 0}};
        }
        k++;
    }
    FILE *f = fopen(path, "wb");
    ok = ok && f && xi_st_write_header(f, sp, k, NULL, 0, err, sizeof err) >= 0;
    for (int i = 0; ok && i < k; i++) {
        const xi_st_tensor *t = src[i];
        int64_t rows = sp[i].shape[0], cols = sp[i].n_dims > 1 ? sp[i].shape[1] : 1;
        float *w = malloc(sizeof(float) * (size_t)(rows * cols));
        if (t->dtype == XI_I32) { /* qweight [in, out/8] of module base */
            char nz[160], ns[160];
            snprintf(nz, sizeof nz, "%.*s.qzeros", (int)(strlen(names[i]) - 7), names[i]);
            snprintf(ns, sizeof ns, "%.*s.scales", (int)(strlen(names[i]) - 7), names[i]);
            const xi_st_tensor *z = xi_st_find(q, nz), *sc = xi_st_find(q, ns);
            const int64_t out = rows, in = cols, G = in / sc->shape[0];
            const uint16_t *scales = sc->data;
            for (int64_t o = 0; o < out; o++)
                for (int64_t c = 0; c < in; c++)
                    w[o * in + c] = (float)(nibble(t->data, c, out, o) - nibble(z->data, c / G, out, o)) *
                                    xi_f16_to_f32(scales[(c / G) * out + o]);
        } else {
            xi_to_f32(w, t->data, t->dtype, (size_t)(rows * cols));
        }
        ok = fwrite(w, sizeof(float), (size_t)(rows * cols), f) == (size_t)(rows * cols);
        free(w);
    }
    if (f) fclose(f);
    json_t *c = load_config(qdir);
    ok = ok && c;
    if (ok) {
        json_object_del(c, "quantization_config");
        json_object_set_new(c, "torch_dtype", json_string("float32"));
        char *cp = xi_path_join(dir, "config.json");
        ok = json_dump_file(c, cp, 0) == 0;
        free(cp);
    }
    if (!ok) fprintf(stderr, "    dequantized copy of %s failed: %s\n", qdir, err);
    json_decref(c);
    free(sp);
    free(src);
    free(names);
    free(path);
    if (q) xi_st_close(q);
    if (!ok) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* Logits of every row of a 24-token prompt through the AWQ model (int4 experts and attention,
 * 16-bit router) and through its dequantized f32 twin, with fp32 activations: within 1e-3. */
static void awq_moe_vs_dequantized(const char *kernels, const char *qdir, const char *fdir) {
    char err[512] = "";
    xi_model_params pq = {.dir = qdir, .dtype = "float32", .kernels = kernels, .n_threads = 2};
    xi_model_params pf = pq;
    pf.dir = fdir;
    xi_model *mq = xi_model_load(&pq, err, sizeof err);
    CHECKF(mq, "%s", err);
    xi_model *mf = xi_model_load(&pf, err, sizeof err);
    CHECKF(mf, "%s", err);
    CHECK(!strcmp(xi_model_quantization(mq), "awq") && !strcmp(xi_model_quantization(mf), "none"));
    const xi_config *c = xi_model_config(mq);
    const int n = 24, V = c->vocab_size;
    int32_t ids[24];
    for (int i = 0; i < n; i++) ids[i] = 100 + 997 * i;
    float *lq = malloc(sizeof(float) * (size_t)V * n), *lf = malloc(sizeof(float) * (size_t)V * n);
    double maxd = 0, range = 0;
    xi_model *ms[2] = {mq, mf};
    float *ls[2] = {lq, lf};
    for (int k = 0; k < 2; k++) {
        xi_kv_store *kv = xi_kv_store_new(c, 4, 16, XI_F32, err, sizeof err);
        tm_seq s;
        tm_seq_init(&s, 0, 4);
        tm_seq *sp = &s;
        const int32_t *ip = ids;
        int nn = n;
        CHECK(kv && tm_forward(ms[k], kv, &sp, &ip, &nn, 1, 1, ls[k]) == 0);
        xi_kv_store_free(kv);
    }
    for (size_t j = 0; j < (size_t)V * n; j++) {
        /* compares, not fmax: aarch64 gcc 12's vectorizer crashes on an fmax reduction here */
        if (fabs(lq[j] - lf[j]) > maxd) maxd = fabs(lq[j] - lf[j]);
        if (fabs(lf[j]) > range) range = fabs(lf[j]);
    }
    CHECKF(maxd < 1e-3 && range > 0.05, "%s: AWQ vs dequantized logits differ by %g (range %g)",
           kernels, maxd, range);
    free(lq);
    free(lf);
    xi_model_free(mq);
    xi_model_free(mf);
}

TEST(test_genmodel_awq_moe_matches_its_dequantized_weights) {
    char *qdir = tm_genmodel("moe-awq", "tiny-moe", "--awq --group-size 32 --seed 11");
    CHECK(qdir);
    char err[512] = "";
    xi_st_set *s = xi_st_open_dir(qdir, err, sizeof err);
    CHECKF(s, "%s", err);
    /* router in 16 bits, experts and attention AWQ, q/k norms of head_dim 32 */
    CHECK(shape_is(s, "model.layers.1.mlp.gate.weight", XI_F16, 8, 64));
    CHECK(shape_is(s, "model.layers.1.mlp.experts.7.down_proj.qweight", XI_I32, 32, 8));
    CHECK(shape_is(s, "model.layers.0.mlp.experts.0.gate_proj.scales", XI_F16, 2, 32));
    CHECK(shape_is(s, "model.layers.0.self_attn.q_norm.weight", XI_F16, 32, 0));
    CHECK(!xi_st_find(s, "model.layers.0.mlp.gate_proj.qweight"));
    xi_st_close(s);
    char *fdir = dequantized_copy(qdir, "moe-deq");
    CHECK(fdir);
    /* the dequantized twin runs fp32 activations: compare the exact precision */
    TM_FOR_EACH_VARIANT_IN(1, awq_moe_vs_dequantized, qdir, fdir);
    /* int4 experts keep the batch / chunk invariance too, in both precisions */
    TM_FOR_EACH_VARIANT_IN(3, tm_invariance, qdir, XI_F32, NULL);
    free(qdir);
    free(fdir);
}

/* --load-format mmap: AWQ experts stay in the file until a token is routed to them, then
 * are repacked (the pool splits the missing ones). Exactly the routed experts get built, each
 * into the very bytes of an expert repacked at load. (The logits are compared with a tolerance:
 * under mmap the float router and lm_head run row-major from the file, not blocked.) */
typedef struct routed {
    int n_layers, E;
    unsigned char used[8][8];
} routed;

static void note_route(void *user, int layer, int T, int k, const int32_t *sel, const float *w) {
    (void)w;
    routed *r = user;
    for (int i = 0; i < T * k; i++) r->used[layer][sel[i]] = 1;
}

static int same_awq_bytes(const xi_weight *a, const xi_weight *b) {
    const size_t n = (size_t)(a->n_out * a->n_in / 2), g = (size_t)(a->n_out * (a->n_in / a->group_size));
    return a->dtype == XI_Q4_AWQ && b->dtype == XI_Q4_AWQ && a->n_out == b->n_out &&
           a->n_in == b->n_in && a->block == b->block && a->group_size == b->group_size &&
           !memcmp(a->data, b->data, n) && !memcmp(a->scale, b->scale, g * sizeof(float)) &&
           !memcmp(a->zero, b->zero, g);
}

/* Repacked experts of m are exactly those routed to, with the bytes of eager's; 0 if not. */
static int ready_matches_routed(const xi_model *m, const xi_model *eager, const routed *r,
                                int *n_ready) {
    *n_ready = 0;
    for (int l = 0; l < r->n_layers; l++) {
        const xi_layer *L = &m->layers[l], *Le = &eager->layers[l];
        if (!L->esrc) continue;
        for (int e = 0; e < r->E; e++) {
            const int ready = L->egate[e].data && L->eup[e].data && L->edown[e].data;
            const int none = !L->egate[e].data && !L->eup[e].data && !L->edown[e].data;
            if (ready ? !r->used[l][e] : !none || r->used[l][e]) return 0;
            if (ready && (!same_awq_bytes(&L->egate[e], &Le->egate[e]) ||
                          !same_awq_bytes(&L->eup[e], &Le->eup[e]) ||
                          !same_awq_bytes(&L->edown[e], &Le->edown[e])))
                return 0;
            *n_ready += ready;
        }
    }
    return 1;
}

static void awq_experts_on_first_use(const char *kernels, const char *dir) {
    char err[512] = "";
    xi_model_params pe = {.dir = dir, .dtype = "float32", .kernels = kernels, .n_threads = 2};
    xi_model_params pl = pe;
    pl.load_format = "mmap";
    xi_model *me = xi_model_load(&pe, err, sizeof err), *ml = xi_model_load(&pl, err, sizeof err);
    CHECKF(me && ml, "%s", err);
    const xi_config *c = xi_model_config(me);
    routed r = {.n_layers = c->n_layers, .E = c->layer[1].n_experts};
    CHECK(r.n_layers <= 8 && r.E == 8 && c->layer[1].top_k == 2);
    int moe_layers = 0, n_ready = -1;
    for (int l = 0; l < c->n_layers; l++) {
        moe_layers += ml->layers[l].esrc != NULL;
        CHECK(!me->layers[l].esrc); /* loaded eagerly: nothing left in the file */
    }
    CHECK(moe_layers > 0 && ready_matches_routed(ml, me, &r, &n_ready) && n_ready == 0);
    CHECK(xi_model_weight_bytes(ml) == xi_model_weight_bytes(me) &&
          xi_model_n_params(ml) == xi_model_n_params(me));
    ml->route_hook = note_route;
    ml->route_user = &r;
    const int n = 24, V = c->vocab_size;
    int32_t ids[24];
    for (int i = 0; i < n; i++) ids[i] = 100 + 997 * i;
    float *le = malloc(sizeof(float) * (size_t)V), *ll = malloc(sizeof(float) * (size_t)V);
    xi_kv_store *kve = xi_kv_store_new(c, 4, 16, XI_F32, err, sizeof err),
                *kvl = xi_kv_store_new(c, 4, 16, XI_F32, err, sizeof err);
    tm_seq se, sl;
    tm_seq_init(&se, 0, 4);
    tm_seq_init(&sl, 0, 4);
    tm_seq *sep = &se, *slp = &sl;
    const int32_t *ip = ids;
    int nn = n;
    CHECK(kve && kvl && tm_forward(me, kve, &sep, &ip, &nn, 1, 0, le) == 0);
    /* three tokens route to at most 6 of the 8 experts of a layer: the rest stay in the file */
    int n3 = 3, n21 = n - 3;
    CHECK(tm_forward(ml, kvl, &slp, &ip, &n3, 1, 0, NULL) == 0);
    CHECKF(ready_matches_routed(ml, me, &r, &n_ready) && n_ready > 0 && n_ready <= 6 * moe_layers,
           "%s: after 3 tokens %d experts repacked", kernels, n_ready);
    const int32_t *rest = ids + 3;
    CHECK(tm_forward(ml, kvl, &slp, &rest, &n21, 1, 0, ll) == 0);
    int n_after = 0;
    CHECK(ready_matches_routed(ml, me, &r, &n_after) && n_after >= n_ready);
    double maxd = 0;
    for (int j = 0; j < V; j++)
        if (fabs(le[j] - ll[j]) > maxd) maxd = fabs(le[j] - ll[j]);
    CHECKF(maxd < 1e-4, "%s: repacked on first use, logits %g away", kernels, maxd);
    xi_kv_store_free(kve);
    xi_kv_store_free(kvl);
    free(le);
    free(ll);
    xi_model_free(me);
    xi_model_free(ml);
}

TEST(test_genmodel_awq_moe_experts_are_repacked_on_first_use_under_mmap) {
    char *dir = tm_genmodel("moe-awq-lazy", "tiny-moe", "--awq --group-size 32 --seed 12");
    CHECK(dir);
    TM_FOR_EACH_VARIANT_IN(3, awq_experts_on_first_use, dir);
    free(dir);
}

/* ---- --gguf: the folder's model as one GGUF file */

/* Logits of every row of a 12-token prompt (heap, [12][vocab], vocab in *V); NULL on failure. */
static float *prompt_logits(const char *model, const char *dtype, int *V) {
    char err[512] = "";
    xi_model_params p = {.dir = model, .dtype = dtype, .n_threads = 2};
    xi_model *m = xi_model_load(&p, err, sizeof err);
    if (!m) {
        fprintf(stderr, "    %s: %s\n", model, err);
        return NULL;
    }
    const xi_config *c = xi_model_config(m);
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = 100 + 997 * i;
    const int32_t *ip = ids;
    int n = 12;
    *V = c->vocab_size;
    float *out = malloc(sizeof *out * (size_t)n * (size_t)*V);
    xi_kv_store *kv = xi_kv_store_new(c, 4, 16, XI_F32, err, sizeof err);
    tm_seq s;
    tm_seq_init(&s, 0, 4);
    tm_seq *sp = &s;
    if (!kv || !out || tm_forward(m, kv, &sp, &ip, &n, 1, 1, out)) {
        free(out);
        out = NULL;
    }
    xi_kv_store_free(kv);
    xi_model_free(m);
    return out;
}

/* The largest |logit difference| between two models and the largest |logit| of b. */
static double logit_diff(const char *a, const char *b, const char *dtype, double *range) {
    int va = 0, vb = 0;
    float *la = prompt_logits(a, dtype, &va), *lb = prompt_logits(b, dtype, &vb);
    double worst = la && lb && va == vb ? 0 : INFINITY;
    *range = 0;
    for (size_t i = 0; isfinite(worst) && i < (size_t)12 * (size_t)va; i++) {
        if (fabs(la[i] - lb[i]) > worst) worst = fabs(la[i] - lb[i]);
        if (fabs(lb[i]) > *range) *range = fabs(lb[i]);
    }
    free(la);
    free(lb);
    return worst;
}

/* The same ids for texts with and without special tokens, the same text back, template, EOS. */
static void same_tokenizer(const char *gguf, const char *dir) {
    char err[512] = "";
    xi_tokenizer *a = xi_tokenizer_load_model(gguf, err, sizeof err), *b = xi_tokenizer_load(dir, err, sizeof err);
    CHECKF(a && b, "%s", err);
    static const char *const texts[] = {
        "Hello world! 12345 ñandú 你好", "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
        "  leading spaces\tand\ttabs\n\n", "I've been 'there'... don't; émigré — naïve"};
    for (size_t i = 0; i < XI_ARRAY_LEN(texts); i++)
        for (int parse = 0; parse < 2; parse++) {
            int32_t *x = NULL, *y = NULL;
            int nx = xi_tokenizer_encode(a, texts[i], strlen(texts[i]), 1, parse, &x, err, sizeof err);
            int ny = xi_tokenizer_encode(b, texts[i], strlen(texts[i]), 1, parse, &y, err, sizeof err);
            char *d = nx > 0 ? xi_tokenizer_decode(a, x, nx, 0, NULL, err, sizeof err) : NULL;
            int same = nx == ny && nx > 0 && !memcmp(x, y, (size_t)nx * sizeof *x) && d && !strcmp(d, texts[i]);
            free(x);
            free(y);
            free(d);
            CHECKF(same, "text %zu (parse %d): %d vs %d ids", i, parse, nx, ny);
        }
    CHECK_STR(xi_tokenizer_chat_template(a), xi_tokenizer_chat_template(b));
    CHECK_EQ(xi_tokenizer_eos_id(a), xi_tokenizer_eos_id(b));
    xi_tokenizer_free(a);
    xi_tokenizer_free(b);
}

static char *cli_generate(const char *model) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s generate --model '%s' --prompt 'Once upon a time' --max-tokens 6 "
             "--temperature 0 --ignore-eos --dtype float32 2>/dev/null", xi_test_bin(), model);
    int rc = xi_test_run(cmd, &out);
    if (rc) fprintf(stderr, "    %s -> %d\n", cmd, rc);
    return out;
}

/* The F32 / F16 GGUF of a model gives the logits of the folder of that dtype (qwen2 with q/k/v
 * bias and tied embeddings; qwen3moe with q/k norms and stacked experts), Q8_0 stays near F32;
 * metadata as llama.cpp reads it; the tokenizer and `xinfer generate` as the folder's. */
TEST(test_genmodel_gguf_gives_the_folders_logits_and_tokenizer) {
    static const char *const cases[][3] = {
        {"tiny", "f32", "float32"}, {"tiny", "f16", NULL}, {"tiny-moe", "f32", "float32"}};
    char *f32_dir = NULL, *f32_gguf = NULL;
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        char sub[64], args[128];
        snprintf(sub, sizeof sub, "g-%s-%s", cases[c][0], cases[c][1]);
        snprintf(args, sizeof args, "--dtype %s --seed 5", cases[c][1]);
        char *dir = tm_genmodel(sub, cases[c][0], args);
        strcat(sub, ".gguf");
        snprintf(args, sizeof args, "--gguf %s --seed 5", cases[c][1]);
        char *gguf = tm_genmodel(sub, cases[c][0], args);
        CHECK(dir && gguf);
        double range, d = logit_diff(gguf, dir, cases[c][2], &range);
        printf("  %s %s: GGUF vs folder logits differ by %.3g (range %.3g)\n", cases[c][0], cases[c][1], d, range);
        CHECKF(d <= 1e-5 && range > 0.05, "%s %s: %g", cases[c][0], cases[c][1], d);
        if (c == 0) {
            f32_dir = dir, f32_gguf = gguf;
            continue;
        }
        char err[512] = "";
        xi_gguf *g = xi_gguf_open(gguf, err, sizeof err);
        CHECKF(g, "%s", err);
        const xi_gguf_tensor *t = xi_gguf_find_tensor(g, c == 1 ? "token_embd.weight" : "blk.1.ffn_down_exps.weight");
        int64_t v = 0;
        if (c == 1) { /* tiny f16 */
            CHECK_STR(xi_gguf_get_str(g, "general.architecture"), "qwen2");
            CHECK(t && t->type->id == XI_GGML_F16 && t->ne[0] == 64 && t->ne[1] == 151936);
            t = xi_gguf_find_tensor(g, "blk.0.attn_q.bias");
            CHECK(t && t->type->id == XI_GGML_F32 && t->n_dims == 1 && t->ne[0] == 64);
            CHECK(!xi_gguf_find_tensor(g, "output.weight"));
            CHECK(xi_gguf_get_i64(g, "qwen2.block_count", &v) == 0 && v == 2);
            CHECK(xi_gguf_get_i64(g, "general.file_type", &v) == 0 && v == 1);
            CHECK_STR(xi_gguf_get_str(g, "tokenizer.ggml.model"), "gpt2");
            CHECK_STR(xi_gguf_get_str(g, "tokenizer.ggml.pre"), "qwen2");
            CHECK(xi_gguf_find_kv(g, "tokenizer.ggml.tokens")->n == 151936);
            CHECK(xi_gguf_get_i64(g, "tokenizer.ggml.padding_token_id", &v) == 0 && v == 151643);
            same_tokenizer(gguf, dir);
        } else { /* tiny-moe: 8 experts of [32, 64] down projections stacked */
            CHECK_STR(xi_gguf_get_str(g, "general.architecture"), "qwen3moe");
            CHECK(t && t->n_dims == 3 && t->ne[0] == 32 && t->ne[1] == 64 && t->ne[2] == 8);
            CHECK(xi_gguf_find_tensor(g, "blk.0.attn_k_norm.weight"));
            CHECK(xi_gguf_get_i64(g, "qwen3moe.expert_used_count", &v) == 0 && v == 2);
        }
        xi_gguf_close(g);
        free(dir);
        free(gguf);
        CHECK(!xi_test_failed());
    }
    /* Q8_0 (xinfer's quantization of the f32 values): near the f32 folder, not equal */
    char *q8 = tm_genmodel("g-tiny-q8.gguf", "tiny", "--gguf Q8_0 --seed 5");
    CHECK(q8);
    double range, d = logit_diff(q8, f32_dir, "float32", &range);
    printf("  tiny q8_0: GGUF vs f32 folder logits differ by %.3g (range %.3g)\n", d, range);
    CHECKF(d > 0 && d < 0.05 * range, "q8_0: %g of %g", d, range);
    char *ga = cli_generate(f32_gguf), *gb = cli_generate(f32_dir);
    CHECKF(ga && gb && strlen(ga) > 1 && !strcmp(ga, gb), "generate: '%s' vs '%s'", ga ? ga : "", gb ? gb : "");
    free(ga);
    free(gb);
    free(q8);
    free(f32_dir);
    free(f32_gguf);
}
