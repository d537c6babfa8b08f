/* kernels: the ISA-independent driver of the tiled matmul variants, included once at the end
 * of x86/avx2_matmul.c and arm/neon_matmul.c after they define:
 *   tile(t, R, C, io, w)     R x C outputs, R <= 4, C <= TILE_COLS(t, R) <= 8, always_inline
 *   panel_column(dst, w, n)  column n of w as the exact f32 values tile() would use
 *   TILE_COLS(t, R), PANEL_COLS, GEMM_MIN_ROWS, GEMM_ROW_BLOCK
 * for the dense blocked layout (block 8, kernels.h):
 *   btile(t, R, NB, y, ldy, x, ldx, blk, bstride, K, scale, lo, hi)  R rows x NB blocks,
 *                            R <= 4, NB <= BTILE_NB(R) <= (8, 6, 4, 3) for R = 1..4,
 *                            always_inline; blocked_rows below runs every row count of the
 *                            layout through it, in one summation order of the variant's own
 *   blocks_to_f32(dst, w, b, NB)  blocks as the exact f32 values btile would use
 *   BLOCKED_PANEL_ROWS(t)    row counts above which blocks go through blocks_to_f32 first
 * and for Q4_AWQ, whose tiles fold zero points per group:
 *   q4_group_sums(out, x, n_in, group_size)  each group's sum of one row of x, in the order
 *                            the tiles sum q * x; the driver computes them once per call
 *                            into tile_io.xg
 * It defines `static void matmul_driver(...)` with the xi_ops.matmul signature. */

#include "kernels/wformat.h"

/* Rows [0, R) x nc columns from w, in tiles of TILE_COLS and one narrower tile. */
XI_INLINE void tile_cols(xi_dtype t, int R, const tile_io *io0, wsrc w, int64_t nc) {
    const int CM = TILE_COLS(t, R);
    tile_io io = *io0;
    int64_t n = 0;
    for (; n + CM <= nc; n += CM) {
        io.pf = io0->pf && n + 2 * CM <= nc;
        tile(t, R, CM, &io, &w);
        io.y += CM;
        wsrc_advance(t, &w, CM);
    }
    io.pf = 0;
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
COLS_FNS(q4p_, XI_Q4_PANEL)

static cols_fn cols_for(xi_dtype t, int R) {
    static const cols_fn fns[6][4] = {
        {cols_f32_1, cols_f32_2, cols_f32_3, cols_f32_4},
        {cols_f16_1, cols_f16_2, cols_f16_3, cols_f16_4},
        {cols_bf16_1, cols_bf16_2, cols_bf16_3, cols_bf16_4},
        {cols_q8_1, cols_q8_2, cols_q8_3, cols_q8_4},
        {cols_q4_1, cols_q4_2, cols_q4_3, cols_q4_4},
        {cols_q4p_1, cols_q4p_2, cols_q4p_3, cols_q4p_4},
    };
    const int i = t == XI_F16 ? 1 : t == XI_BF16 ? 2 : t == XI_Q8 ? 3 : t == XI_Q4_AWQ ? 4
                : t == XI_Q4_PANEL ? 5 : 0;
    return fns[i][R - 1];
}

/* This thread's scratch (xi_kernel_scratch): slot 0 holds a weight panel, slot 1 the AWQ
 * group sums of x. */
static float *scratch_slot(int slot, size_t bytes) { return xi_kernel_scratch(slot, bytes); }
static float *panel_scratch(size_t bytes) { return scratch_slot(0, bytes); }

/* Many rows of a row-major weight: per block of rows (x stays in L2), per PANEL_COLS
 * columns, convert the columns to f32 once and run every 4-row tile of the block over them.
 * Returns -1 when the panel cannot be allocated (the caller then uses the direct tiles,
 * which give the same bits). */
static int gemm_panel(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                      const xi_weight *w, int64_t n0, int64_t n1, const float *xg) {
    const int64_t K = w->n_in;
    float *panel = NULL; /* [PANEL_COLS][K], this thread's scratch */
    if (w->dtype != XI_F32) {
        panel = panel_scratch((size_t)(PANEL_COLS * K * 4));
        if (!panel) return -1;
    }
    const xi_dtype pt = w->dtype == XI_Q4_AWQ ? XI_Q4_PANEL : XI_F32; /* the panel's tiles */
    for (int64_t rb = 0; rb < rows; rb += GEMM_ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + GEMM_ROW_BLOCK);
        for (int64_t n = n0, C; n < n1; n += C) {
            C = XI_MIN((int64_t)PANEL_COLS, n1 - n);
            wsrc s = wsrc_at(w, n);
            if (panel) {
                for (int64_t c = 0; c < C; c++) panel_column(panel + c * K, w, n + c);
                s = (wsrc){.base = (const char *)panel, .stride = (size_t)K * 4,
                           .scale = s.scale, .zero = s.zero, .groups = s.groups, .gs = s.gs};
            }
            for (int64_t r = rb; r < re; r += 4) {
                const int R = (int)XI_MIN((int64_t)4, re - r);
                const tile_io io = {y + r * ldy + n, ldy, x + r * ldx, ldx, K, 0,
                                    xg ? xg + r * (w->n_in / w->group_size) : NULL};
                cols_for(pt, R)(&io, s, C);
            }
        }
    }
    return 0;
}

