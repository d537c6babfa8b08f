/* kernels/quant: build the quantized xi_weight layouts once at load: repack AutoAWQ GEMM
 * tensors into awq-int4, quantize F32/F16/BF16 weights to per-channel int8, and the repack
 * hooks of the wformat rows (xi_weight_block asks the weight's row). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/wformat.h"

/* AutoAWQ packs 8 output columns per int32: nibble j (bits 4j..4j+3) of packed column i holds
 * output column 8 i + AWQ_ORDER[j] (its GEMM kernels unpack in this interleaved order). */
static const int AWQ_ORDER[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static inline int awq_nibble(int32_t packed, int j) { return (int)(((uint32_t)packed >> (4 * j)) & 15u); }

int xi_awq_check_shapes(const int64_t qweight[2], const int64_t qzeros[2], const int64_t scales[2],
                        int group_size, int64_t *n_in, int64_t *n_out, char *err, size_t errlen) {
    const int64_t in = qweight[0], out = qweight[1] * 8;
    if (in <= 0 || out <= 0)
        return xi_errf(err, errlen, "awq qweight shape [%lld, %lld] is empty", (long long)qweight[0],
                       (long long)qweight[1]);
    if (group_size <= 0 || in % group_size)
        return xi_errf(err, errlen, "awq group size %d does not divide the input dim %lld",
                       group_size, (long long)in);
    const int64_t groups = in / group_size;
    if (qzeros[0] != groups || qzeros[1] != qweight[1])
        return xi_errf(err, errlen, "awq qzeros shape [%lld, %lld], expected [%lld, %lld]",
                       (long long)qzeros[0], (long long)qzeros[1], (long long)groups,
                       (long long)qweight[1]);
    if (scales[0] != groups || scales[1] != out)
        return xi_errf(err, errlen, "awq scales shape [%lld, %lld], expected [%lld, %lld]",
                       (long long)scales[0], (long long)scales[1], (long long)groups,
                       (long long)out);
    *n_in = in;
    *n_out = out;
    return 0;
}

int xi_weight_pack_awq(xi_weight *w, const int32_t *qweight, const int32_t *qzeros,
                       const uint16_t *scales_f16, int64_t n_in, int64_t n_out, int group_size,
                       void **owned, size_t *owned_bytes, char *err, size_t errlen) {
    if (!qweight || !qzeros || !scales_f16)
        return xi_errf(err, errlen, "awq weight: missing qweight, qzeros or scales");
    if (n_in <= 0 || n_out <= 0 || n_out % 8)
        return xi_errf(err, errlen, "awq weight: shape [%lld in, %lld out] needs out %% 8 == 0",
                       (long long)n_in, (long long)n_out);
    if (group_size <= 0 || n_in % group_size)
        return xi_errf(err, errlen, "awq group size %d does not divide the input dim %lld",
                       group_size, (long long)n_in);
    if (n_in % 2)
        return xi_errf(err, errlen, "awq weight: odd input dim %lld", (long long)n_in);
    const int64_t groups = n_in / group_size, packed = n_out / 8;
    const size_t data_bytes = (size_t)(n_out * n_in / 2);
    const size_t scale_off = (data_bytes + 63) & ~(size_t)63;
    const size_t zero_off = scale_off + (((size_t)(n_out * groups) * 4 + 63) & ~(size_t)63);
    const size_t total = zero_off + (size_t)(n_out * groups);
    uint8_t *buf = xi_alloc_big(total);
    if (!buf) return xi_errf(err, errlen, "awq weight: out of memory for %zu bytes", total);
    float *scale = (float *)(buf + scale_off);
    uint8_t *zero = buf + zero_off;
    /* packed column i holds output rows 8i..8i+7: fill those rows along k, each byte once
     * from inputs k and k + 1 (the rows are written in order; the column's int32s are
     * re-read from cache by the next 15 columns) */
    const int64_t half = n_in / 2;
    for (int64_t i = 0; i < packed; i++)
        for (int64_t k = 0; k < n_in; k += 2) {
            const int32_t u0 = qweight[k * packed + i], u1 = qweight[(k + 1) * packed + i];
            for (int j = 0; j < 8; j++)
                buf[(8 * i + AWQ_ORDER[j]) * half + k / 2] =
                    (uint8_t)(awq_nibble(u0, j) | awq_nibble(u1, j) << 4);
        }
    for (int64_t g = 0; g < groups; g++)
        for (int64_t i = 0; i < packed; i++) {
            const int32_t u = qzeros[g * packed + i];
            for (int j = 0; j < 8; j++) {
                const int64_t n = 8 * i + AWQ_ORDER[j];
                zero[n * groups + g] = (uint8_t)awq_nibble(u, j);
                scale[n * groups + g] = xi_f16_to_f32(scales_f16[g * n_out + n]);
            }
        }
    *w = (xi_weight){.dtype = XI_Q4_AWQ, .n_out = n_out, .n_in = n_in, .data = buf,
                     .scale = scale, .zero = zero, .group_size = group_size};
    *owned = buf;
    *owned_bytes = total;
    return 0;
}

int xi_weight_quantize_q8(xi_weight *w, const void *src, xi_dtype src_dtype, int64_t n_out,
                          int64_t n_in, void **owned, size_t *owned_bytes, char *err,
                          size_t errlen) {
    if (src_dtype != XI_F32 && src_dtype != XI_F16 && src_dtype != XI_BF16)
        return xi_errf(err, errlen, "int8 quantization: source dtype %s is not f32/f16/bf16",
                       xi_dtype_name(src_dtype));
    if (!src || n_out <= 0 || n_in <= 0)
        return xi_errf(err, errlen, "int8 quantization: empty weight [%lld, %lld]",
                       (long long)n_out, (long long)n_in);
    const size_t data_bytes = (size_t)(n_out * n_in);
    const size_t scale_off = (data_bytes + 63) & ~(size_t)63;
    const size_t total = scale_off + (size_t)n_out * 4;
    int8_t *buf = xi_alloc_big(total);
    float *row = malloc((size_t)n_in * 4);
    if (!buf || !row) {
        if (buf) xi_free_big(buf, total);
        free(row);
        return xi_errf(err, errlen, "int8 quantization: out of memory for %zu bytes", total);
    }
    float *scale = (float *)((char *)buf + scale_off);
    const size_t es = xi_dtype_size(src_dtype);
    for (int64_t n = 0; n < n_out; n++) {
        xi_to_f32(row, (const char *)src + (size_t)(n * n_in) * es, src_dtype, (size_t)n_in);
        float amax = 0.0f;
        for (int64_t k = 0; k < n_in; k++) amax = fmaxf(amax, fabsf(row[k]));
        /* Symmetric: the largest magnitude maps to 127; an all-zero row keeps scale 0. */
        const float s = amax / 127.0f;
        scale[n] = s;
        for (int64_t k = 0; k < n_in; k++) {
            const float q = s > 0.0f ? nearbyintf(row[k] / s) : 0.0f;
            buf[n * n_in + k] = (int8_t)fmaxf(-127.0f, fminf(127.0f, q));
        }
    }
    free(row);
    *w = (xi_weight){.dtype = XI_Q8, .n_out = n_out, .n_in = n_in, .data = buf, .scale = scale};
    *owned = buf;
    *owned_bytes = total;
    return 0;
}

/* Row c of a block (tmp, row-major) to its interleaved places in blk. */
#define BLOCK_COPY(c, T)                                                   \
    for (size_t k = 0; k < K; k++)                                        \
        ((T *)(void *)blk)[k * (size_t)block + (size_t)(c)] =             \
            ((const T *)(const void *)tmp)[(size_t)(c) * K + k];

/* Q4_AWQ to block 16: per 8 bytes (16 inputs) of a row, byte j = input j | input 8+j << 4. */
static void q4_block16(xi_weight *w) {
    uint8_t *d = (uint8_t *)w->data; /* the caller owns it writable */
    const size_t chunks = (size_t)(w->n_out * w->n_in / 16);
    for (size_t c = 0; c < chunks; c++) {
        uint8_t *b = d + c * 8, q[16];
        for (int k = 0; k < 16; k++) q[k] = k & 1 ? b[k / 2] >> 4 : b[k / 2] & 15;
        for (int j = 0; j < 8; j++) b[j] = (uint8_t)(q[j] | q[8 + j] << 4);
    }
    w->block = 16;
}

int xi_weight_block(xi_weight *w, int block, char *err, size_t errlen) {
    const xi_wformat *f = xi_wformat_of(w);
    return f && f->repack ? f->repack(w, block, err, errlen) : 0;
}

/* The awq-int4 row's repack: the dot layout, or block 16 where n_in and the group allow it. */
int xi_wformat_repack_awq(xi_weight *w, int block, char *err, size_t errlen) {
    if (block == XI_BLOCK_DOT) return xi_weight_block_dot(w, err, errlen);
    if (block == 16 && !w->block && w->n_in % 16 == 0 && w->group_size > 0 && w->group_size % 16 == 0)
        q4_block16(w);
    return 0;
}

/* The int8 row's repack: the dot layout, or the dense blocked one. */
int xi_wformat_repack_q8(xi_weight *w, int block, char *err, size_t errlen) {
    if (block == XI_BLOCK_DOT) return xi_weight_block_dot(w, err, errlen);
    return xi_wformat_repack_dense(w, block, err, errlen);
}

/* The dense blocked layout of the formats with one element per value (float rows, int8). */
int xi_wformat_repack_dense(xi_weight *w, int block, char *err, size_t errlen) {
    const xi_wformat *f = xi_wformat_of(w);
    if (block <= 0 || w->block || w->n_out % block || !(f->layouts & XI_LAYOUT_B8)) return 0;
    const xi_dtype t = w->dtype;
    const size_t es = (size_t)f->block_bytes, K = (size_t)w->n_in;
    const size_t bytes = (size_t)block * K * es; /* one block, same span in both layouts */
    char *tmp = malloc(bytes);
    if (!tmp) return xi_errf(err, errlen, "weight repack: out of memory for %zu bytes", bytes);
    char *d = (char *)w->data; /* the caller owns it writable */
    for (int64_t b = 0; b < w->n_out / block; b++) {
        char *blk = d + (size_t)b * bytes;
        memcpy(tmp, blk, bytes);
        if (t == XI_BF16) { /* pairs of inputs interleaved too (kernels.h) */
            const xi_weight one = {.dtype = t, .n_out = block, .n_in = w->n_in, .block = block};
            for (int c = 0; c < block; c++)
                for (size_t k = 0; k < K; k++)
                    ((uint16_t *)(void *)blk)[xi_weight_index(&one, c, (int64_t)k)] =
                        ((const uint16_t *)(void *)tmp)[(size_t)c * K + k];
            continue;
        }
        for (int c = 0; c < block; c++) /* element size as a constant: a plain move each */
            switch (es) {
            case 1: BLOCK_COPY(c, uint8_t); break;
            case 2: BLOCK_COPY(c, uint16_t); break;
            default: BLOCK_COPY(c, uint32_t); break;
            }
    }
    free(tmp);
    w->block = block;
    return 0;
}
