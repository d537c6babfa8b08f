/* kernels/qtypes: the weight-format table, ggml's block layouts unpacked into xi_qblock, and
 * the scalar references (dequantize, activation quantization, integer dot).
 *
 * The layouts follow ggml's documented block structs (ggml-common.h): little-endian, f16
 * scales, 4-bit values low nibble first. Each unpack writes the integers ggml's dequantizer
 * multiplies, so (d * sc) * q - dmin * m reproduces its floats exactly. */
#include "kernels/qtypes.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "tensor/dtype.h"

static float f16(const uint8_t *p) { return xi_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* ---------------------------------------------------------------- 32-value blocks */

static void one_sub(xi_qblock *b, float d, float dmin) {
    b->sub = 32;
    b->sc[0] = 1;
    b->m[0] = dmin != 0.0f;
    b->d = d;
    b->dmin = dmin;
}

/* Q4_0: f16 d, 16 bytes of nibbles; x = (nibble - 8) * d; low nibbles are values 0..15. */
static void unpack_q4_0(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *qs = p + 2;
    for (int j = 0; j < 16; j++) {
        b->q[j] = (int8_t)((qs[j] & 15) - 8);
        b->q[j + 16] = (int8_t)((qs[j] >> 4) - 8);
    }
    one_sub(b, f16(p), 0.0f);
}

/* Q4_1: f16 d, f16 m, nibbles; x = nibble * d + m (m enters as dmin = -m). */
static void unpack_q4_1(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *qs = p + 4;
    for (int j = 0; j < 16; j++) {
        b->q[j] = (int8_t)(qs[j] & 15);
        b->q[j + 16] = (int8_t)(qs[j] >> 4);
    }
    one_sub(b, f16(p), -f16(p + 2));
    b->m[0] = 1;
}

/* Q5_0 / Q5_1: nibbles plus a 32-bit mask of fifth bits (bit j for value j). */
static void fifth_bits(const uint8_t *qh4, const uint8_t *qs, int bias, xi_qblock *b) {
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 |
                  (uint32_t)qh4[3] << 24;
    for (int j = 0; j < 16; j++) {
        int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
        b->q[j] = (int8_t)(((qs[j] & 15) | h0 << 4) - bias);
        b->q[j + 16] = (int8_t)(((qs[j] >> 4) | h1 << 4) - bias);
    }
}

static void unpack_q5_0(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk;
    fifth_bits(p + 2, p + 6, 16, b);
    one_sub(b, f16(p), 0.0f);
}

static void unpack_q5_1(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk;
    fifth_bits(p + 4, p + 8, 0, b);
    one_sub(b, f16(p), -f16(p + 2));
    b->m[0] = 1;
}

static void unpack_q8_0(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk;
    memcpy(b->q, p + 2, 32);
    one_sub(b, f16(p), 0.0f);
}

/* IQ4_NL: nibbles index a fixed non-linear table. */
static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

static void unpack_iq4_nl(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *qs = p + 2;
    for (int j = 0; j < 16; j++) {
        b->q[j] = iq4nl_values[qs[j] & 15];
        b->q[j + 16] = iq4nl_values[qs[j] >> 4];
    }
    one_sub(b, f16(p), 0.0f);
}

/* ---------------------------------------------------------------- 256-value K blocks */

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] of 2-bit values, f16 d, dmin.
 * Each 128-value half reads 32 bytes of qs four times at shifts 0, 2, 4, 6; each pass covers
 * two 16-value sub-blocks (bytes 0..15 and 16..31). */
static void unpack_q2_k(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *sc = p, *q = p + 16;
    for (int s = 0; s < 16; s++) b->sc[s] = sc[s] & 15, b->m[s] = sc[s] >> 4;
    int k = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int l = 0; l < 32; l++) b->q[k++] = (int8_t)((q[l] >> shift) & 3);
    b->sub = 16;
    b->d = f16(p + 80);
    b->dmin = f16(p + 82);
}

/* Q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), f16 d. A value is its two
 * low bits minus 4 unless its hmask bit is set. */
