/* model/forward: one forward pass over a flat batch, running each layer as its spec says
 * (cfg.layer[l], model/arch.h).
 *
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x); q,k,v = h W^T (+ bias); [per-head rmsnorm(q), rmsnorm(k)];
 *              rope(q, k); store k,v in the paged KV cache; x += attn(q, cache) Wo^T;
 *              h = rmsnorm(x); x += down(silu(gate h) * up h)       (dense MLP)
 *                              x += sum_e w_e down_e(silu(gate_e h) * up_e h)  (MoE, moe.c)
 *   logits = rmsnorm(x[rows]) lm_head^T;  hidden = rmsnorm(x[hidden_rows]) (pooling)
 *
 * Every row is computed with the same operations in the same order whatever else is in the
 * batch: matmuls split along output columns, attention runs per (token, head) over keys in
 * block order. So a sequence gives the same bits alone or in a batch, in one chunk or many. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model_internal.h"

static int grow(float **p, size_t n) {
    float *q = realloc(*p, n * sizeof(float));
    if (!q) return -1;
    *p = q;
    return 0;
}

int xi_model_reserve(xi_model *m, int max_tokens, int max_logits, char *err, size_t errlen) {
    const xi_config *c = &m->cfg;
    if (max_tokens < 1) max_tokens = 1;
    if (max_logits < 1) max_logits = 1;
    const size_t T = (size_t)max_tokens, L = (size_t)max_logits;
    const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t h = (size_t)c->hidden_size, wide = h > qd ? h : qd;
    if (max_tokens > m->cap_tokens) {
        if (grow(&m->x, T * h) || grow(&m->xn, T * wide) || grow(&m->q, T * qd) ||
            grow(&m->k, T * kvd) || grow(&m->v, T * kvd) || grow(&m->att, T * qd) ||
            grow(&m->gate, T * (size_t)c->intermediate_size) ||
            grow(&m->up, T * (size_t)c->intermediate_size) || xi_moe_reserve(m, max_tokens) ||
            grow(&m->cs, T * (size_t)c->head_dim))
            return xi_errf(err, errlen, "out of memory for %d-token scratch", max_tokens);
        int64_t *cost = realloc(m->attn_cost, (T + 1) * sizeof(int64_t));
        if (!cost)
            return xi_errf(err, errlen, "out of memory for %d-token scratch", max_tokens);
        m->attn_cost = cost;
        m->cap_tokens = max_tokens;
    }
    if (max_logits > m->cap_logits) {
        if (grow(&m->hlast, L * h) || xi_tp_reserve(m, max_logits))
            return xi_errf(err, errlen, "out of memory for %d logits rows", max_logits);
        m->cap_logits = max_logits;
    }
    return 0;
}

/* ---- per-token elementwise stages, split across threads by token ---- */

typedef struct {
    xi_model *m;
    const xi_batch *b;
    xi_kv_view view;   /* the current layer's KV cache */
    const xi_layer *layer;
    int n_rows;
    const float *norm_w;
    float *src, *dst;
    int64_t width;
} stage;

static void norm_task(void *ctx, int ith, int nth) {
    stage *s = ctx;
    const xi_model *m = s->m;
    long b, e;
    xi_split_range(s->n_rows, ith, nth, 1, &b, &e);
    for (long i = b; i < e; i++)
        m->ops->rmsnorm(s->dst + i * s->width, s->src + i * s->width, s->norm_w, s->width,
                        m->cfg.rms_norm_eps);
}

/* A stage split by rows: with one row (a decode step of one sequence) only the calling
 * thread would have work, so it runs there without waking the pool. The split never changes
 * a row's result, so this gives the same bits. */
static void run_rows(xi_model *m, xi_pool_fn fn, stage *s, int rows) {
    if (rows < 2) fn(s, 0, 1);
    else xi_pool_run(m->pool, fn, s);
}

static void run_norm(xi_model *m, float *dst, const float *src, const float *w, int rows) {
    stage s = {.m = m, .n_rows = rows, .norm_w = w, .src = (float *)src, .dst = dst,
               .width = m->cfg.hidden_size};
    run_rows(m, norm_task, &s, rows);
}

