/* kernels: the op table. Knows nothing of requests or models: plain arrays, shapes and strides.
 *
 * Every op exists as a scalar reference (ref.c, the oracle, always built) and as per-ISA
 * variants (x86/, arm/). dispatch.c picks the best variant for this CPU at start-up;
 * XINFER_KERNELS=ref|avx2|avx512|neon forces one.
 *
 * Determinism contract (tests check it): for one ISA variant, every output element is computed
 * with one fixed summation order that does not depend on how many rows are in the batch, which
 * rows share a tile, how columns are split across threads, or whether attention runs for a
 * prefill chunk or a single decode token. Work is split along output rows/columns only. */
#ifndef XI_KERNELS_H
#define XI_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/pool.h"
#include "tensor/dtype.h"

/* A linear layer's weight, logical shape [n_out, n_in] (Hugging Face nn.Linear layout);
 * the layer computes y[r, n] = sum_k x[r, k] * W[n, k]. Its format is a row of the weight-
 * format table (wformat.h, xi_wformat_of: dtype is the row's index, qtype the ggml type's):
 * shared code asks the row (block size, activation format, dequantize, layouts, repack);
 * the layouts below are what the rows and their kernels read.
 *   F32 / F16 / BF16: data = [n_out][n_in] row-major, as stored in the checkpoint.
 *   Q8:     data = int8 [n_out][n_in], scale = f32 [n_out]; W[n,k] = data[n,k] * scale[n].
 *   Q4_AWQ: data = uint8 [n_out][n_in/2], byte j of a row holds input 2j in the low nibble
 *           and 2j+1 in the high nibble; scale = f32 [n_out][n_in/group], zero = uint8
 *           [n_out][n_in/group] (0..15); W[n,k] = (q - zero[n, k/group]) * scale[n, k/group].
 *           n_in is a multiple of group_size (xi_weight_pack_awq checks); variants vectorize
 *           group sizes that are multiples of 8 and use the ref loop for any other.
 * Blocked (block == 8, F32 / F16 / BF16 / Q8 with n_out % 8 == 0; xi_weight_block makes it):
 *   data = [n_out/8][n_in][8]: the 8 consecutive output columns of a block interleaved per
 *   input k, so element (n, k) is at (n/8) * n_in * 8 + k * 8 + n % 8 (xi_weight_index).
 *   A GEMV then reads the whole matrix as one sequential stream, which the hardware
 *   prefetchers follow even when rows are short (n_in = 896 is 1.8 KB of f16 per row).
 *   BF16 interleaves inputs in pairs too: the 32 bytes of inputs k, k+1 (k even) hold column
 *   c's two values as u16 2c (k) and 2c+1 (k+1), so each u32 lane is one column and a shift
 *   (k) or a mask (k+1) makes both f32 values, with no widening; with n_in odd, the last
 *   input's 8 values follow unpaired. xi_weight_index gives every element's place.
 *   A variant may sum this layout in an order of its own (lanes = columns); it must still be
 *   the same for every row count, tile and thread split.
 *   Scales stay [n_out]. block == 0 is the row-major layout above.
 * Blocked Q4_AWQ (block == 16, n_in and group_size multiples of 16; xi_weight_block makes it):
 *   rows stay [n_out][n_in/2], but each 8 bytes of a row hold 16 inputs k0..k0+15 as byte j =
 *   input k0+j in the low nibble, k0+8+j in the high nibble, so one zero-extending byte load
 *   and a mask or a shift give 8 consecutive inputs (no per-lane variable shifts).
 * Dot layout (block == XI_BLOCK_DOT, for the integer dot products of the int8-activation
 * tables; xi_weight_block makes it when n_out % 8 == 0 and, Q8, n_in % 4 == 0, Q4_AWQ,
 * n_in and the group size multiples of 8): per block of 8 output columns, 32-byte groups
 * that hold 8 columns x 4 consecutive inputs as one 32-bit lane per column, so one
 * maddubs + maddwd (AVX2) or sdot (NEON) adds 4 products into each column's lane.
 *   Q8:     data = int8 [n_out/8][n_in/4][8][4]: W[n, k] at (n/8) n_in 8 + (k/4) 32 +
 *           (n%8) 4 + k%4.
 *   Q4_AWQ: data = uint8 [n_out/8][n_in/8][8][4]: byte (n/8) (n_in/8) 32 + (k/8) 32 +
 *           (n%8) 4 + k%4 holds W[n, k] in its low nibble when k % 8 < 4, its high nibble
 *           otherwise (a mask and a shift give inputs k0..k0+3 and k0+4..k0+7).
 *   Scales and zero points keep their layouts.
 * GGML (any ggml block type xi_qtype_supported accepts; qtype says which): data = [n_out]
 *   rows of xi_qtype_row_bytes(qtype, n_in) bytes each, exactly as a GGUF file stores them
 *   (the loader maps or copies them unchanged; n_in is a whole number of the type's blocks);
 *   block == 8: packed, the 8 rows of each group of 8 interleaved per block (gq_pack.h).
 *   The int8 tables compute them with matmul_gq from activations quantized to the type's
 *   activation format (qtype->act, llama.cpp's vec_dot_type) and integer dot products, the
 *   exact tables dequantize a row at a time (xi_qtype_dequant_row) and take fp32 dots.
 * Buffers are owned by whoever built the weight (the model loader). */
