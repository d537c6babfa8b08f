/* tensor: element types and conversions. Pure functions, any thread. */
#ifndef XI_DTYPE_H
#define XI_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum xi_dtype {
    XI_F32 = 0,
    XI_F16,
    XI_BF16,
    XI_F64,
    XI_I8,
    XI_U8,
    XI_I16,
    XI_I32,
    XI_I64,
    XI_BOOL,
    XI_Q4_AWQ, /* AWQ int4, repacked: see kernels/kernels.h xi_weight */
    XI_Q8,     /* int8 per output channel + f32 scale */
    XI_GGML,   /* a ggml block type, rows as stored in a GGUF file: see kernels/kernels.h */
    XI_DTYPE_COUNT
} xi_dtype;

/* Bytes per element (0 for the packed quantized types). */
size_t xi_dtype_size(xi_dtype t);
/* Lower-case name: "f32", "f16", "bf16", ... */
const char *xi_dtype_name(xi_dtype t);
/* safetensors spelling ("F32", "BF16", ...) to dtype; -1 when unknown. */
int xi_dtype_from_safetensors(const char *s);

static inline float xi_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even; NaN stays NaN. */
static inline uint16_t xi_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float xi_f16_to_f32(uint16_t h);
uint16_t xi_f32_to_f16(float f);

/* Convert n elements of src (type t) to f32. t in {F32, F16, BF16}. */
void xi_to_f32(float *dst, const void *src, xi_dtype t, size_t n);
/* Convert n f32 values to t in {F32, F16, BF16}. */
void xi_from_f32(void *dst, xi_dtype t, const float *src, size_t n);

#endif