/* The tiles of the variant's blocked layout, one out-of-line function per (format, R, NB). */
typedef void (*btile_fn)(float *, int64_t, const float *, int64_t, const char *, size_t, int64_t,
                         const float *, int64_t, int64_t);
#define BT_FN(T, R, NB)                                                                        \
    static void bt_##T##_##R##_##NB(float *y, int64_t ldy, const float *x, int64_t ldx,         \
                                    const char *blk, size_t bs, int64_t K, const float *sc,     \
                                    int64_t lo, int64_t hi) {                                   \
        btile(XI_##T, R, NB, y, ldy, x, ldx, blk, bs, K, sc, lo, hi);                           \
    }
#define BT_FNS(T)                                                                              \
    BT_FN(T, 1, 1) BT_FN(T, 1, 2) BT_FN(T, 1, 3) BT_FN(T, 1, 4) BT_FN(T, 1, 5) BT_FN(T, 1, 6)  \
    BT_FN(T, 1, 7) BT_FN(T, 1, 8) BT_FN(T, 2, 1) BT_FN(T, 2, 2) BT_FN(T, 2, 3) BT_FN(T, 2, 4)  \
    BT_FN(T, 2, 5) BT_FN(T, 2, 6) BT_FN(T, 3, 1) BT_FN(T, 3, 2) BT_FN(T, 3, 3) BT_FN(T, 3, 4)  \
    BT_FN(T, 4, 1) BT_FN(T, 4, 2) BT_FN(T, 4, 3)
BT_FNS(F32)
BT_FNS(F16)
BT_FNS(BF16)
BT_FNS(Q8)
#define BT_ROW(T)                                                                              \
    {{bt_##T##_1_1, bt_##T##_1_2, bt_##T##_1_3, bt_##T##_1_4, bt_##T##_1_5, bt_##T##_1_6,      \
      bt_##T##_1_7, bt_##T##_1_8},                                                             \
     {bt_##T##_2_1, bt_##T##_2_2, bt_##T##_2_3, bt_##T##_2_4, bt_##T##_2_5, bt_##T##_2_6},      \
     {bt_##T##_3_1, bt_##T##_3_2, bt_##T##_3_3, bt_##T##_3_4},                                 \
     {bt_##T##_4_1, bt_##T##_4_2, bt_##T##_4_3}}
static const btile_fn BTILES[4][4][8] = {BT_ROW(F32), BT_ROW(F16), BT_ROW(BF16), BT_ROW(Q8)};

/* Rows [0, rows) x columns [n0, n1) of a blocked weight. Few rows: one pass of the widest
 * tiles over the blocks. Many: per block of rows (x stays in L2), per BTILE_NB(4) blocks
 * (they stay in L2), 4-row tiles down the row block. */
static void blocked_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                         const xi_weight *w, int64_t n0, int64_t n1) {
    const int64_t K = w->n_in, b0 = n0 / 8, b1 = (n1 + 7) / 8;
    const int ti = w->dtype == XI_F16 ? 1 : w->dtype == XI_BF16 ? 2 : w->dtype == XI_Q8 ? 3 : 0;
    const size_t es = w->dtype == XI_F32 ? 4 : w->dtype == XI_Q8 ? 1 : 2, bs = (size_t)(8 * K) * es;
    const int64_t RB = rows < 4 ? rows : GEMM_ROW_BLOCK;
    /* Many 4-row tiles per column group: convert the group's blocks to f32 once instead of
     * once per tile (NULL, out of memory: the tiles convert, same bits), above the variant's
     * BLOCKED_PANEL_ROWS: below it the tiles' own conversions cost less than the panel's
     * extra write and reads. */
    const int64_t panel_rows = BLOCKED_PANEL_ROWS(w->dtype);
    float *f32 = rows > panel_rows && ti ? panel_scratch((size_t)(BTILE_NB(4) * 8 * K) * 4) : NULL;
    for (int64_t rb = 0; rb < rows; rb += RB) {
        const int64_t re = XI_MIN(rows, rb + RB);
        const int NBmax = BTILE_NB((int)XI_MIN((int64_t)4, re - rb));
        for (int64_t b = b0; b < b1; b += NBmax) {
            const int NB = (int)XI_MIN((int64_t)NBmax, b1 - b);
            const char *blk = (const char *)w->data + (size_t)b * bs;
            const float *sc = w->dtype == XI_Q8 ? w->scale + b * 8 : NULL;
            int t = ti;
            size_t bstride = bs;
            if (f32 && re - rb > 4) {
                blocks_to_f32(f32, w, b, NB);
                blk = (const char *)f32;
                t = 0;
                bstride = (size_t)(8 * K) * 4;
            }
            for (int64_t r = rb; r < re; r += 4) {
                const int R = (int)XI_MIN((int64_t)4, re - r);
                BTILES[t][R - 1][XI_MIN(NB, BTILE_NB(R)) - 1](
                    y + r * ldy + b * 8, ldy, x + r * ldx, ldx, blk, bstride, K, sc, n0 - b * 8,
                    n1 - b * 8);
            }
        }
    }
}

static void matmul_driver(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                          const xi_weight *w, int64_t n0, int64_t n1) {
    const xi_wformat *f = xi_wformat_of(w);
    const int grouped = !f->block; /* AWQ: scale and zero point per group of the weight's */
    if (f->matmul_exact || w->block == XI_BLOCK_DOT ||
        (grouped && (w->group_size <= 0 || w->group_size % 8 || w->n_in % w->group_size))) {
        /* Only group sizes that are multiples of 8 have a vector path; the dot layout and the
         * formats with an exact matmul of their own (the ggml types, wformat.h) are the
         * integer path's (fp32 activations read them through ref's matmul). */
        xi_ops_ref()->matmul(y, ldy, x, ldx, rows, w, n0, n1);
        return;
    }
    if (n1 <= n0) return;
    const float *xg = NULL; /* the AWQ group sums of x, rows x (n_in / group_size) */
    if (grouped) {
        const int64_t G = w->n_in / w->group_size;
        float *s = scratch_slot(1, (size_t)(rows * G) * 4);
        if (!s) { /* out of memory: ref gives the answer, slower */
            xi_ops_ref()->matmul(y, ldy, x, ldx, rows, w, n0, n1);
            return;
        }
        for (int64_t r = 0; r < rows; r++) q4_group_sums(s + r * G, x + r * ldx, w->n_in, w->group_size);
        xg = s;
    }
    if (w->block && (f->layouts & XI_LAYOUT_B8)) { /* block 8, the only dense one */
        blocked_rows(y, ldy, x, ldx, rows, w, n0, n1);
        return;
    }
    if (rows > GEMM_MIN_ROWS && gemm_panel(y, ldy, x, ldx, rows, w, n0, n1, xg) == 0) return;
    for (int64_t r = 0; r < rows; r += 4) {
        const int R = (int)XI_MIN((int64_t)4, rows - r);
        const tile_io io = {y + r * ldy + n0, ldy, x + r * ldx, ldx, w->n_in, 1,
                            xg ? xg + r * (w->n_in / w->group_size) : NULL};
        cols_for(w->dtype, R)(&io, wsrc_at(w, n0), n1 - n0);
    }
}