struct xi_qtype;
typedef struct xi_weight {
    xi_dtype dtype;
    int64_t n_out, n_in;
    const void *data;
    const float *scale;
    const uint8_t *zero;
    int group_size;
    int block; /* 0: row-major; 8 (F32/F16/BF16/Q8) or 16 (Q4_AWQ): blocked layouts above;
                  XI_BLOCK_DOT (Q8, Q4_AWQ): the dot layout (the row's layouts bits) */
    const struct xi_qtype *qtype; /* GGML: the block type, whose wformat row this weight's is */
} xi_weight;

#define XI_BLOCK_DOT 32

/* Element index of W[n, k] in w->data for the F32 / F16 / BF16 / Q8 layouts. */
static inline int64_t xi_weight_index(const xi_weight *w, int64_t n, int64_t k) {
    if (!w->block) return n * w->n_in + k;
    if (w->block == XI_BLOCK_DOT) return (n / 8) * w->n_in * 8 + (k / 4) * 32 + (n % 8) * 4 + k % 4;
    const int64_t B = w->block, base = (n / B) * w->n_in * B, c = n % B;
    if (w->dtype == XI_BF16 && k < (w->n_in & ~(int64_t)1))
        return base + (k & ~(int64_t)1) * B + 2 * c + (k & 1);
    return base + k * B + c;
}

/* The 4-bit code of W[n, k] of a Q4_AWQ weight, in either layout. */
static inline int xi_q4_at(const xi_weight *w, int64_t n, int64_t k) {
    if (w->block == XI_BLOCK_DOT) {
        const uint8_t b = ((const uint8_t *)w->data)[(n / 8) * (w->n_in / 8) * 32 + (k / 8) * 32 +
                                                     (n % 8) * 4 + k % 4];
        return k & 4 ? b >> 4 : b & 15;
    }
    const uint8_t *row = (const uint8_t *)w->data + n * (w->n_in / 2);
    if (w->block == 16) {
        const uint8_t b = row[(k / 16) * 8 + k % 8];
        return k & 8 ? b >> 4 : b & 15;
    }
    return k & 1 ? row[k / 2] >> 4 : row[k / 2] & 15;
}

/* Floats of scratch one xi_ops.attn call needs (per thread). */
#define XI_ATTN_SCRATCH(block_size, head_dim) ((size_t)(block_size) * (2 * (size_t)(head_dim) + 1))

/* One layer's view of the paged KV store. K of (block b, kv head h, slot t, dim d) is at
 * element k[b * block_stride + h * head_stride + t * head_dim + d]; V likewise from v. */
typedef struct xi_kv_view {
    void *k;
    void *v;
    xi_dtype dtype; /* F32, F16 or BF16 */
    int block_size;
    int n_kv_heads;
    int head_dim;
    int64_t block_stride; /* elements */
    int64_t head_stride;  /* elements, = block_size * head_dim */
} xi_kv_view;

