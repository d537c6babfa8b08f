/* Whole models on the integer path (int8 activations): how far it moves the logits from the
 * exact (fp32-activation) path on a trained model (bench/bench_accuracy reports the same for
 * real-sized models; test_model.c checks its batch, chunk and thread invariance). */
#include <stdlib.h>

#include "model_util.h"
#include "test.h"

static xi_model *load_prec(const char *rel, const char *quant, const char *kernels,
                           const char *precision, int threads) {
    setenv("XINFER_KERNEL_PRECISION", precision, 1);
    xi_model *m = tm_load_ex(rel, NULL, quant, kernels, threads);
    unsetenv("XINFER_KERNEL_PRECISION");
    return m;
}

/* Greedy from BOS with the exact path; the int8 path is fed the same tokens. Per step, the
 * largest logit difference; at the end, how often the two argmaxes agree. Measured on AVX2
 * over 120 tokens: stories260K-awq 120/120 agree, largest difference 0.31; stories260K int8
 * 119/120, 0.29 (its logits span about +-15). The best variant only: every variant's
 * integer matmul has the reference's bits (test_kernels_qdot.c), and qemu is slow. */
static void track_exact(const char *rel, const char *quant) {
    const xi_ops *all[8];
    const char *kernels = all[xi_ops_available(all, 8) - 1]->name;
    xi_model *me = load_prec(rel, quant, kernels, "exact", 2), *mq = load_prec(rel, quant, kernels, "int8", 2);
    CHECK(me && mq);
    const xi_config *c = xi_model_config(me);
    char err[256];
    xi_kv_store *ke = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err),
                *kq = xi_kv_store_new(c, 16, 16, XI_F32, err, sizeof err);
    CHECK(ke && kq);
    tm_seq a, b;
    tm_seq_init(&a, 1, 15);
    tm_seq_init(&b, 1, 15);
    tm_seq *pa = &a, *pb = &b;
    float *le = malloc(sizeof(float) * c->vocab_size), *lq = malloc(sizeof(float) * c->vocab_size);
    int32_t tok = 1; /* BOS */
    const int N = 120;
    int agree = 0;
    double worst = 0;
    for (int t = 0; t < N; t++) {
        const int32_t *tp = &tok;
        int one = 1;
        CHECK(tm_forward(me, ke, &pa, &tp, &one, 1, 0, le) == 0);
        CHECK(tm_forward(mq, kq, &pb, &tp, &one, 1, 0, lq) == 0);
        for (int j = 0; j < c->vocab_size; j++) worst = fmax(worst, fabs((double)le[j] - lq[j]));
        tok = tm_argmax(le, c->vocab_size);
        agree += tm_argmax(lq, c->vocab_size) == tok;
    }
    printf("    %s %s%s: int8 vs exact: top-1 %d/%d agree, largest logit difference %.3f\n",
           kernels, rel, quant ? " --quantization int8" : "", agree, N, worst);
    CHECKF(worst > 0, "the int8 path gave the exact path's logits: it did not run");
    CHECKF(worst < 0.75 && agree >= N - 3, "%d/%d agree, largest difference %g", agree, N, worst);
    free(le);
    free(lq);
    xi_kv_store_free(ke);
    xi_kv_store_free(kq);
    xi_model_free(me);
    xi_model_free(mq);
}

TEST(test_int8_activations_track_exact_path_stories260k_awq) {
    track_exact("models/stories260K-awq", NULL);
}
TEST(test_int8_activations_track_exact_path_stories260k_int8) {
    track_exact("models/stories260K", "int8");
}

/* --kernel-precision reaches the model: each name loads its table, another is an error that
 * names it. */
TEST(test_kernel_precision_picks_the_table_and_rejects_unknown_names) {
    char *dir = xi_test_data("models/stories260K-awq");
    char err[256] = "";
    const char *names[3] = {"exact", "int8", "fp8"};
    for (int i = 0; i < 3; i++) {
        xi_model_params p = {.dir = dir, .n_threads = 1, .kernel_precision = names[i]};
        xi_model *m = xi_model_load(&p, err, sizeof err);
        if (i < 2) {
            CHECKF(m, "%s: %s", names[i], err);
            CHECK(!strcmp(xi_model_ops(m)->precision, names[i]));
            CHECK((xi_model_ops(m)->matmul_q != NULL) == (i == 1));
            xi_model_free(m);
        } else {
            CHECK(!m);
            CHECKF(strstr(err, "fp8") && strstr(err, "exact"), "%s", err);
        }
    }
    free(dir);
}