/* Each head's own RMSNorm over its head_dim values, one weight vector for all heads. */
static void head_norm(const xi_model *m, float *x, int n_heads, const float *w) {
    const int hd = m->cfg.head_dim;
    for (int hh = 0; hh < n_heads; hh++)
        m->ops->rmsnorm(x + (int64_t)hh * hd, x + (int64_t)hh * hd, w, hd, m->cfg.rms_norm_eps);
}

/* q/k norm where the layer has it, RoPE on q and k, then store k and v in the cache. */
static void qkv_post_task(void *ctx, int ith, int nth) {
    stage *s = ctx;
    const xi_model *m = s->m;
    const xi_config *c = &m->cfg;
    const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    long b, e;
    xi_split_range(s->b->n_tokens, ith, nth, 1, &b, &e);
    for (long i = b; i < e; i++) {
        const float *cs = m->cs + i * c->head_dim;
        if (s->layer->q_norm) {
            head_norm(m, m->q + i * qd, c->n_heads, s->layer->q_norm);
            head_norm(m, m->k + i * kvd, c->n_kv_heads, s->layer->k_norm);
        }
        xi_rope_neox(m->q + i * qd, c->n_heads, c->head_dim, cs);
        xi_rope_neox(m->k + i * kvd, c->n_kv_heads, c->head_dim, cs);
        xi_kv_write(&s->view, s->b->slots[i], m->k + i * kvd, m->v + i * kvd);
    }
}

/* First token whose cumulative cost reaches target (cost[] is a prefix sum, cost[0] = 0). */
static long cost_bound(const int64_t *cost, long n, int64_t target) {
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (cost[mid] < target) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Attention work items are (token, head) pairs; each thread takes a contiguous range. A
 * token's cost is the number of keys it reads, which varies a lot across a mixed batch
 * (a long prefill next to short decodes), so when there are enough tokens the split
 * balances keys read, not items. With few tokens (decode of one sequence) the heads of a
 * token are split instead. Either way each item is computed by exactly the same code, so
 * the split never changes a result. */
static void attn_task(void *ctx, int ith, int nth) {
    stage *s = ctx;
    const xi_model *m = s->m;
    const xi_config *c = &m->cfg;
    const xi_batch *bt = s->b;
    const int nh = c->n_heads;
    const int64_t qd = (int64_t)nh * c->head_dim;
    const float scale = 1.0f / sqrtf((float)c->head_dim);
    float *scratch = m->attn_scratch + (size_t)ith * (size_t)m->cap_scratch;
    long b, e;
    if (bt->n_tokens >= 4 * nth) {
        const int64_t total = m->attn_cost[bt->n_tokens];
        const long tb = cost_bound(m->attn_cost, bt->n_tokens, total * ith / nth);
        const long te = ith == nth - 1 ? bt->n_tokens
                                       : cost_bound(m->attn_cost, bt->n_tokens, total * (ith + 1) / nth);
        b = tb * nh;
        e = te * nh;
    } else {
        xi_split_range((long)bt->n_tokens * nh, ith, nth, 1, &b, &e);
    }
    int seq = 0;
    long item = b;
    while (item < e) {
        const long tok = item / nh;
        const int h0 = (int)(item % nh);
        const long end_tok = (tok + 1) * nh;
        const int h1 = (int)((e < end_tok ? e : end_tok) - tok * nh);
        while (seq + 1 < bt->n_seqs && bt->seqs[seq + 1].q_start <= tok) seq++;
        while (seq > 0 && bt->seqs[seq].q_start > tok) seq--;
        const xi_batch_seq *sq = &bt->seqs[seq];
        m->ops->attn(m->att + tok * qd, m->q + tok * qd, &s->view, sq->block_table,
                     bt->positions[tok] + 1, nh, h0, h1, scale, scratch);
        item = tok * nh + h1;
    }
}

static int check_batch(const xi_model *m, const xi_kv_store *kv, const xi_batch *b, char *err,
                       size_t errlen) {
    const int bs = xi_kv_store_block_size(kv);
    const int64_t n_slots = (int64_t)xi_kv_store_blocks(kv) * bs;
    int32_t row = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const xi_batch_seq *sq = &b->seqs[s];
        if (sq->q_start != row || sq->q_len < 1)
            return xi_errf(err, errlen, "batch: sequence %d rows out of order", s);
        for (int i = 0; i < sq->q_len; i++) {
            const int32_t t = row + i, pos = b->positions[t];
            if (pos < 0 || pos >= m->cfg.max_position_embeddings * 64)
                return xi_errf(err, errlen, "batch: position %d out of range", pos);
            if (pos / bs >= sq->n_blocks)
                return xi_errf(err, errlen, "batch: position %d beyond the block table", pos);
            if (b->slots[t] < 0 || b->slots[t] >= n_slots)
                return xi_errf(err, errlen, "batch: slot %lld out of range", (long long)b->slots[t]);
            if (b->tokens[t] < 0 || b->tokens[t] >= m->cfg.vocab_size)
                return xi_errf(err, errlen, "token id %d out of range [0, %d)", b->tokens[t],
                               m->cfg.vocab_size);
        }
        for (int i = 0; i < sq->n_blocks; i++)
            if (sq->block_table[i] < 0 || sq->block_table[i] >= xi_kv_store_blocks(kv))
                return xi_errf(err, errlen, "batch: block id %d out of range", sq->block_table[i]);
        row += sq->q_len;
    }
    if (row != b->n_tokens) return xi_errf(err, errlen, "batch: sequences cover %d of %d rows", row, b->n_tokens);
    for (int i = 0; i < b->n_logits; i++)
        if (b->logits_rows[i] < 0 || b->logits_rows[i] >= b->n_tokens)
            return xi_errf(err, errlen, "batch: logits row %d out of range", b->logits_rows[i]);
    for (int i = 0; i < b->n_hidden; i++)
        if (b->hidden_rows[i] < 0 || b->hidden_rows[i] >= b->n_tokens)
            return xi_errf(err, errlen, "batch: hidden row %d out of range", b->hidden_rows[i]);
    return 0;
}