/* Activations quantized to 8 bits for the integer dot products (qdot.c), per row and per
 * block of bs inputs (the last block of a row may be shorter):
 *   d = max |x| / 127 over the block, q = round-to-nearest-even(x * (127 / max |x|)) in
 *   [-127, 127] (all zero when the block is), s = the sum of the block's q. */
typedef struct xi_qx {
    const int8_t *q;  /* [rows][n_in] */
    const float *d;   /* [rows][nb] */
    const int32_t *s; /* [rows][nb] */
    int64_t n_in, nb;
    int bs;
} xi_qx;

/* The activation block of the integer path for w: 32 for Q8, the group size for Q4_AWQ;
 * 0 for formats without one. */
int xi_qdot_block(const xi_weight *w);

/* The integer matmul's arithmetic, which every variant reproduces bit for bit (integer
 * sums are exact in any order; the fp32 steps are these, in this order):
 *   Q8:     acc = 0; per block b: acc = fma((float)S_b, d_b, acc); y = acc * scale[n]
 *   Q4_AWQ: acc = 0; per group g: acc = fma((float)(S_g - zero[n, g] * s_g) * d_g,
 *                                           scale[n, g], acc); y = acc
 * where S is the integer sum of q * W's integer codes over the block. */
void xi_matmul_q_ref(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                     int64_t n0, int64_t n1);

typedef struct xi_ops xi_ops;
struct xi_ops {
    const char *name;
    /* "int8": Q8 and Q4_AWQ weights are computed from activations quantized per block
     * (xi_qx) with integer dot products, through matmul_q (W8A8 / W4A8); "exact": every
     * format with fp32 activations through matmul. The other fields are shared. */
    const char *precision;
    /* The same ISA in the other precision (xi_ops_precision). */
    const xi_ops *twin;
    /* The weight block (0 or 8) this variant's matmul reads fastest; the loader repacks
     * with xi_weight_block. Every variant computes any layout, with the same bits (the fp32
     * path of a fast variant reads the dot layout through ref's loop, as it reads nothing
     * faster; the int8 tables read Q8 / Q4_AWQ in the dot layout, xi_weight_block_for). */
    int weight_block;
    /* The Q4_AWQ layout (0 or 16) this variant's matmul reads fastest. */
    int q4_block;
    /* The GGML layout (0: as stored, 8: packed, gq_pack.h) this variant's matmul_gq reads
     * fastest, for the types whose wformat row lists XI_LAYOUT_B8; every matmul_gq computes
     * both layouts with the same bits. */
    int gq_block;
    /* y[r * ldy + n] = sum_k x[r * ldx + k] * W[n, k] for r in [0, rows), n in [n0, n1). */
    void (*matmul)(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                   const xi_weight *w, int64_t n0, int64_t n1);
    /* Causal attention of one query token over keys [0, n_ctx) of its sequence, for query
     * heads [h0, h1). q and out are [n_heads][head_dim]. GQA: query head h reads kv head
     * h / (n_heads / n_kv_heads). Keys are visited block by block in table order with an
     * online softmax, so the result for a token does not depend on the other tokens
     * computed with it. scratch holds XI_ATTN_SCRATCH(block_size, head_dim) floats (a
     * block's scores, and its keys and values widened to f32). */
    void (*attn)(float *out, const float *q, const xi_kv_view *kv, const int32_t *block_table,
                 int n_ctx, int n_heads, int h0, int h1, float scale, float *scratch);
    /* y = x / sqrt(mean(x^2) + eps) * w, n elements; y may alias x. */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* y[i] = silu(gate[i]) * up[i]; y may alias gate. */
    void (*silu_mul)(float *y, const float *gate, const float *up, int64_t n);
    /* int8 tables: y[r * ldy + n] for Q8 / Q4_AWQ weights from quantized rows, n in [n0, n1),
     * bitwise xi_matmul_q_ref for every layout; NULL in exact tables. */
    void (*matmul_q)(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                     int64_t n0, int64_t n1);
    /* int8 tables: one block of n inputs quantized as xi_qx defines, bitwise
     * xi_qx_quantize_block_ref (NULL: that one). */
    void (*quantize_block)(int8_t *q, float *d, int32_t *s, const float *x, int64_t n);
    /* int8 tables: y[r * ldy + n] for a GGML weight, n in [n0, n1), from rows quantized to
     * w->qtype->act (row r at act + r * act_stride bytes, xi_qtype_quantize_act), bitwise
     * xi_matmul_gq_ref; NULL in exact tables. */
    void (*matmul_gq)(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1);
    /* int8 tables: n inputs of one row quantized to the activation format act (an
     * xi_act_fmt, qtypes.h), byte for byte xi_qtype_quantize_act (NULL: that one). */
    void (*quantize_act)(int act, const float *x, void *out, int64_t n);
    /* int8 tables of a variant with a bf16 dot product (NULL elsewhere: BF16 weights then
     * take fp32 inputs through matmul): y[r * ldy + n] for a BF16 weight from rows x[r * ldx
     * ...] rounded to bf16 with round_bf16 (ldx even, an odd n_in's row padded with a zero),
     * bitwise xi_matmul_bf16_ref. It reads the table's weight_block layout, the only one the
     * caller hands it (a row-major mmap weight takes matmul, fp32, at every batch); -1 for
     * another, which the caller then computes through matmul. */
    int (*matmul_bf16)(float *y, int64_t ldy, const uint16_t *x, int64_t ldx, int64_t rows,
                       const xi_weight *w, int64_t n0, int64_t n1);
    /* n inputs rounded to bf16, bitwise xi_bf16_round_ref. */
    void (*round_bf16)(uint16_t *out, const float *x, int64_t n);
};

