/* kernels: the ISA-independent part of the tiled matmul variants (x86/avx2_matmul.c,
 * arm/neon_matmul.c): where a tile's inputs, outputs and weight columns are. */
#ifndef XI_MATMUL_TILE_H
#define XI_MATMUL_TILE_H

#include "kernels/kernels.h"

typedef struct {
    float *y;  /* y[r * ldy + c] for the tile's row r, column c */
    int64_t ldy;
    const float *x; /* x[r * ldx + k] */
    int64_t ldx;
    int64_t k; /* n_in */
    /* Nonzero when the C columns after the tile's belong to the same weight, so the tile
     * may prefetch them. Never set for an f32 panel (it sits in cache) nor for a weight's
     * last tile: a prefetch past the end of a buffer can hit an unmapped page, and some
     * cores (AMD Zen) then walk the page tables on every such prefetch, which made GEMMs
     * over a small panel 3-4x slower. */
    int pf;
    /* Q4_AWQ: row r's sum of x over group g at xg[r * (k / gs) + g]; NULL otherwise. */
    const float *xg;
} tile_io;

/* A tile's weight columns: column c's row at base + c * stride bytes. */
typedef struct {
    const char *base;
    size_t stride;
    const float *scale;  /* Q8: [C] multiplied at the end; Q4: [C][groups]; else NULL */
    const uint8_t *zero; /* Q4: [C][groups] */
    int64_t groups, gs;  /* Q4 */
    int q4b;             /* Q4: the layout, 0 or 16 (kernels.h) */
} wsrc;

/* One F32 / F16 / BF16 / Q8 (unscaled) element as f32: the scalar tails of every variant. */
static inline float xi_elem_f32(xi_dtype t, const void *p, int64_t i) {
    switch (t) {
    case XI_F16: return xi_f16_to_f32(((const uint16_t *)p)[i]);
    case XI_BF16: return xi_bf16_to_f32(((const uint16_t *)p)[i]);
    case XI_Q8: return (float)((const int8_t *)p)[i];
    default: return ((const float *)p)[i];
    }
}

/* A tile-internal format: columns of an f32 panel holding a Q4_AWQ weight's codes q
 * (exact), with wsrc's scale / zero / groups / gs of the weight, so the tile applies them
 * per group exactly as the direct Q4_AWQ tiles do. */
#define XI_Q4_PANEL XI_DTYPE_COUNT

/* The weight columns [n, ...) of w. */
static inline wsrc wsrc_at(const xi_weight *w, int64_t n) {
    const int64_t K = w->n_in;
    wsrc s = {0};
    if (w->dtype == XI_Q4_AWQ) {
        s.groups = K / w->group_size;
        s.gs = w->group_size;
        s.q4b = w->block;
        s.stride = (size_t)(K / 2);
        s.scale = w->scale + n * s.groups;
        s.zero = w->zero + n * s.groups;
    } else {
        s.stride = (size_t)K * (w->dtype == XI_Q8 ? 1 : xi_dtype_size(w->dtype));
        s.scale = w->dtype == XI_Q8 ? w->scale + n : NULL;
    }
    s.base = (const char *)w->data + (size_t)n * s.stride;
    return s;
}

static inline void wsrc_advance(xi_dtype t, wsrc *w, int C) {
    w->base += (size_t)C * w->stride;
    if (t == XI_Q4_AWQ || t == XI_Q4_PANEL) {
        w->scale += C * w->groups;
        if (w->zero) w->zero += C * w->groups;
    } else if (w->scale) {
        w->scale += C;
    }
}

#endif
