/* kernels: the ISA-independent loop of the integer matmul variants, included by
 * x86/avx2_qdot.c and arm/neon_qdot.c after they define ROW_BLOCK, NB_MAX(R) (<= 4, and
 * <= 2 for R > 2) and the always-inline tiles
 *   q8_tile / q4_tile(R, NB, y, ldy, x, r0, w, b, lo, hi)  rows r0.. r0+R-1 of x, column
 *                            blocks b.. b+NB-1 of 8 of w's dot layout, storing columns
 *                            [lo, hi) relative to block b.
 * Rows go in blocks of ROW_BLOCK; per block, the widest column group runs down the rows in
 * 4-row tiles, so each weight group is read from memory once per row block and reused from
 * cache by every tile. */

/* One out-of-line function per (format, R, NB). */
typedef void (*qtile_fn)(float *, int64_t, const xi_qx *, int64_t, const xi_weight *, int64_t,
                         int64_t, int64_t);
#define QT_FN(F, R, NB)                                                                        \
    static void F##_##R##_##NB(float *y, int64_t ldy, const xi_qx *x, int64_t r0,               \
                               const xi_weight *w, int64_t b, int64_t lo, int64_t hi) {         \
        F##_tile(R, NB, y, ldy, x, r0, w, b, lo, hi);                                           \
    }
#define QT_FNS(F)                                                                              \
    QT_FN(F, 1, 1) QT_FN(F, 1, 2) QT_FN(F, 1, 3) QT_FN(F, 1, 4) QT_FN(F, 2, 1) QT_FN(F, 2, 2)  \
    QT_FN(F, 2, 3) QT_FN(F, 2, 4) QT_FN(F, 3, 1) QT_FN(F, 3, 2) QT_FN(F, 4, 1) QT_FN(F, 4, 2)
QT_FNS(q8)
QT_FNS(q4)
#define QT_ROW(F)                                                                              \
    {{F##_1_1, F##_1_2, F##_1_3, F##_1_4},                                                     \
     {F##_2_1, F##_2_2, F##_2_3, F##_2_4},                                                     \
     {F##_3_1, F##_3_2, NULL, NULL},                                                           \
     {F##_4_1, F##_4_2, NULL, NULL}}
static const qtile_fn QTILES[2][4][4] = {QT_ROW(q8), QT_ROW(q4)};
static void qdot_driver(float *y, int64_t ldy, const xi_qx *x, int64_t rows, const xi_weight *w,
                        int64_t n0, int64_t n1) {
    if (w->block != XI_BLOCK_DOT || x->bs != xi_qdot_block(w)) { /* same bits, slower */
        xi_matmul_q_ref(y, ldy, x, rows, w, n0, n1);
        return;
    }
    if (n1 <= n0) return;
    const qtile_fn(*T)[4] = QTILES[w->dtype == XI_Q8 ? 0 : 1];
    const int64_t b0 = n0 / 8, b1 = (n1 + 7) / 8;
    for (int64_t rb = 0; rb < rows; rb += ROW_BLOCK) {
        const int64_t re = XI_MIN(rows, rb + ROW_BLOCK);
        const int NBm = NB_MAX((int)XI_MIN((int64_t)4, re - rb));
        for (int64_t b = b0; b < b1; b += NBm) {
            const int NB = (int)XI_MIN((int64_t)NBm, b1 - b);
            for (int64_t r = rb; r < re; r += 4) {
                const int R = (int)XI_MIN((int64_t)4, re - r);
                T[R - 1][NB - 1](y + r * ldy + b * 8, ldy, x, r, w, b, n0 - b * 8, n1 - b * 8);
            }
        }
    }
}