/* Tensor parallel: the partial sums of o_proj or down (in xn) summed over the ranks, then
 * added to the residual stream, which every rank thus keeps identical. */
static int reduce_add(xi_model *m, int T, char *err, size_t errlen) {
    const int64_t n = (int64_t)T * m->cfg.hidden_size;
    if (xi_tp_allreduce(m, m->xn, n, err, errlen)) return -1;
    for (int64_t i = 0; i < n; i++) m->x[i] += m->xn[i];
    return 0;
}

int xi_model_forward(xi_model *m, xi_kv_store *kv, const xi_batch *b, float *logits, char *err,
                     size_t errlen) {
    if (b->n_tokens <= 0) return 0;
    if (m->comm) {
        if (m->comm->rank != 0)
            return xi_errf(err, errlen, "tensor parallel: rank %d runs xi_model_serve_rank, not forward",
                           m->comm->rank);
        if (m->tp_failed) return xi_errf(err, errlen, "tensor parallel: the ranks are gone");
        if (check_batch(m, kv, b, err, errlen) || xi_tp_send_batch(m, kv, b, err, errlen)) return -1;
    }
    return xi_model_forward_rank(m, kv, b, logits, err, errlen);
}

int xi_model_forward_rank(xi_model *m, xi_kv_store *kv, const xi_batch *b, float *logits,
                          char *err, size_t errlen) {
    const xi_config *c = &m->cfg;
    if (b->n_tokens <= 0) return 0;
    if (check_batch(m, kv, b, err, errlen)) return -1;
    if (xi_model_reserve(m, b->n_tokens, b->n_logits, err, errlen)) return -1;
    const int bs = xi_kv_store_block_size(kv);
    const size_t per_thread = XI_ATTN_SCRATCH(bs, c->head_dim);
    if (per_thread > (size_t)m->cap_scratch) {
        const size_t n = per_thread * (size_t)xi_pool_size(m->pool);
        if (grow(&m->attn_scratch, n)) return xi_errf(err, errlen, "out of memory");
        m->cap_scratch = (int)per_thread;
    }
    const int T = b->n_tokens, hd = c->head_dim, half = hd / 2;
    const int64_t h = c->hidden_size;

    m->attn_cost[0] = 0;
    for (int i = 0; i < T; i++) {
        m->attn_cost[i + 1] = m->attn_cost[i] + b->positions[i] + 1;
        xi_weight_row(&m->embed, b->tokens[i], m->x + i * h);
        float *cs = m->cs + (int64_t)i * hd;
        for (int j = 0; j < half; j++) {
            const double a = (double)b->positions[i] * m->inv_freq[j];
            cs[j] = (float)(cos(a) * m->rope_mscale);
            cs[half + j] = (float)(sin(a) * m->rope_mscale);
        }
    }

    stage s = {.m = m, .b = b, .n_rows = T};
    for (int l = 0; l < c->n_layers; l++) {
        const xi_layer *L = &m->layers[l];
        const xi_layer_spec *sp = &c->layer[l];
        s.view = xi_kv_store_view(kv, l); /* XI_ATTN_FULL over XI_CACHE_KV, the only kinds */
        s.layer = L;
        run_norm(m, m->xn, m->x, L->attn_norm, T);
        const xi_linear qkv[3] = {{m->q, &L->wq, L->bq}, {m->k, &L->wk, L->bk},
                                  {m->v, &L->wv, L->bv}};
        xi_matmul_n(m->pool, m->ops, m->xn, T, qkv, 3);
        run_rows(m, qkv_post_task, &s, T);
        xi_pool_run(m->pool, attn_task, &s);
        if (!m->comm) {
            xi_matmul_add(m->pool, m->ops, m->x, m->xn, m->att, T, &L->wo);
        } else {
            xi_matmul(m->pool, m->ops, m->xn, m->att, T, &L->wo, NULL);
            if (reduce_add(m, T, err, errlen)) return -1;
        }
        run_norm(m, m->xn, m->x, L->ffn_norm, T);
        switch (sp->mlp) {
        case XI_MLP_DENSE:
            xi_matmul_silu(m->pool, m->ops, m->gate, m->up, m->xn, T, &L->wgate, &L->wup);
            if (!m->comm) xi_matmul_add(m->pool, m->ops, m->x, m->xn, m->gate, T, &L->wdown);
            else xi_matmul(m->pool, m->ops, m->xn, m->gate, T, &L->wdown, NULL);
            break;
        case XI_MLP_MOE:
            if (xi_moe_forward(m, l, T, m->comm ? m->xn : NULL, err, errlen)) return -1;
            break;
        }
        if (m->comm && reduce_add(m, T, err, errlen)) return -1;
    }
    if (b->n_logits > 0) {
        for (int i = 0; i < b->n_logits; i++)
            memcpy(m->hlast + (int64_t)i * h, m->x + (int64_t)b->logits_rows[i] * h,
                   (size_t)h * sizeof(float));
        run_norm(m, m->hlast, m->hlast, m->final_norm, b->n_logits);
        if (!m->comm) {
            xi_matmul(m->pool, m->ops, logits, m->hlast, b->n_logits, &m->lm_head, NULL);
        } else {
            xi_matmul(m->pool, m->ops, m->tp_logits, m->hlast, b->n_logits, &m->lm_head, NULL);
            if (xi_tp_logits(m, b->n_logits, logits, err, errlen)) return -1;
        }
    }
    for (int i = 0; i < b->n_hidden; i++)
        memcpy(b->hidden + (int64_t)i * h, m->x + (int64_t)b->hidden_rows[i] * h,
               (size_t)h * sizeof(float));
    if (b->n_hidden > 0) run_norm(m, b->hidden, b->hidden, m->final_norm, b->n_hidden);
    return 0;
}