/* BF16 activations (bf16dot.c): one input as vcvtneps2bf16 rounds it (nearest even, zero and
 * denormal inputs to a zero of their sign, NaN quieted), n of them, and the matmul of a BF16
 * weight from rows of them, vdpbf16ps's arithmetic (its steps are listed there); any layout. */
uint16_t xi_bf16_round1(float x);
void xi_bf16_round_ref(uint16_t *out, const float *x, int64_t n);
void xi_matmul_bf16_ref(float *y, int64_t ldy, const uint16_t *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1);
/* Rows x[r * ldx ...] of n_in inputs rounded to bf16 with ops->round_bf16 into this thread's
 * scratch (slot 12), row r at r * xi_bf16_row_len(n_in) elements; NULL when out of memory. */
const uint16_t *xi_bf16_rows(const xi_ops *ops, const float *x, int64_t ldx, int64_t rows,
                             int64_t n_in);
int64_t xi_bf16_row_len(int64_t n_in);
void xi_bf16_rows_into(const xi_ops *ops, const float *x, int64_t ldx, int64_t r0, int64_t r1,
                       int64_t n_in, uint16_t *out);

/* The integer matmul of GGML weights, the scalar oracle: xi_qtype_dot_ref per output
 * (gq.c). Every variant's matmul_gq reproduces it bit for bit. */
void xi_matmul_gq_ref(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1);
/* The fp32 matmul of GGML weights (exact tables, every variant): row n dequantized, then
 * sum_k x[k] * W[n, k] in index order. */
void xi_matmul_gq_exact(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                        const xi_weight *w, int64_t n0, int64_t n1);
/* Rows x[r * ldx ...] of w->n_in inputs quantized to w->qtype->act with ops's quantize_act
 * (ops may be NULL) into this thread's scratch (slot 5); *stride gets the bytes per row. NULL
 * when the scratch cannot be allocated. */
const void *xi_gq_quantize(const xi_ops *ops, const xi_weight *w, const float *x, int64_t ldx,
                           int64_t rows, size_t *stride);
/* Bytes of one quantized row for w, and rows [r0, r1) quantized into act (row r at
 * act + r * xi_gq_act_row_bytes(w)). */
size_t xi_gq_act_row_bytes(const xi_weight *w);
void xi_gq_quantize_rows(const xi_ops *ops, const xi_weight *w, const float *x, int64_t ldx,
                         int64_t r0, int64_t r1, void *act);

