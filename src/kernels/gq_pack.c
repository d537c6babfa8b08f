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

/* ---- Q6_K's codes as triplets (gq_pack.h) ----
 * Value v = 128 h + 32 k + l of a stored block (h, k < 2 and 4, l < 32) has the six-bit code
 * ql[64 h + 32 (k & 1) + l] >> 4 (k & 2) & 15 | (qh[32 h + l] >> 2 k & 3) << 4. Packed, group
 * (h, g) holds at 96 (8 h + g) three 32-byte vectors V0, V1, V2, lane c byte b for column c's
 * values 128 h + 32 k + 4 g + b: Vk = code_k | (code_3 >> 2 k & 3) << 6 (k < 3). */
/* The 256 codes (0..63) of a stored block: the type's own unpacker, less its offset of 32. */
static void q6_codes(const xi_qtype *t, const uint8_t *b, uint8_t *q) {
    xi_qblock u;
    t->unpack(b, &u);
    for (int v = 0; v < 256; v++) q[v] = (uint8_t)(u.q[v] + 32);
}

/* The stored ql and qh (bytes 0..191) of 256 codes. */
static void q6_store(const uint8_t *q, uint8_t *b) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *c = q + 128 * h + l; /* c[32 k]: value 128 h + 32 k + l */
            b[64 * h + l] = (uint8_t)((c[0] & 15) | (c[64] & 15) << 4);
            b[64 * h + 32 + l] = (uint8_t)((c[32] & 15) | (c[96] & 15) << 4);
            b[128 + 32 * h + l] = (uint8_t)(c[0] >> 4 | (c[32] >> 4) << 2 | (c[64] >> 4) << 4 | (c[96] >> 4) << 6);
        }
}

/* Column c's 256 codes into their triplets (the 1536 bytes at t), and back. */
static void q6_to_triplets(const uint8_t *q, int c, uint8_t *t) {
    for (int grp = 0; grp < 16; grp++)
        for (int byte = 0; byte < 4; byte++) {
            const uint8_t *v = q + 128 * (grp / 8) + 4 * (grp % 8) + byte; /* v[32 k] */
            for (int k = 0; k < 3; k++) t[96 * grp + 32 * k + 4 * c + byte] = (uint8_t)(v[32 * k] | (v[96] >> 2 * k & 3) << 6);
        }
}

static void q6_from_triplets(const uint8_t *t, int c, uint8_t *q) {
    for (int grp = 0; grp < 16; grp++)
        for (int byte = 0; byte < 4; byte++) {
            const uint8_t *v = t + 96 * grp + 4 * c + byte; /* v[32 k] */
            uint8_t *o = q + 128 * (grp / 8) + 4 * (grp % 8) + byte;
            for (int k = 0; k < 3; k++) o[32 * k] = v[32 * k] & 63;
            o[96] = (uint8_t)(v[0] >> 6 | (v[32] >> 6) << 2 | (v[64] >> 6) << 4);
        }
}

/* 8 stored rows (src, row c at src + c * rb) to their packed group at dst. */
static void pack_group(const xi_qtype *t, const uint8_t *src, size_t rb, int64_t nb, uint8_t *dst) {
    const int bb = t->block_bytes, nf = t->f16_n, nu = (bb - 2 * nf) / 4;
    const int q6 = t->id == XI_GGML_Q6_K;
    for (int64_t i = 0; i < nb; i++, dst += 8 * bb)
        for (int c = 0; c < 8; c++) {
            const uint8_t *b = src + (size_t)c * rb + (size_t)i * (size_t)bb;
            for (int f = 0; f < nf; f++) memcpy(dst + 16 * f + 2 * c, b + t->f16_off + 2 * f, 2);
            for (int u = q6 ? 48 : 0; u < nu; u++) /* Q6_K: the units of its scales only */
                memcpy(dst + 16 * nf + 32 * u + 4 * c, b + rest_at(t, 4 * u), 4);
            if (q6) {
                uint8_t q[256];
                q6_codes(t, b, q);
                q6_to_triplets(q, c, dst + 16);
            }
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
    const int q6 = t->id == XI_GGML_Q6_K;
    for (int u = q6 ? 48 : 0; u < nu; u++) memcpy(out + rest_at(t, 4 * u), p + 16 * nf + 32 * u + 4 * c, 4);
    if (q6) { /* the codes back from their triplets */
        uint8_t q[256];
        q6_from_triplets(p + 16, c, q);
        q6_store(q, out);
    }
}

const uint8_t *xi_gq_row(const xi_weight *w, int64_t n, uint8_t *buf) {
    const size_t rb = xi_qtype_row_bytes(w->qtype, w->n_in);
    if (!w->block) return (const uint8_t *)w->data + (size_t)n * rb;
    const int64_t nb = w->n_in / w->qtype->block;
    for (int64_t i = 0; i < nb; i++) xi_gq_block_bytes(w, n, i, buf + (size_t)i * (size_t)w->qtype->block_bytes);
    return buf;
}
