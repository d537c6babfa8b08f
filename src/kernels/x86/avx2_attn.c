/* kernels/x86/avx2_attn: paged attention with AVX2 + FMA + F16C for head dims that are a
 * multiple of 8 (64 and 128 in every supported model); other head dims take the per-key loop
 * of kernels/attn_driver.h (xi_avx2_attn_keys).
 *
 * It computes exactly what that loop computes, operation for operation, so the two give the
 * same bits (tests/test_kernels.c checks it); only the order of independent work changes:
 *   - blocks outer, query heads inner: the heads that share a KV head read a block while it
 *     is in L1, a 16-bit block widened to f32 once for all of them;
 *   - four keys' dot products run side by side (four FMA chains instead of one, whose
 *     latency bounded the loop) and are summed by avx2_hsum4, the same per-vector order as
 *     the one-key avx2_hsum;
 *   - a block's probabilities are computed first, 8 exponentials at a time (avx2_exp, whose
 *     one-lane form the per-key loop uses), then each 64-wide slice of the output is
 *     loaded once per block, scaled by the block's correction, accumulated over the block's
 *     keys in registers and stored once, instead of being loaded and stored for every key.
 * Long cached contexts make attention a real share of a prefill (every new token reads every
 * cached key), which is where this matters. */
#include <math.h>

#include "kernels/x86/avx2_common.h"

/* scratch[tk] = (q . k_tk) * scale for the nt keys of one block starting at element base. */
XI_INLINE void block_scores(xi_dtype t, float *scratch, const float *qh, const void *k, int64_t base,
                            int nt, int hd, float scale) {
    const __m128 sc = _mm_set1_ps(scale);
    int tk = 0;
    for (; tk + 4 <= nt; tk += 4) {
        const int64_t k0 = base + (int64_t)tk * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; d += 8) {
            const __m256 qv = _mm256_loadu_ps(qh + d);
            a0 = _mm256_fmadd_ps(qv, avx2_load8(t, k, k0 + d), a0);
            a1 = _mm256_fmadd_ps(qv, avx2_load8(t, k, k0 + hd + d), a1);
            a2 = _mm256_fmadd_ps(qv, avx2_load8(t, k, k0 + 2 * hd + d), a2);
            a3 = _mm256_fmadd_ps(qv, avx2_load8(t, k, k0 + 3 * hd + d), a3);
        }
        _mm_storeu_ps(scratch + tk, _mm_mul_ps(avx2_hsum4(a0, a1, a2, a3), sc));
    }
    for (; tk < nt; tk++) {
        const int64_t k0 = base + (int64_t)tk * hd;
        __m256 a = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), avx2_load8(t, k, k0 + d), a);
        scratch[tk] = avx2_hsum(a) * scale;
    }
}

/* o[0, 8 nv) = o * corr + sum_tk p[tk] v_tk[0, 8 nv), keys in order, o held in registers.
 * nv is a constant at every call, so r[] stays in registers. */
XI_INLINE void block_pv(xi_dtype t, float *o, float corr, const float *p, const void *v, int64_t base,
                        int nt, int hd, int nv) {
    __m256 r[8];
    const __m256 cv = _mm256_set1_ps(corr);
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) r[j] = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * j), cv);
    for (int tk = 0; tk < nt; tk++) {
        const __m256 pv = _mm256_set1_ps(p[tk]);
        const int64_t off = base + (int64_t)tk * hd;
#pragma GCC unroll 8
        for (int j = 0; j < nv; j++) r[j] = _mm256_fmadd_ps(pv, avx2_load8(t, v, off + 8 * j), r[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < nv; j++) _mm256_storeu_ps(o + 8 * j, r[j]);
}

/* o = o * corr + sum_tk p[tk] v_tk over the whole head, in 64-wide slices. */
XI_INLINE void head_pv(xi_dtype t, float *o, float corr, const float *p, const void *v, int64_t base,
                       int nt, int hd) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) block_pv(t, o + d, corr, p, v, base + d, nt, hd, 8);
    switch ((hd - d) / 8) {
    case 1: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 1); break;
    case 2: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 2); break;
    case 3: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 3); break;
    case 4: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 4); break;
    case 5: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 5); break;
    case 6: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 6); break;
    case 7: block_pv(t, o + d, corr, p, v, base + d, nt, hd, 7); break;
    default: break;
    }
}

