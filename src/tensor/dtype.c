/* tensor: dtype table and scalar conversions (the reference for the SIMD converters). */
#include "tensor/dtype.h"

static const struct {
    const char *name;
    const char *st;
    size_t size;
} info[XI_DTYPE_COUNT] = {
    [XI_F32] = {"f32", "F32", 4},   [XI_F16] = {"f16", "F16", 2},
    [XI_BF16] = {"bf16", "BF16", 2}, [XI_F64] = {"f64", "F64", 8},
    [XI_I8] = {"i8", "I8", 1},      [XI_U8] = {"u8", "U8", 1},
    [XI_I16] = {"i16", "I16", 2},   [XI_I32] = {"i32", "I32", 4},
    [XI_I64] = {"i64", "I64", 8},   [XI_BOOL] = {"bool", "BOOL", 1},
    [XI_Q4_AWQ] = {"awq-int4", NULL, 0}, [XI_Q8] = {"int8", NULL, 0},
    [XI_GGML] = {"ggml", NULL, 0},
};

size_t xi_dtype_size(xi_dtype t) { return (unsigned)t < XI_DTYPE_COUNT ? info[t].size : 0; }

const char *xi_dtype_name(xi_dtype t) {
    return (unsigned)t < XI_DTYPE_COUNT ? info[t].name : "?";
}

int xi_dtype_from_safetensors(const char *s) {
    for (int i = 0; i < XI_DTYPE_COUNT; i++)
        if (info[i].st && !strcmp(info[i].st, s)) return i;
    return -1;
}

float xi_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t xi_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow to inf */
    if (a < 0x38800000u) {                                 /* subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t man = (a & 0x7fffff) | 0x800000;
        int shift = 126 - (int)(a >> 23); /* 14..24 */
        uint32_t r = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1); /* rebias exponent, round to nearest even */
    return (uint16_t)(sign | (r >> 13));
}

void xi_to_f32(float *dst, const void *src, xi_dtype t, size_t n) {
    if (t == XI_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == XI_F16) {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = xi_f16_to_f32(s[i]);
    } else if (t == XI_BF16) {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = xi_bf16_to_f32(s[i]);
    }
}

void xi_from_f32(void *dst, xi_dtype t, const float *src, size_t n) {
    if (t == XI_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == XI_F16) {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = xi_f32_to_f16(src[i]);
    } else if (t == XI_BF16) {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = xi_f32_to_bf16(src[i]);
    }
}
