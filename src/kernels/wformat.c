/* kernels/wformat: the weight-format table (wformat.h) and the rows' scalar hooks. */
#include <pthread.h>
#include <strings.h>

#include "kernels/gq_pack.h"
#include "kernels/matmul_tile.h"
#include "kernels/wformat.h"

/* ---- dequantize a row: each format's scalar reference, in every layout ---- */

static void float_row(const xi_weight *w, int64_t row, int64_t k0, int64_t k1, float *out) {
    if (w->block) { /* blocked: the row's elements are block apart */
        for (int64_t k = k0; k < k1; k++) out[k - k0] = xi_elem_f32(w->dtype, w->data, xi_weight_index(w, row, k));
        return;
    }
    xi_to_f32(out, (const char *)w->data + (row * w->n_in + k0) * (int64_t)xi_dtype_size(w->dtype),
              w->dtype, (size_t)(k1 - k0));
}

static void q8_row(const xi_weight *w, int64_t row, int64_t k0, int64_t k1, float *out) {
    const int8_t *q = w->data;
    for (int64_t k = k0; k < k1; k++) out[k - k0] = (float)q[xi_weight_index(w, row, k)] * w->scale[row];
}

static void awq_row(const xi_weight *w, int64_t row, int64_t k0, int64_t k1, float *out) {
    const int64_t groups = w->n_in / w->group_size;
    for (int64_t k = k0; k < k1; k++) {
        const int q = xi_q4_at(w, row, k);
        const int64_t g = k / w->group_size;
        out[k - k0] = (float)(q - w->zero[row * groups + g]) * w->scale[row * groups + g];
    }
}

static void ggml_row(const xi_weight *w, int64_t row, int64_t k0, int64_t k1, float *out) {
    const xi_qtype *t = w->qtype;
    if (w->block) { /* packed (gq_pack.h): a block at a time */
        uint8_t b[XI_QK_MAX + 64];
        for (int64_t k = k0; k < k1; k += t->block) {
            xi_gq_block_bytes(w, row, k / t->block, b);
            xi_qtype_dequant_row(t, b, out + (k - k0), t->block);
        }
        return;
    }
    const size_t off = (size_t)row * xi_qtype_row_bytes(t, w->n_in) + (size_t)(k0 / t->block) * (size_t)t->block_bytes;
    xi_qtype_dequant_row(t, (const char *)w->data + off, out, k1 - k0);
}

/* ---- the layout the loader gives a weight for a table (kernels.h, xi_weight_block_for) ---- */

static int dense_block_for(const xi_ops *ops, const xi_weight *w) {
    (void)w;
    return ops->weight_block;
}

/* The integer formats: an int8 table with a blocked layout reads them in the dot layout. */
static int dot_block_for(const xi_ops *ops, const xi_weight *w) {
    return ops->matmul_q && ops->weight_block && xi_weight_dot_fits(w) ? XI_BLOCK_DOT : 0;
}

static int q8_block_for(const xi_ops *ops, const xi_weight *w) {
    return ops->matmul_q && ops->weight_block ? dot_block_for(ops, w) : ops->weight_block;
}

static int awq_block_for(const xi_ops *ops, const xi_weight *w) {
    if (ops->matmul_q && ops->weight_block) return dot_block_for(ops, w);
    const int b = ops->q4_block;
    return b && w->n_in % b == 0 && w->group_size > 0 && w->group_size % b == 0 ? b : 0;
}

/* GGML: packed (gq_pack.h) for an int8 table whose matmul_gq reads it, where the row lists
 * the layout and the shape fits; otherwise kept as stored. */
static int ggml_block_for(const xi_ops *ops, const xi_weight *w) {
    const xi_wformat *f = xi_wformat_of(w);
    return ops->matmul_gq && ops->gq_block && (f->layouts & XI_LAYOUT_B8) && xi_gq_pack_fits(w) ? 8 : 0;
}

static int ggml_repack(xi_weight *w, int block, char *err, size_t errlen) {
    return block == 8 ? xi_gq_pack(w, err, errlen) : 0;
}

/* ---- the table ---- */

#define FLOAT_ROW(T, name, bytes, act)                                                           \
    [T] = {name, T, NULL, 1, bytes, 1, act, 0, XI_ACT_F32, XI_LAYOUT_B8, 0, float_row, \
           NULL, dense_block_for, xi_wformat_repack_dense}

