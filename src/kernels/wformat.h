/* kernels/wformat: weight formats as data. One table row per format xinfer computes with:
 * f32, f16, bf16, int8 (per output channel scale), awq-int4 (per group scale and zero point)
 * and one per ggml block type xi_qtype_supported accepts (derived from its xi_qtype row).
 * A row states what shared code needs to know about a format; the shared code (kernels.c's
 * dispatch, qdot.c, quant.c, ref.c, the matmul driver, the model loader and shard.c) asks the
 * row instead of comparing dtypes, and a new format is a row plus its kernels.
 *
 * A weight's row is found from its xi_weight.dtype, which is the row's index for the five
 * checkpoint formats, and its xi_weight.qtype for a ggml block type (xi_wformat_of: one
 * array index, no search). Pure data and functions, any thread. */
#ifndef XI_WFORMAT_H
#define XI_WFORMAT_H

#include "kernels/kernels.h"
#include "kernels/qtypes.h"

/* The activations a format's dot product reads, which picks its op in the int8 tables
 * (the exact tables give every format fp32 activations through ops->matmul). */
typedef enum xi_wact {
    XI_WACT_F32 = 0, /* none: fp32 activations, ops->matmul in every table */
    XI_WACT_QX,      /* int8 per block of act_block inputs (xi_qx), ops->matmul_q; act_block 0
                        means the weight's group size */
    XI_WACT_GGML,    /* rows quantized to ggml_act (Q8_0 / Q8_1 / Q8_K), ops->matmul_gq */
    XI_WACT_BF16,    /* rows rounded to bf16, ops->matmul_bf16 in the int8 tables that have
                        one; fp32 through ops->matmul in the others */
} xi_wact;

/* The layouts (kernels.h) a format can be repacked into, as bits of xi_wformat.layouts. */
enum { XI_LAYOUT_B8 = 1, XI_LAYOUT_B16 = 2, XI_LAYOUT_DOT = 4 };

typedef struct xi_wformat {
    const char *name;      /* as users and inspect see it: "bf16", "int8", "awq-int4", "q4_K" */
    xi_dtype dtype;        /* xi_weight.dtype of its weights (XI_GGML for every ggml type) */
    const xi_qtype *qtype; /* ggml rows: the block type; NULL otherwise */
    int block;             /* values per block along n_in: 1 for the float types and int8 (one
                              scale per output row), the ggml block, 0 for awq-int4: the
                              weight's group_size. A tensor-parallel input (column) slice keeps
                              whole blocks. */
    int block_bytes;       /* bytes per block of w->data; 0 for awq-int4: group_size / 2 bytes of
                              codes, with a f32 scale and a u8 zero point per group in their own
                              arrays */
    int out_unit;          /* a tensor-parallel output (row) slice keeps multiples of it: 8 for
                              awq-int4 (AutoAWQ packs 8 columns per int32), else 1 */
    xi_wact act;           /* the activation format of its integer dot product */
    int act_block;         /* XI_WACT_QX: inputs per activation block (0: the group size) */
    xi_act_fmt ggml_act;   /* XI_WACT_GGML: the ggml activation format (qtype->act) */
    int layouts;           /* XI_LAYOUT_* it can be repacked into; 0: kept as stored */
    int dot_k;             /* the dot layout: inputs per 4-byte lane of a column (4 for int8, 8
                              for int4's nibbles); 0 without it */
    /* W[row, k0..k1) as f32, the scalar reference of the format, in any of its layouts (what
     * xi_weight_row, embeddings and ref's matmul use; every matmul of the format agrees with
     * it). k0 and k1 are whole blocks (k1 may be n_in). */
    void (*dequant)(const xi_weight *w, int64_t row, int64_t k0, int64_t k1, float *out);
    /* The exact tables' matmul for a format the ISA tiles do not read (ggml types:
     * xi_matmul_gq_exact); NULL: ops->matmul's own tiles. */
    void (*matmul_exact)(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                         const xi_weight *w, int64_t n0, int64_t n1);
    /* The layout the loader gives w for ops (xi_weight_block_for). */
    int (*block_for)(const xi_ops *ops, const xi_weight *w);
    /* Repack w in place into `block` where the format and shape allow it, else a no-op
     * (xi_weight_block); NULL: kept as stored. */
    int (*repack)(xi_weight *w, int block, char *err, size_t errlen);
} xi_wformat;

/* The row of w, or NULL when its dtype is no weight format (a ggml type without kernels). */
const xi_wformat *xi_wformat_of(const xi_weight *w);
/* The row of a dtype (and, for XI_GGML, a ggml type; a ggml float type gives its float row). */
const xi_wformat *xi_wformat_for(xi_dtype dtype, const xi_qtype *qtype);
/* By name, case-insensitive ("int8", "awq-int4", "Q4_K"); NULL when no row has it. */
const xi_wformat *xi_wformat_by_name(const char *name);
/* Every row, in a fixed order: the checkpoint formats, then the ggml types by id. */
int xi_wformat_count(void);
const xi_wformat *xi_wformat_at(int i);

/* The hooks of the rows that live with their format's kernels (quant.c, qdot.c). */
int xi_wformat_repack_dense(xi_weight *w, int block, char *err, size_t errlen);
int xi_wformat_repack_q8(xi_weight *w, int block, char *err, size_t errlen);
int xi_wformat_repack_awq(xi_weight *w, int block, char *err, size_t errlen);

#endif
