/* kernels: helpers shared by every variant: threaded matmul, KV writes, RoPE, weight rows. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/wformat.h"

typedef struct {
    void *p[XI_SCRATCH_SLOTS];
    size_t cap[XI_SCRATCH_SLOTS];
} scratch_bufs;
static __thread scratch_bufs *scratch_tls;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v) {
    scratch_bufs *s = v;
    for (int i = 0; i < XI_SCRATCH_SLOTS; i++) free(s->p[i]);
    free(s);
}
static void scratch_key_init(void) { pthread_key_create(&scratch_key, scratch_free); }

void *xi_kernel_scratch(int slot, size_t bytes) {
    scratch_bufs *s = scratch_tls;
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return NULL;
        pthread_once(&scratch_once, scratch_key_init);
        pthread_setspecific(scratch_key, s);
        scratch_tls = s;
    }
    if (bytes <= s->cap[slot]) return s->p[slot];
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (!p) return NULL;
    free(s->p[slot]);
    s->p[slot] = p;
    s->cap[slot] = bytes;
    return p;
}

/* The activation rows of one job on one thread, quantized once for every linear whose format
 * needs it: x for the XI_WACT_QX formats' dot products (qx), for the ggml types (ga, in
 * format ga_fmt) and rounded to bf16 for BF16 weights (xb). */
typedef struct act_cache {
    const xi_qx *qx;
    const void *ga;
    int ga_fmt;
    size_t ga_stride;
    const uint16_t *xb; /* the rows rounded to bf16 (XI_WACT_BF16), xi_bf16_row_len apart */
} act_cache;

typedef struct {
    const xi_ops *ops;
    const float *x;
    int64_t rows;
    const xi_linear *l;
    int n;
    int epilogue;
    float *residual;
    const act_cache *shared; /* rows quantized for every thread beforehand, or NULL */
} matmul_job;

enum { EPI_NONE, EPI_SILU, EPI_ADD };

/* Columns [b, e) of y = x w^T through the precision's path: int8 tables quantize x (once per
 * cache) into the activation format of w's integer dot product (its wformat row); out of
 * memory for the quantized rows (a few KB per row), the fp32 path still gives an answer, of
 * the exact precision. */
/* Whether w takes bf16 inputs in ops: a bf16-input format, a table with the dot product, and
 * the layout its matmul_bf16 reads (the table's weight block; a row-major mmap weight keeps
 * fp32 inputs, so its rows are never rounded for nothing). */
static int bf16_inputs(const xi_ops *ops, const xi_wformat *f, const xi_weight *w) {
    return f->act == XI_WACT_BF16 && ops->matmul_bf16 && w->block == ops->weight_block;
}

static void matmul_cols(const xi_ops *ops, act_cache *c, float *y, int64_t ldy, const float *x,
                        int64_t ldx, int64_t rows, const xi_weight *w, int64_t b, int64_t e) {
    const xi_wformat *f = xi_wformat_of(w);
    if (bf16_inputs(ops, f, w)) {
        if (!c->xb) c->xb = xi_bf16_rows(ops, x, ldx, rows, w->n_in);
        if (c->xb && !ops->matmul_bf16(y, ldy, c->xb, xi_bf16_row_len(w->n_in), rows, w, b, e)) return;
    }
    if (f->act == XI_WACT_GGML && ops->matmul_gq) {
        if (!c->ga || c->ga_fmt != (int)f->ggml_act) {
            c->ga = xi_gq_quantize(ops, w, x, ldx, rows, &c->ga_stride);
            c->ga_fmt = (int)f->ggml_act;
        }
        if (c->ga) {
            ops->matmul_gq(y, ldy, c->ga, c->ga_stride, rows, w, b, e);
            return;
        }
    }
    const int bs = ops->matmul_q ? xi_qdot_block(w) : 0;
    if (bs && (!c->qx || c->qx->bs != bs)) c->qx = xi_qx_quantize(ops, x, ldx, rows, w->n_in, bs);
    if (bs && c->qx)
        ops->matmul_q(y, ldy, c->qx, rows, w, b, e);
    else
        ops->matmul(y, ldy, x, ldx, rows, w, b, e);
}

static void add_bias(const xi_linear *l, int64_t ldy, int64_t rows, int64_t b, int64_t e) {
    if (l->bias)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = b; c < e; c++) l->y[r * ldy + c] += l->bias[c];
}