const xi_ops *xi_ops_ref(void);
/* ISA variants; call only when the CPU has the instructions (xi_ops_select checks). */
#if defined(__x86_64__)
const xi_ops *xi_ops_avx2(void); /* AVX2 + FMA + F16C */
/* The avx2 table's attention (xi_avx2_attn) and the per-key loop it reproduces bitwise
 * (xi_avx2_attn_keys, any head dim); both have the xi_ops.attn signature. */
void xi_avx2_attn(float *out, const float *q, const xi_kv_view *kv, const int32_t *block_table,
                  int n_ctx, int n_heads, int h0, int h1, float scale, float *scratch);
void xi_avx2_attn_keys(float *out, const float *q, const xi_kv_view *kv, const int32_t *block_table,
                       int n_ctx, int n_heads, int h0, int h1, float scale, float *scratch);
/* The avx2 tables' matmul (x86/avx2_matmul.c). */
void xi_avx2_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    const xi_weight *w, int64_t n0, int64_t n1);
/* The variants' integer matmuls and quantizers (their int8 tables' matmul_q, quantize_block). */
void xi_matmul_q_avx2(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                      int64_t n0, int64_t n1);
void xi_qx_quantize_block_avx2(int8_t *q, float *d, int32_t *s, const float *x, int64_t n);
void xi_gq_quantize_act_avx2(int act, const float *x, void *out, int64_t n);
void xi_matmul_gq_avx2(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                       const xi_weight *w, int64_t n0, int64_t n1);
/* AVX2 + FMA + F16C with AVX-512 F/BW/VL/VNNI: the avx2 tables with the fp32 GEMM tiles of
 * x86/avx512_matmul.c (blocked dense weights, avx2's bits) and the integer matmuls of
 * x86/avx512_qdot.c (Q8, Q4_AWQ) and x86/avx512_gq.c (GGML types), vpdpbusd. */
const xi_ops *xi_ops_avx512(void);
/* The avx512 tables with AVX-512 BF16: BF16 weights from bf16 inputs (vdpbf16ps,
 * x86/avx512_bf16.c) in the int8 table. */
const xi_ops *xi_ops_avx512bf16(void);
int xi_matmul_bf16_avx512(float *y, int64_t ldy, const uint16_t *x, int64_t ldx, int64_t rows,
                          const xi_weight *w, int64_t n0, int64_t n1);
void xi_bf16_round_avx512(uint16_t *out, const float *x, int64_t n);
void xi_avx512_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1);
void xi_matmul_q_avx512(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                        int64_t n0, int64_t n1);
void xi_matmul_gq_avx512(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                         const xi_weight *w, int64_t n0, int64_t n1);
#endif
#if defined(__aarch64__)
const xi_ops *xi_ops_neon(void); /* ARMv8.2-A NEON + fp16 + dotprod */
void xi_matmul_q_neon(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                      int64_t n0, int64_t n1);
void xi_qx_quantize_block_neon(int8_t *q, float *d, int32_t *s, const float *x, int64_t n);
void xi_gq_quantize_act_neon(int act, const float *x, void *out, int64_t n);
void xi_matmul_gq_neon(float *y, int64_t ldy, const void *act, size_t act_stride, int64_t rows,
                       const xi_weight *w, int64_t n0, int64_t n1);
#endif
/* The variant for this CPU, honouring XINFER_KERNELS; NULL when the override names a variant
 * this build or CPU lacks (err says which). */
const xi_ops *xi_ops_select(const char *name, char *err, size_t errlen);
/* Every variant this build has and this CPU can run, ref first, in the precision
 * XINFER_KERNEL_PRECISION names (default int8); returns the count. */
int xi_ops_available(const xi_ops **out, int max);
/* ops's ISA in the activation precision `precision`: "int8" (the default: quantized weights
 * compute with 8-bit activations and integer dot products) or "exact" (fp32 activations);
 * NULL or "auto": XINFER_KERNEL_PRECISION, else int8. NULL with err set for another name
 * (or when ops is NULL, keeping err). */
const xi_ops *xi_ops_precision(const xi_ops *ops, const char *precision, char *err, size_t errlen);

