/* Llama 3 GGUF files carry their RoPE scaling as the tensor rope_freqs.weight (one divisor per
 * rotary frequency, what llama.cpp's converter computes from config.json's rope_scaling llama3)
 * and no rope.scaling.type. genmodel's tiny-llama preset (head_dim 16, rope_theta 1e4,
 * llama3 factor 8 over an original context of 64 positions, so 7 of its 8 frequencies are
 * scaled) is written both as a folder with that rope_scaling and as such a GGUF file; the file
 * must give the folder's logits, its factors must be what moves them, and bad factors are
 * refused by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/model_internal.h"
#include "model_util.h"
#include "test.h"

#define N_POS 64 /* positions compared: up to the original context (64) of the preset */

static const int32_t *prompt(void) {
    static int32_t ids[N_POS];
    for (int i = 0; i < N_POS; i++) ids[i] = 3 + (29 * i + 7) % 509; /* past <unk> <s> </s> */
    return ids;
}

/* Logits of every position of the prompt for the model at path (heap, [N_POS][vocab]). */
static float *logits_of(const char *path, int *vocab) {
    xi_model *m = tm_load(path, "float32", NULL, 1);
    float *l = m ? tm_logits_all(m, prompt(), N_POS) : NULL;
    if (m) *vocab = xi_model_config(m)->vocab_size;
    xi_model_free(m);
    return l;
}

/* The largest |a - b| over the rows [row0, row1) of two [N_POS][V] logit sets. */
static double max_diff(const float *a, const float *b, int V, int row0, int row1) {
    double worst = 0;
    /* compares, not fmax: aarch64 gcc 12's vectorizer crashes on an fmax reduction */
    for (size_t i = (size_t)row0 * (size_t)V; i < (size_t)row1 * (size_t)V; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (d > worst) worst = d;
    }
    return worst;
}

/* A copy of the GGUF file src named name in the test folder, its rope_freqs.weight replaced by
 * n values x stored as ggml type `type` (F32 or F16); everything else as it is. */
static char *with_rope_freqs(const char *src, const char *name, int type, int64_t n,
                             const float *x) {
    char err[512] = "";
    xi_gguf *g = xi_gguf_open(src, err, sizeof err);
    if (!g) {
        fprintf(stderr, "    %s\n", err);
        return NULL;
    }
    xi_gguf_writer *w = xi_gguf_writer_new(0);
    tm_gguf_copy_kv(w, g);
    for (int i = 0; i < xi_gguf_tensor_count(g); i++) {
        const xi_gguf_tensor *t = xi_gguf_tensor_at(g, i);
        if (strcmp(t->name, "rope_freqs.weight"))
            xi_gguf_write_tensor(w, t->name, t->type->id, t->n_dims, t->ne, t->data);
        else
            xi_gguf_write_tensor_f32(w, t->name, type, 1, &n, x);
    }
    char *path = xi_path_join(xi_test_tmpdir(), name);
    if (xi_gguf_writer_write(w, path, err, sizeof err)) {
        fprintf(stderr, "    %s\n", err);
        free(path);
        path = NULL;
    }
    xi_gguf_writer_free(w);
    xi_gguf_close(g);
    return path;
}

/* The file is what llama.cpp's converter makes of a Llama 3 folder: rope_freqs [8] F32, no
 * scaling key. Its frequencies are the folder's llama3 ones to within the f32 rounding of the
 * stored factors, and so are its logits at every position. (Not bitwise: the ramp's two
 * factors are stored rounded to f32, which moves those frequencies by ~1e-8 relative.) */
