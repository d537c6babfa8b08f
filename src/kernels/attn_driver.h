/* kernels: the ISA-independent paged-attention loop (online softmax per key block, blocks in
 * table order), included by the variants after they define, for a KV element type t:
 *   float dot_t(const float *q, xi_dtype t, const void *k, int64_t off, int n)
 *   void axpy_t(float *o, float p, xi_dtype t, const void *v, int64_t off, int n)  o += p v
 *   void scale_vec(float *o, float c, int n)                                       o *= c
 *   float exp1(float x)                                                            e^x
 * It defines `static void attn_driver(...)` with the xi_ops.attn signature. */
#include <math.h>

XI_INLINE void attn_t(xi_dtype t, float *out, const float *q, const xi_kv_view *kv,
                      const int32_t *block_table, int n_ctx, int n_heads, int h0, int h1,
                      float scale, float *scratch) {
    const int hd = kv->head_dim, bs = kv->block_size;
    const int group = n_heads / kv->n_kv_heads;
    for (int h = h0; h < h1; h++) {
        const float *qh = q + (int64_t)h * hd;
        float *o = out + (int64_t)h * hd; /* [hd], the running unnormalised output */
        const int64_t kvh = h / group;
        float m = -INFINITY, l = 0.0f;
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int start = 0; start < n_ctx; start += bs) {
            const int64_t base =
                (int64_t)block_table[start / bs] * kv->block_stride + kvh * kv->head_stride;
            const int nt = n_ctx - start < bs ? n_ctx - start : bs;
            float mb = -INFINITY;
            for (int tk = 0; tk < nt; tk++) {
                scratch[tk] = dot_t(qh, t, kv->k, base + (int64_t)tk * hd, hd) * scale;
                if (scratch[tk] > mb) mb = scratch[tk];
            }
            const float mn = mb > m ? mb : m;
            const float corr = exp1(m - mn); /* (about) 0 on the first block: m = -inf; l, o are 0 */
            l *= corr;
            scale_vec(o, corr, hd);
            for (int tk = 0; tk < nt; tk++) {
                const float p = exp1(scratch[tk] - mn);
                l += p;
                axpy_t(o, p, t, kv->v, base + (int64_t)tk * hd, hd);
            }
            m = mn;
        }
        scale_vec(o, 1.0f / l, hd);
    }
}

static void attn_driver(float *out, const float *q, const xi_kv_view *kv,
                        const int32_t *block_table, int n_ctx, int n_heads, int h0, int h1,
                        float scale, float *scratch) {
    switch (kv->dtype) {
    case XI_F16: attn_t(XI_F16, out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch); break;
    case XI_BF16: attn_t(XI_BF16, out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch); break;
    default: attn_t(XI_F32, out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch); break;
    }
}