/* Quantize rows x[r * ldx ...] of n_in inputs per block of bs into this thread's scratch
 * (reused and grown, freed at thread exit) with ops's quantize_block (ops may be NULL);
 * NULL when the scratch cannot be allocated. */
const xi_qx *xi_qx_quantize(const xi_ops *ops, const float *x, int64_t ldx, int64_t rows,
                            int64_t n_in, int bs);
/* The same into buffers of the caller's: qx's arrays in this thread's scratch slots slot,
 * slot + 1, slot + 2 for rows x n_in (-1 when out of memory), then rows [r0, r1) quantized
 * into them (any thread, each its own rows). */
int xi_qx_alloc(xi_qx *qx, int slot, int64_t rows, int64_t n_in, int bs);
void xi_qx_quantize_rows(const xi_ops *ops, const float *x, int64_t ldx, int64_t r0, int64_t r1,
                         const xi_qx *qx);
/* One block, the scalar definition (qdot.c). */
void xi_qx_quantize_block_ref(int8_t *q, float *d, int32_t *s, const float *x, int64_t n);

/* ---- building quantized weights at load (quant.c) ----
 * Both return 0 and fill *w, whose buffers live in one allocation *owned of *owned_bytes
 * (free with xi_free_big(*owned, *owned_bytes)); or -1 with err set. */

/* Check AutoAWQ GEMM tensor shapes (qweight int32 [n_in, n_out/8], qzeros int32
 * [n_in/group, n_out/8], scales f16 [n_in/group, n_out]) and derive n_in, n_out. */
int xi_awq_check_shapes(const int64_t qweight[2], const int64_t qzeros[2], const int64_t scales[2],
                        int group_size, int64_t *n_in, int64_t *n_out, char *err, size_t errlen);
/* Repack AutoAWQ GEMM tensors (shapes as above; nibble j of a packed int32 is output column
 * 8 i + {0,2,4,6,1,3,5,7}[j]) into the Q4_AWQ layout. The group size must divide n_in. */
int xi_weight_pack_awq(xi_weight *w, const int32_t *qweight, const int32_t *qzeros,
                       const uint16_t *scales_f16, int64_t n_in, int64_t n_out, int group_size,
                       void **owned, size_t *owned_bytes, char *err, size_t errlen);
/* Per-output-channel symmetric int8 of an [n_out][n_in] F32/F16/BF16 weight:
 * scale[n] = max_k |W[n,k]| / 127, q = round-to-nearest-even(W / scale). */
int xi_weight_quantize_q8(xi_weight *w, const void *src, xi_dtype src_dtype, int64_t n_out,
                          int64_t n_in, void **owned, size_t *owned_bytes, char *err,
                          size_t errlen);

/* The repack of w's wformat row: an F32 / F16 / BF16 / Q8 row-major weight in place into the
 * blocked layout (block 8), or a Q4_AWQ one into its block-16 layout; a no-op returning 0 when block is 0, the
 * weight is already blocked, another dtype, n_out % block != 0 (dense), or a Q4_AWQ block
 * other than 16 or whose n_in or group size 16 does not divide. w->data must be writable (the caller owns it). -1 with err set when
 * the one block of scratch cannot be allocated. */
int xi_weight_block(xi_weight *w, int block, char *err, size_t errlen);
/* Whether w's shape allows the dot layout, and the repack into it from row-major (qdot.c;
 * xi_weight_block calls it for XI_BLOCK_DOT). */
int xi_weight_dot_fits(const xi_weight *w);
int xi_weight_block_dot(xi_weight *w, char *err, size_t errlen);
/* The block the loader should give w for ops (its wformat row's block_for): for Q8 / Q4_AWQ of an int8 table with a
 * weight_block, XI_BLOCK_DOT where the shapes allow; for Q4_AWQ ops->q4_block where it applies;
 * otherwise ops->weight_block, for every row length (bench_kernels --gemv --layout both on
 * AVX2, 896x4864, 9.5 KiB BF16 rows: GEMV 0.63 row-major vs 1.18 blocked of the read
 * bandwidth, f16 0.60 vs 0.75; 4, 16 and 256-row GEMMs as fast or faster blocked, also
 * with 37 KiB rows). */