TEST(test_gguf_rope_freqs_give_the_llama3_folders_logits) {
    char *dir = tm_genmodel("rf-folder", "tiny-llama", "--dtype f32 --seed 11");
    char *gguf = tm_genmodel("rf.gguf", "tiny-llama", "--gguf f32 --seed 11");
    CHECK(dir && gguf);
    char err[512] = "";
    xi_gguf *g = xi_gguf_open(gguf, err, sizeof err);
    CHECKF(g, "%s", err);
    const xi_gguf_tensor *t = xi_gguf_find_tensor(g, "rope_freqs.weight");
    CHECK(t && t->type->id == XI_GGML_F32 && t->n_dims == 1 && t->ne[0] == 8);
    CHECK(!xi_gguf_find_kv(g, "llama.rope.scaling.type"));
    xi_gguf_close(g);

    xi_model *a = tm_load(gguf, "float32", NULL, 1), *b = tm_load(dir, "float32", NULL, 1);
    CHECK(a && b);
    const xi_config *ca = xi_model_config(a), *cb = xi_model_config(b);
    CHECK(ca->rope_type == XI_ROPE_NONE && ca->rope_freq_factors);
    CHECK(cb->rope_type == XI_ROPE_LLAMA3 && !cb->rope_freq_factors && cb->head_dim == 16);
    xi_config plain = *cb;
    plain.rope_type = XI_ROPE_NONE;
    double fa[8], fb[8], fd[8], ma, mb, md;
    xi_rope_frequencies(ca, fa, &ma);
    xi_rope_frequencies(cb, fb, &mb);
    xi_rope_frequencies(&plain, fd, &md);
    int scaled = 0;
    for (int i = 0; i < 8; i++) {
        CHECKF(fabs(fa[i] - fb[i]) <= 1e-7 * fb[i], "frequency %d: %.17g (file) vs %.17g (llama3)",
               i, fa[i], fb[i]);
        scaled += fb[i] < fd[i] * (1 - 1e-3);
    }
    CHECK(ma == 1.0 && mb == 1.0);
    CHECKF(scaled == 7, "llama3 scales %d of 8 frequencies at this shape", scaled);
    xi_model_free(a);
    xi_model_free(b);

    int va = 0, vb = 0;
    float *la = logits_of(gguf, &va), *lb = logits_of(dir, &vb);
    CHECK(la && lb && va == vb && va == 512);
    double worst = max_diff(la, lb, va, 0, N_POS), range = 0;
    for (size_t i = 0; i < (size_t)N_POS * (size_t)va; i++)
        if (fabs(lb[i]) > range) range = fabs(lb[i]);
    printf("  rope_freqs GGUF vs llama3 folder: max |logit difference| %.3g over %d positions "
           "(|logit| <= %.3g)\n", worst, N_POS, range);
    CHECKF(worst <= 1e-5 && range > 0.05, "logits differ by %g", worst);
    free(la);
    free(lb);
    free(dir);
    free(gguf);
}

/* The factors are what scales: the same file with rope_freqs all 1 gives the logits of the
 * folder without rope_scaling (bitwise: dividing by 1 changes no frequency), equal to the
 * llama3 ones at position 0 (angle 0 whatever the frequency) and apart from them at every later
 * position by 100 times the f32 noise of the test above (~2e-7) or more: the random model's
 * logits span only about +-0.7, the rotation moves them by 1e-4 at position 1, 5e-3 at most. */