/* One block of keys for one head: the per-key loop's online-softmax step, in its order. */
XI_INLINE void head_block(xi_dtype t, float *o, float *m, float *l, const float *qh, const void *k,
                          const void *v, int64_t base, int nt, int hd, float scale, float *scratch) {
    block_scores(t, scratch, qh, k, base, nt, hd, scale);
    float mb = -INFINITY;
    for (int tk = 0; tk < nt; tk++)
        if (scratch[tk] > mb) mb = scratch[tk];
    const float mn = mb > *m ? mb : *m;
    const float corr = avx2_exp1(*m - mn); /* ~0 on the first block (m = -inf), where l, o are 0 */
    float sum = *l * corr;
    const __m256 mv = _mm256_set1_ps(mn);
    int tk = 0;
    for (; tk + 8 <= nt; tk += 8)
        _mm256_storeu_ps(scratch + tk, avx2_exp(_mm256_sub_ps(_mm256_loadu_ps(scratch + tk), mv)));
    for (; tk < nt; tk++) scratch[tk] = avx2_exp1(scratch[tk] - mn);
    head_pv(t, o, corr, scratch, v, base, nt, hd);
    /* The sum is a serial chain of adds (the per-key loop's order); after the FMAs of head_pv
     * in program order, the core overlaps it with them. */
    for (tk = 0; tk < nt; tk++) sum += scratch[tk];
    *l = sum;
    *m = mn;
}

enum { RUN = 16 }; /* query heads of one KV head computed together */

/* Blocks outer, heads inner: the query heads that share a KV head (GQA) read each block of
 * keys and values while it is in L1, and a 16-bit cache is widened to f32 once per block
 * for all of them (exact, so the scores are the same bits). Each head still sees its blocks
 * in table order with the same operations. */
XI_INLINE void attn_fast_t(xi_dtype t, float *out, const float *q, const xi_kv_view *kv,
                           const int32_t *block_table, int n_ctx, int n_heads, int h0, int h1,
                           float scale, float *scratch) {
    const int hd = kv->head_dim, bs = kv->block_size;
    const int group = n_heads / kv->n_kv_heads;
    float *kf = scratch + bs;            /* [bs, hd] a block's keys as f32 */
    float *vf = kf + (int64_t)bs * hd;   /* [bs, hd] its values */
    for (int hs = h0; hs < h1;) {
        const int64_t kvh = hs / group;
        int he = (int)(kvh + 1) * group < h1 ? (int)(kvh + 1) * group : h1;
        if (he - hs > RUN) he = hs + RUN;
        float m[RUN], l[RUN];
        for (int h = hs; h < he; h++) {
            m[h - hs] = -INFINITY;
            l[h - hs] = 0.0f;
            memset(out + (int64_t)h * hd, 0, (size_t)hd * sizeof *out);
        }
        for (int start = 0; start < n_ctx; start += bs) {
            const int64_t base =
                (int64_t)block_table[start / bs] * kv->block_stride + kvh * kv->head_stride;
            const int nt = n_ctx - start < bs ? n_ctx - start : bs;
            if (t != XI_F32 && he - hs > 1) {
                for (int64_t i = 0; i < (int64_t)nt * hd; i += 8) {
                    _mm256_storeu_ps(kf + i, avx2_load8(t, kv->k, base + i));
                    _mm256_storeu_ps(vf + i, avx2_load8(t, kv->v, base + i));
                }
                for (int h = hs; h < he; h++)
                    head_block(XI_F32, out + (int64_t)h * hd, &m[h - hs], &l[h - hs],
                               q + (int64_t)h * hd, kf, vf, 0, nt, hd, scale, scratch);
            } else {
                for (int h = hs; h < he; h++)
                    head_block(t, out + (int64_t)h * hd, &m[h - hs], &l[h - hs], q + (int64_t)h * hd,
                               kv->k, kv->v, base, nt, hd, scale, scratch);
            }
        }
        for (int h = hs; h < he; h++) {
            float *o = out + (int64_t)h * hd;
            const __m256 inv = _mm256_set1_ps(1.0f / l[h - hs]);
            for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), inv));
        }
        hs = he;
    }
}

void xi_avx2_attn(float *out, const float *q, const xi_kv_view *kv, const int32_t *block_table,
                  int n_ctx, int n_heads, int h0, int h1, float scale, float *scratch) {
    if (kv->head_dim % 8) {
        xi_avx2_attn_keys(out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch);
        return;
    }
    switch (kv->dtype) {
    case XI_F16: attn_fast_t(XI_F16, out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch); break;
    case XI_BF16: attn_fast_t(XI_BF16, out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch); break;
    default: attn_fast_t(XI_F32, out, q, kv, block_table, n_ctx, n_heads, h0, h1, scale, scratch); break;
    }
}
