/* kernels: the ISA-independent driver of the tiled matmul variants, included once at the end
 * of x86/avx2_matmul.c and arm/neon_matmul.c after they define:
 *   tile(t, R, C, io, w)     R x C outputs, R <= 4, C <= TILE_COLS(t, R) <= 8, always_inline
 *   panel_column(dst, w, n)  column n of w as the exact f32 values tile() would use
 *   TILE_COLS(t, R), PANEL_COLS, GEMM_MIN_ROWS, GEMM_ROW_BLOCK
 * It defines `static void matmul_driver(...)` with the xi_ops.matmul signature. */
#include <stdlib.h>

/* Rows [0, R) x nc columns from w, in tiles of TILE_COLS and one narrower tile. */
XI_INLINE void tile_cols(xi_dtype t, int R, const tile_io *io0, wsrc w, int64_t nc) {
    const int CM = TILE_COLS(t, R);
    tile_io io = *io0;
    int64_t n = 0;
    for (; n + CM <= nc; n += CM) {
        tile(t, R, CM, &io, &w);
        io.y += CM;
        wsrc_advance(t, &w, CM);
    }
    switch (nc - n) {
    case 1: tile(t, R, 1, &io, &w); break;
    case 2: tile(t, R, 2, &io, &w); break;
    case 3: if (CM > 3) tile(t, R, 3, &io, &w); break;
    case 4: if (CM > 4) tile(t, R, 4, &io, &w); break;
    case 5: if (CM > 5) tile(t, R, 5, &io, &w); break;
    case 6: if (CM > 6) tile(t, R, 6, &io, &w); break;
    case 7: if (CM > 7) tile(t, R, 7, &io, &w); break;
    default: break;
    }
}

/* One out-of-line instantiation per (format, rows). */
typedef void (*cols_fn)(const tile_io *io, wsrc w, int64_t nc);
#define COLS_FN(name, T, R) \
    static void name(const tile_io *io, wsrc w, int64_t nc) { tile_cols(T, R, io, w, nc); }
#define COLS_FNS(sfx, T) \
    COLS_FN(cols_##sfx##1, T, 1) COLS_FN(cols_##sfx##2, T, 2) COLS_FN(cols_##sfx##3, T, 3) \
    COLS_FN(cols_##sfx##4, T, 4)
COLS_FNS(f32_, XI_F32)
COLS_FNS(f16_, XI_F16)
COLS_FNS(bf16_, XI_BF16)
COLS_FNS(q8_, XI_Q8)
COLS_FNS(q4_, XI_Q4_AWQ)

static cols_fn cols_for(xi_dtype t, int R) {
    static const cols_fn fns[5][4] = {
        {cols_f32_1, cols_f32_2, cols_f32_3, cols_f32_4},
        {cols_f16_1, cols_f16_2, cols_f16_3, cols_f16_4},
        {cols_bf16_1, cols_bf16_2, cols_bf16_3, cols_bf16_4},
        {cols_q8_1, cols_q8_2, cols_q8_3, cols_q8_4},
        {cols_q4_1, cols_q4_2, cols_q4_3, cols_q4_4},
    };
    const int i = t == XI_F16 ? 1 : t == XI_BF16 ? 2 : t == XI_Q8 ? 3 : t == XI_Q4_AWQ ? 4 : 0;
    return fns[i][R - 1];
}

/* Many rows: per block of rows (x stays in L2), per PANEL_COLS columns, convert the columns
 * to f32 once and run every 4-row tile of the block over them. Returns -1 when the panel
 * cannot be allocated (the caller then uses the direct tiles, which give the same bits). */
static int gemm_panel(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in;
    float *panel = NULL; /* [PANEL_COLS][K], owned here */
    if (w->dtype != XI_F32) {
        panel = aligned_alloc(64, (size_t)((PANEL_COLS * K * 4 + 63) & ~(int64_t)63));
        if (!panel) return -1;
    }
    for (int64_t rb = 0; rb < rows; rb += GEMM_ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + GEMM_ROW_BLOCK);
        for (int64_t n = n0; n < n1; n += PANEL_COLS) {
            const int64_t C = XI_MIN((int64_t)PANEL_COLS, n1 - n);
            wsrc s = wsrc_at(w, n);
            if (panel) {
                for (int64_t c = 0; c < C; c++) panel_column(panel + c * K, w, n + c);
                s = (wsrc){.base = (const char *)panel, .stride = (size_t)K * 4,
                           .scale = w->dtype == XI_Q8 ? w->scale + n : NULL};
            }
            for (int64_t r = rb; r < re; r += 4) {
                const int R = (int)XI_MIN((int64_t)4, re - r);
                const tile_io io = {y + r * ldy + n, ldy, x + r * ldx, ldx, K};
                cols_for(XI_F32, R)(&io, s, C);
            }
        }
    }
    free(panel);
    return 0;
}

static void matmul_driver(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                          const xi_weight *w, int64_t n0, int64_t n1) {
    if (w->dtype == XI_Q4_AWQ &&
        (w->group_size <= 0 || w->group_size % 8 || w->n_in % w->group_size)) {
        /* Only AWQ group sizes that are multiples of 8 have a vector path. */
        xi_ops_ref()->matmul(y, ldy, x, ldx, rows, w, n0, n1);
        return;
    }
    if (n1 <= n0) return;
    if (rows > GEMM_MIN_ROWS && gemm_panel(y, ldy, x, ldx, rows, w, n0, n1) == 0) return;
    for (int64_t r = 0; r < rows; r += 4) {
        const int R = (int)XI_MIN((int64_t)4, rows - r);
        const tile_io io = {y + r * ldy + n0, ldy, x + r * ldx, ldx, w->n_in};
        cols_for(w->dtype, R)(&io, wsrc_at(w, n0), n1 - n0);
    }
}