int xi_weight_block_for(const xi_ops *ops, const xi_weight *w);

/* ---- helpers shared by all variants (kernels.c) ---- */

/* This thread's scratch buffer `slot` (0..XI_SCRATCH_SLOTS-1: 0, 1 the tiled matmul's, 2..4
 * the quantized x of qdot.c, 5 that of gq.c, 6 the dequantized row of gq.c's and ref.c's
 * exact matmuls, 7..9 the rows a threaded matmul quantizes once for all its threads,
 * kernels.c; 10 the per-row terms of x86/avx2_gq.c's (or avx512_gq.c's) lanes-as-columns
 * tile, 11 its transposed panel; 12 the bf16 rows of bf16dot.c) of at least `bytes`, 64-byte aligned; it grows to the largest
 * need once and is then reused, so steady-state steps allocate nothing, and is freed at
 * thread exit. NULL when out of memory. */
#define XI_SCRATCH_SLOTS 13
void *xi_kernel_scratch(int slot, size_t bytes);

/* y = x W^T (+ bias), split across the pool along output columns. bias may be NULL. */
void xi_matmul(xi_pool *pool, const xi_ops *ops, float *y, const float *x, int64_t rows,
               const xi_weight *w, const float *bias);

/* One linear layer of a group that shares its input: y = x W^T (+ bias, may be NULL). */
typedef struct xi_linear {
    float *y;
    const xi_weight *w;
    const float *bias;
} xi_linear;

/* Several linears of the same input (q, k, v) in one pool job: one hand-off and one wait
 * instead of n. Each weight is split along its own columns, so the bits are xi_matmul's. */
void xi_matmul_n(xi_pool *pool, const xi_ops *ops, const float *x, int64_t rows,
                 const xi_linear *l, int n);
/* gate = silu(x Wgate^T) * (x Wup^T), with up = x Wup^T as scratch, in one pool job: each
 * thread applies silu_mul to the columns it computed. wgate and wup have the same n_out. */
void xi_matmul_silu(xi_pool *pool, const xi_ops *ops, float *gate, float *up, const float *x,
                    int64_t rows, const xi_weight *wgate, const xi_weight *wup);
/* y = x W^T, then residual += y, in one pool job (each thread adds the columns it wrote). */
void xi_matmul_add(xi_pool *pool, const xi_ops *ops, float *residual, float *y, const float *x,
                   int64_t rows, const xi_weight *w);

/* One thread's columns [n0, n1) of y = x W^T (row r of y at y + r * ldy) in ops's precision:
 * an int8 table quantizes x (this thread's scratch) for the integer formats (GGML, Q8,
 * Q4_AWQ) and runs matmul_gq / matmul_q, as xi_matmul does; other weights run ops->matmul
 * (MoE experts: each expert's rows are their own matmul). */
void xi_matmul_part(const xi_ops *ops, float *y, int64_t ldy, const float *x, int64_t ldx,
                    int64_t rows, const xi_weight *w, int64_t n0, int64_t n1);
/* The same for n linears of one input (each l[i].y with row stride ldy, its bias added on
 * these columns), x quantized once for all of them, as in one pool job of xi_matmul_n. */
void xi_matmul_part_n(const xi_ops *ops, const float *x, int64_t ldx, int64_t rows,
                      const xi_linear *l, int n, int64_t ldy, int64_t n0, int64_t n1);

/* Row `row` of a weight (an embedding table) as f32. */
void xi_weight_row(const xi_weight *w, int64_t row, float *out);

/* Store one token's K and V ([n_kv_heads][head_dim] each) into slot `slot` of the view. */
void xi_kv_write(const xi_kv_view *kv, int64_t slot, const float *k, const float *v);

/* NeoX-style rotary embedding (rotate_half) of n_heads heads of head_dim in place.
 * cs = [head_dim/2] cos followed by [head_dim/2] sin for this token's position. */
void xi_rope_neox(float *x, int n_heads, int head_dim, const float *cs);

#endif