/* Each linear's columns are split in multiples of 16 so every thread's tile edges stay
 * aligned; the split never touches the reduction over n_in, so any thread count gives the
 * same bits. The epilogue runs on the columns this thread just wrote, so it needs no second
 * pass over the pool; it is elementwise, and each element is computed by the same code
 * wherever the split puts it. */
static void matmul_task(void *ctx, int ith, int nth) {
    const matmul_job *j = ctx;
    long b, e;
    act_cache c = j->shared ? *j->shared : (act_cache){.ga_fmt = -1};
    for (int i = 0; i < j->n; i++) {
        const xi_linear *l = &j->l[i];
        const int64_t n_out = l->w->n_out;
        xi_split_range((long)n_out, ith, nth, 16, &b, &e);
        if (b >= e) continue;
        matmul_cols(j->ops, &c, l->y, n_out, j->x, l->w->n_in, j->rows, l->w, b, e);
        add_bias(l, n_out, j->rows, b, e);
    }
    if (j->epilogue == EPI_NONE) return;
    const int64_t n_out = j->l[0].w->n_out;
    xi_split_range((long)n_out, ith, nth, 16, &b, &e);
    for (int64_t r = 0; r < j->rows; r++) {
        float *y = j->l[0].y + r * n_out + b;
        if (j->epilogue == EPI_SILU)
            j->ops->silu_mul(y, y, j->l[1].y + r * n_out + b, e - b);
        else
            for (long c = 0; c < e - b; c++) j->residual[r * n_out + b + c] += y[c];
    }
}

/* ---- quantizing a job's rows once for all its threads ----
 * Each thread of a matmul job needs every row of x quantized, and quantizing them on every
 * thread costs each one the whole quantization however many threads share the columns: ~1%
 * of a 2-thread Q4_0 prefill (qwen2.5-0.5b shape, perf), so ~30% once 64 threads share the
 * kernel's work (arithmetic, not measured: no such machine here). From SHARED_ROWS rows on, a first pool
 * run quantizes the rows for the first linear's format, split across the threads by rows, into
 * the calling thread's scratch (slots 7..9), and the matmul threads start from it. A row's
 * bytes are the same whichever thread quantizes it, so the bits do not change. */
enum { SHARED_ROWS = 16 }; /* fewer: a second pool run costs more than it saves */

typedef struct {
    const xi_ops *ops;
    const float *x;
    int64_t rows;
    const xi_weight *w; /* XI_WACT_GGML formats: quantize into ga; XI_WACT_BF16 into xb;
                           otherwise into qx */
    void *ga;
    const xi_qx *qx;
    uint16_t *xb;
} quant_job;

static void quant_task(void *ctx, int ith, int nth) {
    const quant_job *q = ctx;
    long b, e;
    xi_split_range((long)q->rows, ith, nth, 1, &b, &e);
    if (b >= e) return;
    if (q->ga) xi_gq_quantize_rows(q->ops, q->w, q->x, q->w->n_in, b, e, q->ga);
    else if (q->xb) xi_bf16_rows_into(q->ops, q->x, q->w->n_in, b, e, q->w->n_in, q->xb);
    else xi_qx_quantize_rows(q->ops, q->x, q->w->n_in, b, e, q->qx);
}

static void run_job(xi_pool *pool, matmul_job *j) {
    const xi_ops *ops = j->ops;
    const xi_weight *w = j->l[0].w;
    act_cache shared = {.ga_fmt = -1};
    xi_qx qx;
    quant_job q = {ops, j->x, j->rows, w, NULL, NULL, NULL};
    if (j->rows >= SHARED_ROWS && xi_pool_size(pool) > 1) {
        const xi_wformat *f = xi_wformat_of(w);
        const int bs = ops->matmul_q ? xi_qdot_block(w) : 0; /* 0 unless f->act is XI_WACT_QX */
        if (bf16_inputs(ops, f, w)) {
            if ((q.xb = xi_kernel_scratch(7, (size_t)(j->rows * xi_bf16_row_len(w->n_in)) * 2)))
                shared.xb = q.xb;
        } else if (f->act == XI_WACT_GGML && ops->matmul_gq) {
            const size_t rb = xi_gq_act_row_bytes(w);
            if ((q.ga = xi_kernel_scratch(7, (size_t)j->rows * rb + 64)))
                shared = (act_cache){.ga = q.ga, .ga_fmt = (int)f->ggml_act, .ga_stride = rb};
        } else if (bs && !xi_qx_alloc(&qx, 7, j->rows, w->n_in, bs)) {
            q.qx = shared.qx = &qx;
        }
    }
    if (q.ga || q.qx || q.xb) {
        xi_pool_run(pool, quant_task, &q);
        j->shared = &shared;
    }
    xi_pool_run(pool, matmul_task, j);
}

