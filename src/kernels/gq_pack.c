/* kernels/gq_pack: packing GGML weights for the 8-column kernels and reading them back
 * (gq_pack.h has the layout). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/gq_pack.h"

/* Byte j of the block's non-factor bytes: its place in the stored block. */
static int rest_at(const xi_qtype *t, int j) { return j < t->f16_off ? j : j + 2 * t->f16_n; }

static int type_fits(const xi_qtype *t) {
    if (!t || !t->unpack || t->f16_n < 1) return 0;
    const int rest = t->block_bytes - 2 * t->f16_n;
    /* the factors at the start or the end, the other bytes whole units */
    return (t->f16_off == 0 || t->f16_off + 2 * t->f16_n == t->block_bytes) && rest % 4 == 0;
}

int xi_gq_pack_fits(const xi_weight *w) {
    return w->dtype == XI_GGML && !w->block && type_fits(w->qtype) && w->n_out % 8 == 0 &&
           w->n_in % w->qtype->block == 0;
}

/* 8 stored rows (src, row c at src + c * rb) to their packed group at dst. */
static void pack_group(const xi_qtype *t, const uint8_t *src, size_t rb, int64_t nb, uint8_t *dst) {
    const int bb = t->block_bytes, nf = t->f16_n, nu = (bb - 2 * nf) / 4;
    for (int64_t i = 0; i < nb; i++, dst += 8 * bb)
        for (int c = 0; c < 8; c++) {
            const uint8_t *b = src + (size_t)c * rb + (size_t)i * (size_t)bb;
            for (int f = 0; f < nf; f++) memcpy(dst + 16 * f + 2 * c, b + t->f16_off + 2 * f, 2);
            for (int u = 0; u < nu; u++)
                for (int k = 0; k < 4; k++) dst[16 * nf + 32 * u + 4 * c + k] = b[rest_at(t, 4 * u + k)];
        }
}

int xi_gq_pack(xi_weight *w, char *err, size_t errlen) {
    if (!xi_gq_pack_fits(w)) return 0;
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    uint8_t *tmp = malloc(8 * rb);
    if (!tmp) return xi_errf(err, errlen, "out of memory packing a %s weight (%zu bytes)", w->qtype->name, 8 * rb);
    uint8_t *data = (uint8_t *)w->data; /* the caller's own copy (kernels.h: xi_weight_block) */
    for (int64_t g = 0; g < w->n_out / 8; g++) {
        memcpy(tmp, data + (size_t)g * 8 * rb, 8 * rb);
        pack_group(w->qtype, tmp, rb, w->n_in / w->qtype->block, data + (size_t)g * 8 * rb);
    }
    free(tmp);
    w->block = 8;
    return 0;
}

void xi_gq_block_bytes(const xi_weight *w, int64_t n, int64_t i, uint8_t *out) {
    const xi_qtype *t = w->qtype;
    const size_t rb = xi_qtype_row_bytes(t, w->n_in);
    const int bb = t->block_bytes;
    if (!w->block) {
        memcpy(out, (const uint8_t *)w->data + (size_t)n * rb + (size_t)i * (size_t)bb, (size_t)bb);
        return;
    }
    const int nf = t->f16_n, nu = (bb - 2 * nf) / 4, c = (int)(n % 8);
    const uint8_t *p = (const uint8_t *)w->data + (size_t)(n / 8) * 8 * rb + (size_t)i * 8 * (size_t)bb;
    for (int f = 0; f < nf; f++) memcpy(out + t->f16_off + 2 * f, p + 16 * f + 2 * c, 2);
    for (int u = 0; u < nu; u++)
        for (int k = 0; k < 4; k++) out[rest_at(t, 4 * u + k)] = p[16 * nf + 32 * u + 4 * c + k];
}

const uint8_t *xi_gq_row(const xi_weight *w, int64_t n, uint8_t *buf) {
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    if (!w->block) return (const uint8_t *)w->data + (size_t)n * rb;
    const int64_t nb = w->n_in / w->qtype->block;
    for (int64_t i = 0; i < nb; i++) xi_gq_block_bytes(w, n, i, buf + (size_t)i * (size_t)w->qtype->block_bytes);
    return buf;
}