TEST(test_gguf_rope_freqs_all_ones_give_the_unscaled_logits) {
    char *dir = tm_genmodel("rf-plain", "tiny-llama", "--dtype f32 --seed 11");
    char *gguf = tm_genmodel("rf.gguf", "tiny-llama", "--gguf f32 --seed 11");
    CHECK(dir && gguf);
    char *cfg_path = xi_path_join(dir, "config.json");
    json_t *cfg = json_load_file(cfg_path, 0, NULL);
    CHECK(cfg && json_object_get(cfg, "rope_scaling"));
    json_object_set_new(cfg, "rope_scaling", json_null());
    CHECK(json_dump_file(cfg, cfg_path, JSON_INDENT(2)) == 0);
    json_decref(cfg);
    free(cfg_path);
    const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    char *flat = with_rope_freqs(gguf, "rf-ones.gguf", XI_GGML_F32, 8, ones);
    CHECK(flat);

    int v1 = 0, v2 = 0, v3 = 0;
    float *l_flat = logits_of(flat, &v1), *l_plain = logits_of(dir, &v2), *l_llama3 = logits_of(gguf, &v3);
    CHECK(l_flat && l_plain && l_llama3 && v1 == v2 && v2 == v3);
    const int V = v1;
    double same = max_diff(l_flat, l_plain, V, 0, N_POS);
    CHECKF(!memcmp(l_flat, l_plain, sizeof *l_flat * N_POS * (size_t)V),
           "rope_freqs all 1 vs no rope_scaling: %g", same);
    CHECK(!memcmp(l_flat, l_llama3, sizeof *l_flat * (size_t)V)); /* position 0 */
    double least = INFINITY, most = 0;
    for (int p = 1; p < N_POS; p++) {
        double d = max_diff(l_flat, l_llama3, V, p, p + 1);
        least = fmin(least, d);
        most = fmax(most, d);
    }
    printf("  rope_freqs all 1 vs no scaling %.3g; vs the llama3 factors at positions 1..%d: "
           "%.3g to %.3g\n", same, N_POS - 1, least, most);
    CHECKF(least > 2e-5 && most > 2e-3, "llama3 factors move positions 1.. by %g to %g only", least,
           most);
    free(l_flat);
    free(l_plain);
    free(l_llama3);
    free(flat);
    free(dir);
    free(gguf);
}

/* A wrong count or type, or a factor that is not finite and positive, is a one-line error
 * naming the file and the tensor; the export to a Hugging Face folder, which has no field for
 * such factors, refuses the file by the tensor's name. */
TEST(test_gguf_rope_freqs_bad_factors_are_refused_by_name) {
    char *gguf = tm_genmodel("rf.gguf", "tiny-llama", "--gguf f32 --seed 11");
    CHECK(gguf);
    static const struct {
        int type, n, bad; /* bad: index of the value set to x, -1 none */
        float x;
        const char *says;
    } cases[] = {
        {XI_GGML_F32, 7, -1, 0, "expected 8 f32 values"},
        {XI_GGML_F32, 9, -1, 0, "found 9"},
        {XI_GGML_F16, 8, -1, 0, "type f16"},
        {XI_GGML_F32, 8, 3, 0.0f, "value 3 is 0"},
        {XI_GGML_F32, 8, 5, -2.0f, "value 5 is -2"},
        {XI_GGML_F32, 8, 0, NAN, "value 0 is nan"},
        {XI_GGML_F32, 8, 7, INFINITY, "value 7 is inf"},
    };
    for (size_t c = 0; c < XI_ARRAY_LEN(cases); c++) {
        float x[9];
        for (int i = 0; i < 9; i++) x[i] = 1.0f + (float)i;
        if (cases[c].bad >= 0) x[cases[c].bad] = cases[c].x;
        char *bad = with_rope_freqs(gguf, "bad-rf.gguf", cases[c].type, cases[c].n, x);
        CHECK(bad);
        char err[512] = "";
        xi_model_params p = {.dir = bad, .n_threads = 1};
        xi_model *m = xi_model_load(&p, err, sizeof err);
        CHECKF(!m && strstr(err, "bad-rf.gguf") && strstr(err, "rope_freqs.weight") &&
                   strstr(err, cases[c].says) && !strchr(err, '\n'),
               "case %zu: %s", c, err);
        xi_model_free(m);
        free(bad);
    }
    char err[512] = "";
    char *out = xi_path_join(xi_test_tmpdir(), "rf-export");
    CHECK(mkdir(out, 0755) == 0);
    CHECK(xi_gguf_export_hf(gguf, out, XI_F32, err, sizeof err) != 0);
    CHECKF(strstr(err, "rope_freqs.weight") && strstr(err, "rf.gguf"), "%s", err);
    free(out);
    free(gguf);
}