void xi_matmul(xi_pool *pool, const xi_ops *ops, float *y, const float *x, int64_t rows,
               const xi_weight *w, const float *bias) {
    const xi_linear l = {y, w, bias};
    matmul_job j = {ops, x, rows, &l, 1, EPI_NONE, NULL, NULL};
    run_job(pool, &j);
}

void xi_matmul_n(xi_pool *pool, const xi_ops *ops, const float *x, int64_t rows,
                 const xi_linear *l, int n) {
    matmul_job j = {ops, x, rows, l, n, EPI_NONE, NULL, NULL};
    run_job(pool, &j);
}

void xi_matmul_silu(xi_pool *pool, const xi_ops *ops, float *gate, float *up, const float *x,
                    int64_t rows, const xi_weight *wgate, const xi_weight *wup) {
    const xi_linear l[2] = {{gate, wgate, NULL}, {up, wup, NULL}};
    matmul_job j = {ops, x, rows, l, 2, EPI_SILU, NULL, NULL};
    run_job(pool, &j);
}

void xi_matmul_add(xi_pool *pool, const xi_ops *ops, float *residual, float *y, const float *x,
                   int64_t rows, const xi_weight *w) {
    const xi_linear l = {y, w, NULL};
    matmul_job j = {ops, x, rows, &l, 1, EPI_ADD, residual, NULL};
    run_job(pool, &j);
}

void xi_matmul_part_n(const xi_ops *ops, const float *x, int64_t ldx, int64_t rows,
                      const xi_linear *l, int n, int64_t ldy, int64_t n0, int64_t n1) {
    act_cache c = {.ga_fmt = -1};
    for (int i = 0; i < n; i++) {
        matmul_cols(ops, &c, l[i].y, ldy, x, ldx, rows, l[i].w, n0, n1);
        add_bias(&l[i], ldy, rows, n0, n1);
    }
}

void xi_matmul_part(const xi_ops *ops, float *y, int64_t ldy, const float *x, int64_t ldx,
                    int64_t rows, const xi_weight *w, int64_t n0, int64_t n1) {
    const xi_linear l = {y, w, NULL};
    xi_matmul_part_n(ops, x, ldx, rows, &l, 1, ldy, n0, n1);
}

int xi_weight_block_for(const xi_ops *ops, const xi_weight *w) {
    return xi_wformat_of(w)->block_for(ops, w);
}

void xi_weight_row(const xi_weight *w, int64_t row, float *out) { xi_wformat_of(w)->dequant(w, row, 0, w->n_in, out); }

void xi_kv_write(const xi_kv_view *kv, int64_t slot, const float *k, const float *v) {
    const int64_t b = slot / kv->block_size, t = slot % kv->block_size;
    const size_t es = xi_dtype_size(kv->dtype);
    for (int h = 0; h < kv->n_kv_heads; h++) {
        const int64_t off = b * kv->block_stride + h * kv->head_stride + t * kv->head_dim;
        xi_from_f32((char *)kv->k + off * (int64_t)es, kv->dtype, k + (int64_t)h * kv->head_dim,
                    (size_t)kv->head_dim);
        xi_from_f32((char *)kv->v + off * (int64_t)es, kv->dtype, v + (int64_t)h * kv->head_dim,
                    (size_t)kv->head_dim);
    }
}

void xi_rope_neox(float *x, int n_heads, int head_dim, const float *cs) {
    const int half = head_dim / 2;
    const float *c = cs, *s = cs + half;
    for (int h = 0; h < n_heads; h++) {
        float *p = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const float a = p[i], b = p[i + half];
            p[i] = a * c[i] - b * s[i];
            p[i + half] = b * c[i] + a * s[i];
        }
    }
}
