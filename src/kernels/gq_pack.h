/* kernels/gq_pack: the packed layout of GGML weights (xi_weight.block == 8).
 *
 * Stored as in the file, a GGML weight is n_out rows of blocks; the 8-column kernels read 8
 * rows' blocks at once and spend much of a one-row (decode) step transposing them in
 * registers so that each 32-bit lane holds one column. Packed, that transpose is done once at
 * load: per group of 8 output rows (n / 8) and per block i, the 8 rows' blocks become 8 *
 * block_bytes bytes (the same size), at data + (n / 8) * 8 * row_bytes + i * 8 * block_bytes:
 *   - first the block's f16 factors (qtype f16_off, f16_n: d, and dmin or m), factor f as the
 *     8 rows' u16 values, row c at 16 f + 2 c (one vcvtph2ps gives the 8 columns' factors);
 *   - then the block's other bytes in order (the factors left out), cut into 4-byte units,
 *     unit u as the 8 rows' 4 bytes, row c at 16 f16_n + 32 u + 4 c (one 32-byte load gives
 *     the 8 columns' unit, one column per lane).
 * Q6_K's codes (its ql and qh, 192 bytes) are the exception: a six-bit code split over two
 * places costs a one-row step 17 vector operations per 4 code vectors; packed, each group
 * (h, g) of values 128 h + 32 k + 4 g.. (k < 4, g < 8) is three 32-byte vectors Vk = code_k |
 * (code_3 >> 2 k & 3) << 6 (lane c: column c), 11 operations for the 4 (gq_pack.c); its scales
 * stay units 48..51. One row, 1 thread, from L3: 0.45 -> 0.40 s (3000 calls of 1024 x 4096).
 * Every type whose other bytes are a whole number of units can be packed (all the computed
 * types are); n_out must be a multiple of 8. The row reader and the oracle unpack a row back
 * to the file's bytes, so every consumer of a weight (embedding lookups of a tied lm_head,
 * the exact fp32 path, the scalar oracle) reads either layout. Pure functions, any thread. */
#ifndef XI_GQ_PACK_H
#define XI_GQ_PACK_H

#include "kernels/kernels.h"
#include "kernels/qtypes.h"

/* Whether w (GGML, stored layout) can be packed: a type with f16 factors and whole units,
 * n_out a multiple of 8. */
int xi_gq_pack_fits(const xi_weight *w);
/* Pack w in place (block 0 -> 8); a no-op returning 0 when it does not fit or is packed
 * already; -1 with err set when 8 rows of scratch cannot be allocated. */
int xi_gq_pack(xi_weight *w, char *err, size_t errlen);
/* Block i of row n as the file stores it (block_bytes bytes into out), in either layout. */
void xi_gq_block_bytes(const xi_weight *w, int64_t n, int64_t i, uint8_t *out);
/* Row n as the file stores it: a pointer into w->data (stored layout) or buf (packed, which
 * must hold xi_qtype_row_bytes(w->qtype, w->n_in) bytes) filled. */
const uint8_t *xi_gq_row(const xi_weight *w, int64_t n, uint8_t *buf);

#endif