/* Indexed by xi_weight.dtype; the dtypes without a row have name NULL. */
static const xi_wformat fixed[XI_DTYPE_COUNT] = {
    FLOAT_ROW(XI_F32, "f32", 4, XI_WACT_F32),
    FLOAT_ROW(XI_F16, "f16", 2, XI_WACT_F32),
    /* bf16 inputs where the table has a bf16 dot product (vdpbf16ps), as llama.cpp's BF16
     * vec_dot and a bf16 torch model compute; fp32 elsewhere */
    FLOAT_ROW(XI_BF16, "bf16", 2, XI_WACT_BF16),
    /* one scale per output row; activations int8 per 32 inputs (llama.cpp's Q8_0 size: an
     * outlier flattens one block, not the row, for one fp32 FMA per 32 products) */
    [XI_Q8] = {"int8", XI_Q8, NULL, 1, 1, 1, XI_WACT_QX, 32, XI_ACT_F32,
               XI_LAYOUT_B8 | XI_LAYOUT_DOT, 4, q8_row, NULL, q8_block_for, xi_wformat_repack_q8},
    /* scale and zero point per group: the activation block is the group, and the zero point
     * costs one integer multiply per group */
    [XI_Q4_AWQ] = {"awq-int4", XI_Q4_AWQ, NULL, 0, 0, 8, XI_WACT_QX, 0, XI_ACT_F32,
                   XI_LAYOUT_B16 | XI_LAYOUT_DOT, 8, awq_row, NULL, awq_block_for,
                   xi_wformat_repack_awq},
};
static const xi_dtype fixed_order[] = {XI_F32, XI_F16, XI_BF16, XI_Q8, XI_Q4_AWQ};
#define N_FIXED (int)(sizeof fixed_order / sizeof fixed_order[0])

/* The ggml rows, made once from the xi_qtype rows that have kernels (the quantized types;
 * ggml's f32 / f16 / bf16 tensors load as the float rows). Indexed by ggml id. */
static xi_wformat ggml[XI_GGML_TYPE_MAX];
static int ggml_ids[XI_GGML_TYPE_MAX], n_ggml;
static pthread_once_t ggml_once = PTHREAD_ONCE_INIT;

/* The ggml types packed for the 8-column kernels (every matmul_gq with gq_block 8: those of
 * x86/avx2_gq.c and avx512_gq.c). Q8_0 was kept as stored while its packed one-row tile read
 * one 8-row group at a time, a single stream, slower from memory than the stored tile's 8
 * interleaved rows (Qwen3-8B shape, 4 layers, 1 thread, Zen 1: 12.3 vs 14.5 tok/s); its
 * one-row tiles now read 8 groups in step (avx2_gq.c q8_pk_row, avx512_gq.c q8_pairs_row).
 * Q4_0 19.0 vs 17.5 tok/s packed, Q4_K_M's Q4_K layers and Qwen2.5-0.5B Q4_K_M 43 vs 36. */
static int packed_type(int id) {
    return id == XI_GGML_Q4_0 || id == XI_GGML_Q5_0 || id == XI_GGML_Q4_K || id == XI_GGML_Q6_K ||
           id == XI_GGML_Q8_0;
}

static void ggml_build(void) {
    for (int id = 0; id < XI_GGML_TYPE_MAX; id++) {
        const xi_qtype *t = xi_qtype_get(id);
        if (!t || !t->unpack) continue;
        ggml[id] = (xi_wformat){t->name, XI_GGML, t, t->block, t->block_bytes, 1, XI_WACT_GGML, 0,
                                t->act, packed_type(id) ? XI_LAYOUT_B8 : 0, 0, ggml_row,
                                xi_matmul_gq_exact, ggml_block_for, ggml_repack};
        ggml_ids[n_ggml++] = id;
    }
}

const xi_wformat *xi_wformat_for(xi_dtype dtype, const xi_qtype *qtype) {
    if (dtype != XI_GGML) return (unsigned)dtype < XI_DTYPE_COUNT && fixed[dtype].name ? &fixed[dtype] : NULL;
    if (!qtype || qtype->id < 0 || qtype->id >= XI_GGML_TYPE_MAX) return NULL;
    pthread_once(&ggml_once, ggml_build);
    if (ggml[qtype->id].name) return &ggml[qtype->id];
    const xi_wformat *f = xi_wformat_by_name(qtype->name); /* f32 / f16 / bf16: the same names */
    return f && f->dtype != XI_GGML ? f : NULL;
}

const xi_wformat *xi_wformat_of(const xi_weight *w) { return xi_wformat_for(w->dtype, w->qtype); }

int xi_wformat_count(void) {
    pthread_once(&ggml_once, ggml_build);
    return N_FIXED + n_ggml;
}

const xi_wformat *xi_wformat_at(int i) {
    if (i < 0 || i >= xi_wformat_count()) return NULL;
    return i < N_FIXED ? &fixed[fixed_order[i]] : &ggml[ggml_ids[i - N_FIXED]];
}

const xi_wformat *xi_wformat_by_name(const char *name) {
    for (int i = 0; name && i < xi_wformat_count(); i++)
        if (!strcasecmp(xi_wformat_at(i)->name, name)) return xi_wformat_at(i);
    return NULL;
}
