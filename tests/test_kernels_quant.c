/* Weight packing: AutoAWQ GEMM repacking and per-channel int8 quantization. */
#include <stdlib.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "model/safetensors.h"
#include "test.h"

/* The inverse of AutoAWQ's packing order, written independently of the packer: output column
 * 8 i + c lives in nibble AWQ_INV[c] of packed column i. */
static const int AWQ_INV[8] = {0, 4, 1, 5, 2, 6, 3, 7};

static float awq_direct(const int32_t *qw, const int32_t *qz, const uint16_t *sc, int64_t n_out,
                        int gs, int64_t n, int64_t k) {
    const int64_t P = n_out / 8, g = k / gs;
    const int sh = 4 * AWQ_INV[n % 8];
    const int q = (int)(((uint32_t)qw[k * P + n / 8] >> sh) & 15);
    const int z = (int)(((uint32_t)qz[g * P + n / 8] >> sh) & 15);
    return (float)(q - z) * xi_f16_to_f32(sc[g * n_out + n]);
}

TEST(test_kernels_awq_pack_matches_direct_dequant_of_stories260K) {
    char err[256];
    xi_st_set *awq = xi_st_open_dir(xi_test_data("models/stories260K-awq"), err, sizeof err);
    CHECKF(awq, "%s", err);
    xi_st_set *f32 = xi_st_open_dir(xi_test_data("models/stories260K"), err, sizeof err);
    CHECKF(f32, "%s", err);
    const char *mods[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    for (size_t m = 0; m < XI_ARRAY_LEN(mods); m++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.0.%s.qweight", mods[m]);
        const xi_st_tensor *qw = xi_st_find(awq, name);
        snprintf(name, sizeof name, "model.layers.0.%s.qzeros", mods[m]);
        const xi_st_tensor *qz = xi_st_find(awq, name);
        snprintf(name, sizeof name, "model.layers.0.%s.scales", mods[m]);
        const xi_st_tensor *sc = xi_st_find(awq, name);
        snprintf(name, sizeof name, "model.layers.0.%s.weight", mods[m]);
        const xi_st_tensor *orig = xi_st_find(f32, name);
        CHECK(qw && qz && sc && orig);
        CHECK(qw->dtype == XI_I32 && qz->dtype == XI_I32 && sc->dtype == XI_F16);
        int64_t n_in, n_out;
        CHECKF(!xi_awq_check_shapes(qw->shape, qz->shape, sc->shape, 32, &n_in, &n_out, err,
                                    sizeof err), "%s", err);
        xi_weight w;
        void *owned;
        size_t owned_bytes;
        CHECKF(!xi_weight_pack_awq(&w, qw->data, qz->data, sc->data, n_in, n_out, 32, &owned,
                                   &owned_bytes, err, sizeof err), "%s", err);
        float *row = malloc((size_t)n_in * 4);
        int bad = 0;
        double worst_vs_orig = 0;
        for (int64_t n = 0; n < n_out && !bad; n++) {
            xi_weight_row(&w, n, row);
            for (int64_t k = 0; k < n_in; k++) {
                const float d = awq_direct(qw->data, qz->data, sc->data, n_out, 32, n, k);
                if (row[k] != d) bad = 1;
                /* The checkpoint rounds the original weights to the nearest level of their
                 * group, so the dequantized value is within half a step of the original
                 * (the MLP width was zero-padded 172 -> 192; compare the original part). */
                if (n < orig->shape[0] && k < orig->shape[1]) {
                    const float o = ((const float *)orig->data)[n * orig->shape[1] + k];
                    const float step = xi_f16_to_f32(((const uint16_t *)sc->data)[(k / 32) * n_out + n]);
                    worst_vs_orig = fmax(worst_vs_orig, fabs((double)row[k] - o) / step);
                }
            }
        }
        free(row);
        xi_free_big(owned, owned_bytes);
        CHECKF(!bad, "%s: packed weight differs from the direct dequantization", mods[m]);
        CHECKF(worst_vs_orig <= 0.51, "%s: %.3f steps from the original weight", mods[m],
               worst_vs_orig);
    }
    xi_st_close(awq);
    xi_st_close(f32);
}

/* Random levels packed the AutoAWQ way, for group sizes 32/64/128; the packer must recover
 * each level, zero and scale, and matmul must use them. */
TEST(test_kernels_awq_pack_recovers_levels_for_each_group_size) {
    const int gss[] = {32, 64, 128};
    uint32_t seed = 12345;
    for (size_t gi = 0; gi < XI_ARRAY_LEN(gss); gi++) {
        const int gs = gss[gi];
        const int64_t n_in = 2 * gs, n_out = 24, P = n_out / 8, G = n_in / gs;
        uint8_t *lvl = malloc((size_t)(n_in * n_out)), *zz = malloc((size_t)(G * n_out));
        int32_t *qw = calloc((size_t)(n_in * P), 4), *qz = calloc((size_t)(G * P), 4);
        uint16_t *sc = malloc((size_t)(G * n_out) * 2);
        for (int64_t k = 0; k < n_in; k++)
            for (int64_t n = 0; n < n_out; n++) {
                seed = seed * 1103515245u + 12345u;
                lvl[n * n_in + k] = (uint8_t)((seed >> 16) & 15);
                qw[k * P + n / 8] |= (int32_t)((uint32_t)lvl[n * n_in + k] << (4 * AWQ_INV[n % 8]));
            }
        for (int64_t g = 0; g < G; g++)
            for (int64_t n = 0; n < n_out; n++) {
                zz[n * G + g] = (uint8_t)((g * 7 + n) % 16);
                qz[g * P + n / 8] |= (int32_t)((uint32_t)zz[n * G + g] << (4 * AWQ_INV[n % 8]));
                sc[g * n_out + n] = xi_f32_to_f16(0.01f * (float)(1 + (n + g) % 9));
            }
        xi_weight w;
        void *owned;
        size_t ob;
        char err[200];
        CHECKF(!xi_weight_pack_awq(&w, qw, qz, sc, n_in, n_out, gs, &owned, &ob, err, sizeof err),
               "%s", err);
        float *row = malloc((size_t)n_in * 4);
        int bad = 0;
        for (int64_t n = 0; n < n_out; n++) {
            xi_weight_row(&w, n, row);
            for (int64_t k = 0; k < n_in; k++) {
                const float want = (float)((int)lvl[n * n_in + k] - zz[n * G + k / gs]) *
                                   xi_f16_to_f32(sc[(k / gs) * n_out + n]);
                bad += row[k] != want;
            }
        }
        free(row);
        free(lvl);
        free(zz);
        free(qw);
        free(qz);
        free(sc);
        xi_free_big(owned, ob);
        CHECKF(!bad, "group %d: %d wrong weights", gs, bad);
    }
}

TEST(test_kernels_awq_pack_rejects_bad_group_and_shapes) {
    char err[200] = "";
    int32_t qw[64 * 2] = {0}, qz[4] = {0};
    uint16_t sc[2 * 16] = {0};
    xi_weight w;
    void *owned = NULL;
    size_t ob = 0;
    CHECK(xi_weight_pack_awq(&w, qw, qz, sc, 64, 16, 48, &owned, &ob, err, sizeof err) == -1);
    CHECK(strstr(err, "group size 48") != NULL);
    CHECK(xi_weight_pack_awq(&w, qw, qz, sc, 64, 12, 32, &owned, &ob, err, sizeof err) == -1);
    CHECK(owned == NULL);
    int64_t n_in, n_out;
    const int64_t qws[2] = {64, 2}, good_z[2] = {2, 2}, good_s[2] = {2, 16};
    const int64_t bad_z[2] = {2, 3}, bad_s[2] = {2, 8};
    CHECK(!xi_awq_check_shapes(qws, good_z, good_s, 32, &n_in, &n_out, err, sizeof err));
    CHECK_EQ(n_in, 64);
    CHECK_EQ(n_out, 16);
    CHECK(xi_awq_check_shapes(qws, bad_z, good_s, 32, &n_in, &n_out, err, sizeof err) == -1);
    CHECK(strstr(err, "qzeros") != NULL);
    CHECK(xi_awq_check_shapes(qws, good_z, bad_s, 32, &n_in, &n_out, err, sizeof err) == -1);
    CHECK(strstr(err, "scales") != NULL);
    CHECK(xi_awq_check_shapes(qws, good_z, good_s, 24, &n_in, &n_out, err, sizeof err) == -1);
    CHECK(strstr(err, "does not divide") != NULL);
}

TEST(test_kernels_q8_quantize_is_per_channel_symmetric_and_rounds_to_nearest) {
    const int64_t n_out = 5, n_in = 37;
    float *src = malloc((size_t)(n_out * n_in) * 4);
    for (int64_t i = 0; i < n_out * n_in; i++) src[i] = sinf((float)i * 0.37f) * (float)(1 + i / n_in);
    for (int64_t k = 0; k < n_in; k++) src[3 * n_in + k] = 0.0f; /* an all-zero channel */
    src[1 * n_in + 4] = -9.0f;                                   /* the largest magnitude, negative */
    const xi_dtype dts[] = {XI_F32, XI_F16, XI_BF16};
    for (size_t d = 0; d < XI_ARRAY_LEN(dts); d++) {
        void *conv = malloc((size_t)(n_out * n_in) * 4);
        xi_from_f32(conv, dts[d], src, (size_t)(n_out * n_in));
        float *exact = malloc((size_t)(n_out * n_in) * 4);
        xi_to_f32(exact, conv, dts[d], (size_t)(n_out * n_in));
        xi_weight w;
        void *owned;
        size_t ob;
        char err[200];
        CHECKF(!xi_weight_quantize_q8(&w, conv, dts[d], n_out, n_in, &owned, &ob, err, sizeof err),
               "%s", err);
        CHECK(w.dtype == XI_Q8);
        const int8_t *q = w.data;
        CHECK_EQ(q[1 * n_in + 4], -127);
        CHECK(w.scale[3] == 0.0f);
        float row[64];
        for (int64_t n = 0; n < n_out; n++) {
            xi_weight_row(&w, n, row);
            for (int64_t k = 0; k < n_in; k++)
                CHECKF(fabsf(row[k] - exact[n * n_in + k]) <= 0.5f * w.scale[n] * 1.0001f,
                       "%s n=%lld k=%lld: %g vs %g", xi_dtype_name(dts[d]), (long long)n,
                       (long long)k, row[k], exact[n * n_in + k]);
        }
        xi_free_big(owned, ob);
        free(conv);
        free(exact);
    }
    char err[200] = "";
    xi_weight w;
    void *owned;
    size_t ob;
    CHECK(xi_weight_quantize_q8(&w, src, XI_I32, n_out, n_in, &owned, &ob, err, sizeof err) == -1);
    CHECK(strstr(err, "i32") != NULL || strstr(err, "dtype") != NULL);
    free(src);
}
