/* kernels/qtypes: weight formats as data. One table row per ggml block type: its ggml id and
 * name, values and bytes per block, and, for the types xinfer computes with, the scalar
 * reference dequantizer and the activation format its integer dot product wants (llama.cpp's
 * vec_dot_type). Types without a reference are still known by id and size, so a reader can
 * validate and name them before refusing them.
 *
 * Every quantized type is described through one unpacked form of a block (xi_qblock): int8
 * values q, per sub-block integer scales sc and mins m, and two float factors, with
 *     x = (d * sc[s]) * q - dmin * m[s]
 * for the element's sub-block s. Dequantize and the integer dot both read that form, so they
 * cannot disagree about a layout, and the dequantized floats equal ggml's bit for bit.
 *
 * Integer dot reference (the bitwise twin every fast kernel must reproduce): the activation
 * row is quantized once per row (xi_qtype_quantize_act), then per weight block
 *     sumi = sum_s sc[s] * (sum_{k in s} q[k] * a[k])        (int32, exact)
 *     mins = sum_s m[s] * (sum_{k in s} a[k])                 (int32, exact)
 *     acc += (d * da) * sumi - (dmin * da) * mins             (float, blocks in row order)
 * where da is the activation block's scale; Q8_1 activations use their stored s = da * sum(a)
 * for the min term instead, as llama.cpp does. Pure functions, any thread. */
#ifndef XI_QTYPES_H
#define XI_QTYPES_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids (stable: they are written in GGUF files). */
enum {
    XI_GGML_F32 = 0,
    XI_GGML_F16 = 1,
    XI_GGML_Q4_0 = 2,
    XI_GGML_Q4_1 = 3,
    XI_GGML_Q5_0 = 6,
    XI_GGML_Q5_1 = 7,
    XI_GGML_Q8_0 = 8,
    XI_GGML_Q8_1 = 9,
    XI_GGML_Q2_K = 10,
    XI_GGML_Q3_K = 11,
    XI_GGML_Q4_K = 12,
    XI_GGML_Q5_K = 13,
    XI_GGML_Q6_K = 14,
    XI_GGML_Q8_K = 15,
    XI_GGML_IQ4_NL = 20,
    XI_GGML_BF16 = 30,
    XI_GGML_TYPE_MAX = 40
};

/* Activation formats of the integer dot (llama.cpp's vec_dot_type). */
typedef enum xi_act_fmt {
    XI_ACT_F32 = 0, /* float weights: no activation quantization, plain fp32 dot */
    XI_ACT_Q8_0,    /* 32 values: f16 d, int8 q[32]                         (34 bytes) */
    XI_ACT_Q8_1,    /* 32 values: f16 d, f16 s = d * sum(q), int8 q[32]     (36 bytes) */
    XI_ACT_Q8_K,    /* 256 values: f32 d, int8 q[256], int16 bsums[16]      (292 bytes) */
} xi_act_fmt;

#define XI_QK_MAX 256 /* largest block */

/* One block unpacked: x[k] = (d * sc[k / sub]) * q[k] - dmin * m[k / sub]. */
typedef struct xi_qblock {
    int8_t q[XI_QK_MAX];
    int16_t sc[16], m[16]; /* [block / sub] */
    float d, dmin;
    int sub;               /* values per sub-block */
} xi_qblock;

typedef struct xi_qtype {
    int id;                /* ggml type id */
    const char *name;      /* ggml's name: "q4_K", "iq4_nl", "bf16" */
    int block;             /* values per block (1 for the float types) */
    int block_bytes;       /* bytes per block */
    xi_act_fmt act;        /* activation format of its dot product */
    /* Unpack block i of a row (NULL for float types and for types xinfer cannot compute). */
    void (*unpack)(const void *blk, xi_qblock *out);
    /* The block's f16 factors (d, then dmin or m where it has one): f16_n of them from byte
     * f16_off, at the start or the end of the block (the packed layout, gq_pack.h, gathers
     * them); 0 for the types without unpack. */
    int f16_off, f16_n;
} xi_qtype;

/* Row of the table for a ggml id, or NULL for an id ggml does not define. */
const xi_qtype *xi_qtype_get(int id);
/* By ggml name, case-insensitive ("Q4_K", "q8_0"); NULL when unknown. */
const xi_qtype *xi_qtype_by_name(const char *name);
/* Whether xinfer can compute with the type (a dequantizer exists). */
int xi_qtype_supported(const xi_qtype *t);
/* Bytes of a row of n values; 0 when n is not a whole number of blocks. */
size_t xi_qtype_row_bytes(const xi_qtype *t, int64_t n);

/* Scalar reference: row of n values (a whole number of blocks) to f32. Type must be supported. */
void xi_qtype_dequant_row(const xi_qtype *t, const void *row, float *y, int64_t n);

/* Bytes of one activation block and the values it holds (0 / 1 for XI_ACT_F32). */
int xi_act_block(xi_act_fmt f);
int xi_act_block_bytes(xi_act_fmt f);
/* Quantize an activation row of n values (a multiple of the format's block) into out
 * (n / block * block_bytes bytes), as llama.cpp's quantize_row_q8_{0,1,K}. For XI_ACT_F32 out
 * is a copy of x. */
void xi_qtype_quantize_act(xi_act_fmt f, const float *x, void *out, int64_t n);
/* A row of n weights (a multiple of 32) as Q8_0 blocks, as llama-quantize writes them. */
void xi_qtype_quantize_q8_0_weights(const float *x, void *out, int64_t n);
/* Integer dot reference of a weight row (type t) with an activation row already quantized to
 * t->act; for float types the fp32 dot in index order. */
float xi_qtype_dot_ref(const xi_qtype *t, const void *wrow, const void *act, int64_t n);

#endif