static void unpack_q3_k(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *hm = p, *q = p + 32, *s12 = p + 96;
    for (int s = 0; s < 16; s++) {
        int lo = s < 8 ? s12[s] & 15 : s12[s - 8] >> 4;
        int hi = (s12[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
        b->sc[s] = (int16_t)((lo | hi << 4) - 32);
        b->m[s] = 0;
    }
    int k = 0, bit = 0;
    for (int half = 0; half < 2; half++, q += 32)
        for (int shift = 0; shift < 8; shift += 2, bit++)
            for (int l = 0; l < 32; l++)
                b->q[k++] = (int8_t)(((q[l] >> shift) & 3) - ((hm[l] >> bit) & 1 ? 0 : 4));
    b->sub = 16;
    b->d = f16(p + 108);
    b->dmin = 0.0f;
}

/* The 8 six-bit scales and mins of Q4_K / Q5_K packed in 12 bytes. */
static void scale_min_k4(const uint8_t *q, xi_qblock *b) {
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            b->sc[j] = q[j] & 63;
            b->m[j] = q[j + 4] & 63;
        } else {
            b->sc[j] = (int16_t)((q[j + 4] & 15) | (q[j - 4] >> 6) << 4);
            b->m[j] = (int16_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
        }
    }
}

/* Q4_K: f16 d, dmin, scales[12], qs[128]; each 64 values take 32 bytes, low nibbles first. */
static void unpack_q4_k(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *q = p + 16;
    scale_min_k4(p + 4, b);
    for (int j = 0; j < 4; j++, q += 32)
        for (int l = 0; l < 32; l++) {
            b->q[64 * j + l] = (int8_t)(q[l] & 15);
            b->q[64 * j + 32 + l] = (int8_t)(q[l] >> 4);
        }
    b->sub = 32;
    b->d = f16(p);
    b->dmin = f16(p + 2);
}

/* Q5_K: Q4_K plus qh[32], whose bit 2j / 2j+1 is the fifth bit of the j-th 64's halves. */
static void unpack_q5_k(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *qh = p + 16, *q = p + 48;
    scale_min_k4(p + 4, b);
    for (int j = 0; j < 4; j++, q += 32)
        for (int l = 0; l < 32; l++) {
            b->q[64 * j + l] = (int8_t)((q[l] & 15) | ((qh[l] >> (2 * j)) & 1) << 4);
            b->q[64 * j + 32 + l] = (int8_t)((q[l] >> 4) | ((qh[l] >> (2 * j + 1)) & 1) << 4);
        }
    b->sub = 32;
    b->d = f16(p);
    b->dmin = f16(p + 2);
}

/* Q6_K: ql[128], qh[64], int8 scales[16], f16 d; x = d * scale * (6-bit value - 32). */
static void unpack_q6_k(const void *blk, xi_qblock *b) {
    const uint8_t *p = blk, *ql = p, *qh = p + 128;
    const int8_t *sc = (const int8_t *)(p + 192);
    for (int s = 0; s < 16; s++) b->sc[s] = sc[s], b->m[s] = 0;
    for (int half = 0; half < 2; half++, ql += 64, qh += 32) {
        int8_t *y = b->q + 128 * half;
        for (int l = 0; l < 32; l++) {
            y[l] = (int8_t)(((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32);
            y[l + 32] = (int8_t)(((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32);
            y[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
            y[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
        }
    }
    b->sub = 16;
    b->d = f16(p + 208);
    b->dmin = 0.0f;
}

/* ---------------------------------------------------------------- the table */

static const xi_qtype types[] = {
    {XI_GGML_F32, "f32", 1, 4, XI_ACT_F32, NULL, 0, 0},
    {XI_GGML_F16, "f16", 1, 2, XI_ACT_F32, NULL, 0, 0},
    {XI_GGML_Q4_0, "q4_0", 32, 18, XI_ACT_Q8_0, unpack_q4_0, 0, 1},
    {XI_GGML_Q4_1, "q4_1", 32, 20, XI_ACT_Q8_1, unpack_q4_1, 0, 2},
    {XI_GGML_Q5_0, "q5_0", 32, 22, XI_ACT_Q8_0, unpack_q5_0, 0, 1},
    {XI_GGML_Q5_1, "q5_1", 32, 24, XI_ACT_Q8_1, unpack_q5_1, 0, 2},
    {XI_GGML_Q8_0, "q8_0", 32, 34, XI_ACT_Q8_0, unpack_q8_0, 0, 1},
    {XI_GGML_Q8_1, "q8_1", 32, 36, XI_ACT_F32, NULL, 0, 0},
    {XI_GGML_Q2_K, "q2_K", 256, 84, XI_ACT_Q8_K, unpack_q2_k, 80, 2},
    {XI_GGML_Q3_K, "q3_K", 256, 110, XI_ACT_Q8_K, unpack_q3_k, 108, 1},
    {XI_GGML_Q4_K, "q4_K", 256, 144, XI_ACT_Q8_K, unpack_q4_k, 0, 2},
    {XI_GGML_Q5_K, "q5_K", 256, 176, XI_ACT_Q8_K, unpack_q5_k, 0, 2},
    {XI_GGML_Q6_K, "q6_K", 256, 210, XI_ACT_Q8_K, unpack_q6_k, 208, 1},
    {XI_GGML_Q8_K, "q8_K", 256, 292, XI_ACT_F32, NULL, 0, 0},
    /* Known to ggml, not computed here: readable and named, then refused. */
    {16, "iq2_xxs", 256, 66, XI_ACT_F32, NULL, 0, 0},
    {17, "iq2_xs", 256, 74, XI_ACT_F32, NULL, 0, 0},
    {18, "iq3_xxs", 256, 98, XI_ACT_F32, NULL, 0, 0},
    {19, "iq1_s", 256, 50, XI_ACT_F32, NULL, 0, 0},
    {XI_GGML_IQ4_NL, "iq4_nl", 32, 18, XI_ACT_Q8_0, unpack_iq4_nl, 0, 1},
    {21, "iq3_s", 256, 110, XI_ACT_F32, NULL, 0, 0},
    {22, "iq2_s", 256, 82, XI_ACT_F32, NULL, 0, 0},
    {23, "iq4_xs", 256, 136, XI_ACT_F32, NULL, 0, 0},
    {24, "i8", 1, 1, XI_ACT_F32, NULL, 0, 0},
    {25, "i16", 1, 2, XI_ACT_F32, NULL, 0, 0},
    {26, "i32", 1, 4, XI_ACT_F32, NULL, 0, 0},
    {27, "i64", 1, 8, XI_ACT_F32, NULL, 0, 0},
    {28, "f64", 1, 8, XI_ACT_F32, NULL, 0, 0},
    {29, "iq1_m", 256, 56, XI_ACT_F32, NULL, 0, 0},
    {XI_GGML_BF16, "bf16", 1, 2, XI_ACT_F32, NULL, 0, 0},
    {34, "tq1_0", 256, 54, XI_ACT_F32, NULL, 0, 0},
    {35, "tq2_0", 256, 66, XI_ACT_F32, NULL, 0, 0},
    {39, "mxfp4", 32, 17, XI_ACT_F32, NULL, 0, 0},
};

/* By id, or by name when name is not NULL. */
static const xi_qtype *find(int id, const char *name) {
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (name ? !strcasecmp(types[i].name, name) : types[i].id == id) return &types[i];
    return NULL;
}

const xi_qtype *xi_qtype_get(int id) { return find(id, NULL); }
const xi_qtype *xi_qtype_by_name(const char *name) { return name ? find(-1, name) : NULL; }

static int is_float(const xi_qtype *t) {
    return t->id == XI_GGML_F32 || t->id == XI_GGML_F16 || t->id == XI_GGML_BF16;
}

int xi_qtype_supported(const xi_qtype *t) { return t && (is_float(t) || t->unpack); }

size_t xi_qtype_row_bytes(const xi_qtype *t, int64_t n) {
    if (!t || n < 0 || n % t->block) return 0;
    return (size_t)(n / t->block) * (size_t)t->block_bytes;
}

static xi_dtype float_dtype(const xi_qtype *t) {
    return t->id == XI_GGML_F32 ? XI_F32 : t->id == XI_GGML_F16 ? XI_F16 : XI_BF16;
}

void xi_qtype_dequant_row(const xi_qtype *t, const void *row, float *y, int64_t n) {
    if (is_float(t)) {
        xi_to_f32(y, row, float_dtype(t), (size_t)n);
        return;
    }
    const uint8_t *p = row;
    xi_qblock b;
    for (int64_t i = 0; i < n / t->block; i++, p += t->block_bytes, y += t->block) {
        t->unpack(p, &b);
        for (int k = 0; k < t->block; k++) {
            int s = k / b.sub;
            y[k] = b.d * (float)b.sc[s] * (float)b.q[k] - b.dmin * (float)b.m[s];
        }
    }
}

/* ---------------------------------------------------------------- activations */

int xi_act_block(xi_act_fmt f) { return f == XI_ACT_Q8_K ? 256 : f == XI_ACT_F32 ? 1 : 32; }

int xi_act_block_bytes(xi_act_fmt f) {
    return f == XI_ACT_Q8_0 ? 34 : f == XI_ACT_Q8_1 ? 36 : f == XI_ACT_Q8_K ? 292 : 4;
}

static void put_f16(uint8_t *p, float v) {
    uint16_t h = xi_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* llama.cpp's quantize_row_q8_0 / q8_1: scale amax / 127, round half away from zero. For
 * activations (act) the values are multiplied by 127 / amax, as llama.cpp's x86 quantizers
 * do (llama256-random-q5_0 then gives llama.cpp's logits to 1e-4, 0.0099 with 1 / d); for
 * weights (llama-quantize's reference quantizer) by 1 / d. */
static void quantize_q8_32(const float *x, uint8_t *out, int with_sum, int act) {
    float amax = 0.0f;
    for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[k]));
    float d = amax / 127.0f, id = act ? (amax ? 127.0f / amax : 0.0f) : (d ? 1.0f / d : 0.0f);
    int8_t *q = (int8_t *)(out + (with_sum ? 4 : 2));
    int sum = 0;
    for (int k = 0; k < 32; k++) {
        q[k] = (int8_t)roundf(x[k] * id);
        sum += q[k];
    }
    put_f16(out, d);
    if (with_sum) put_f16(out + 2, (float)sum * d);
}

/* llama.cpp's quantize_row_q8_K: the scale maps the value of largest magnitude to -127 and
 * keeps its sign; bsums hold the sum of each 16 values. */
static void quantize_q8_k(const float *x, uint8_t *out) {
    float amax = 0.0f, max = 0.0f;
    for (int k = 0; k < 256; k++)
        if (fabsf(x[k]) > amax) amax = fabsf(x[k]), max = x[k];
    float d = 0.0f;
    int8_t *q = (int8_t *)(out + 4);
    int16_t bs[16];
    if (amax == 0.0f) {
        memset(q, 0, 256);
        memset(bs, 0, sizeof bs);
    } else {
        float iscale = -127.0f / max;
        for (int k = 0; k < 256; k++) {
            int v = (int)lrintf(iscale * x[k]);
            q[k] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int k = 0; k < 16; k++) s += q[16 * j + k];
            bs[j] = (int16_t)s;
        }
        d = 1.0f / iscale;
    }
    memcpy(out, &d, 4);
    memcpy(out + 260, bs, sizeof bs);
}

void xi_qtype_quantize_act(xi_act_fmt f, const float *x, void *out, int64_t n) {
    uint8_t *o = out;
    int bs = xi_act_block(f), bb = xi_act_block_bytes(f);
    if (f == XI_ACT_F32) {
        memcpy(out, x, (size_t)n * sizeof *x);
        return;
    }
    for (int64_t i = 0; i < n / bs; i++, x += bs, o += bb) {
        if (f == XI_ACT_Q8_K)
            quantize_q8_k(x, o);
        else
            quantize_q8_32(x, o, f == XI_ACT_Q8_1, 1);
    }
}

void xi_qtype_quantize_q8_0_weights(const float *x, void *out, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++) quantize_q8_32(x + 32 * i, (uint8_t *)out + 34 * i, 0, 0);
}

float xi_qtype_dot_ref(const xi_qtype *t, const void *wrow, const void *act, int64_t n) {
    if (is_float(t)) {
        float acc = 0.0f, w[256];
        const float *a = act;
        for (int64_t i = 0; i < n; i += 256) {
            int m = (int)(n - i < 256 ? n - i : 256);
            xi_to_f32(w, (const uint8_t *)wrow + (size_t)i * (size_t)t->block_bytes,
                      float_dtype(t), (size_t)m);
            for (int k = 0; k < m; k++) acc += w[k] * a[i + k];
        }
        return acc;
    }
    const uint8_t *p = wrow, *a = act;
    int ab = xi_act_block(t->act), abb = xi_act_block_bytes(t->act);
    int per = t->block / ab; /* activation blocks per weight block (1 for every type here) */
    float acc = 0.0f;
    xi_qblock b;
    for (int64_t i = 0; i < n / t->block; i++, p += t->block_bytes) {
        t->unpack(p, &b);
        for (int j = 0; j < per; j++, a += abb) {
            float da;
            const int8_t *aq;
            if (t->act == XI_ACT_Q8_K) {
                memcpy(&da, a, 4);
                aq = (const int8_t *)(a + 4);
            } else {
                da = f16(a);
                aq = (const int8_t *)(a + (t->act == XI_ACT_Q8_1 ? 4 : 2));
            }
            int32_t sumi = 0, mins = 0;
            for (int s = 0; s < ab / b.sub; s++) {
                int32_t qa = 0, sa = 0;
                for (int k = s * b.sub; k < (s + 1) * b.sub; k++) {
                    qa += (int32_t)b.q[j * ab + k] * aq[k];
                    sa += aq[k];
                }
                int so = (j * ab) / b.sub + s;
                sumi += b.sc[so] * qa;
                mins += b.m[so] * sa;
            }
            float minterm = t->act == XI_ACT_Q8_1 ? b.dmin * f16(a + 2) * (float)b.m[0]
                                                  : (b.dmin * da) * (float)mins;
            acc += (b.d * da) * (float)sumi - minterm;
        }
    }
    return acc;
}
