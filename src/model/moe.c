/* model/moe: a mixture-of-experts MLP (XI_MLP_MOE, routing XI_ROUTE_SOFTMAX_TOPK).
 *
 *   p = softmax(h Wr^T) over all experts, fp32;  top k of p (lowest id wins a tie);
 *   w = p[top] / sum(p[top]) when norm_topk, else p[top];
 *   x += sum over the chosen experts in ascending id of w_e * down_e(silu(gate_e h) * up_e h)
 *
 * The step's (token, choice) pairs are grouped by expert (a counting sort in token order),
 * so each expert runs its rows through the op table's matmul once (xi_matmul_part: the integer
 * path for quantized experts in the int8 tables, as dense layers), in two pool jobs for the
 * whole layer (gate/up + SiLU, then down), every expert's columns split across the threads.
 * A row's result never depends on the rows it shares a matmul with (the kernels' contract),
 * and each token sums its experts in one fixed order, so a token gets the same bits alone or
 * in any batch, in any chunking, on any thread count.
 *
 * AWQ experts under --load-format mmap (layer esrc set) are repacked on the step that first
 * routes a token to them, the missing ones split across the pool, one expert per task: the
 * file's pages of an expert never used are never read, and its kernel layout never built. A
 * repacked expert is the same bytes as one repacked at load, so the bits do not change. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model_internal.h"

void xi_moe_free(xi_moe_scratch *s) {
    free(s->logits);
    free(s->sel);
    free(s->w);
    free(s->slot);
    free(s->start);
    free(s->xg);
    free(s->gate);
    free(s->up);
    free(s->yg);
    memset(s, 0, sizeof *s);
}

#define GROW(p, n) ((p) = grow_or_free((p), (n) * sizeof *(p)))

static void *grow_or_free(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) free(p);
    return q;
}

int xi_moe_reserve(xi_model *m, int max_tokens) {
    const xi_config *c = &m->cfg;
    xi_moe_scratch *s = &m->moe;
    size_t E = 0, K = 0, F = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const xi_layer_spec *sp = &c->layer[l];
        if (sp->mlp != XI_MLP_MOE) continue;
        if ((size_t)sp->n_experts > E) E = (size_t)sp->n_experts;
        if ((size_t)sp->top_k > K) K = (size_t)sp->top_k;
        if ((size_t)sp->ffn > F) F = (size_t)sp->ffn;
    }
    if (!E || max_tokens <= s->cap) return 0;
    const size_t T = (size_t)max_tokens, h = (size_t)c->hidden_size;
    if (!GROW(s->logits, T * E) || !GROW(s->sel, T * K) || !GROW(s->w, T * K) ||
        !GROW(s->slot, T * K) || !GROW(s->start, E + 1) || !GROW(s->xg, T * K * h) ||
        !GROW(s->gate, T * K * F) || !GROW(s->up, T * K * F) || !GROW(s->yg, T * K * h)) {
        xi_moe_free(s);
        return -1;
    }
    s->cap = max_tokens;
    return 0;
}

/* ---- routing (engine thread: T x n_experts values) ---- */

/* Softmax over the router logits in place, then the top k in ascending expert id. */
static void route_token(float *p, int E, int k, int norm, int32_t *sel, float *w) {
    float mx = p[0];
    for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    float sum = 0;
    for (int e = 0; e < E; e++) sum += p[e] = expf(p[e] - mx);
    for (int e = 0; e < E; e++) p[e] /= sum;
    /* k passes of an argmax that skips the chosen: the lowest id wins a tie */
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= sel[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[j] = best;
    }
    /* ascending id: the order the token's expert outputs are summed in */
    for (int j = 1; j < k; j++)
        for (int i = j; i > 0 && sel[i - 1] > sel[i]; i--) {
            int32_t t = sel[i];
            sel[i] = sel[i - 1];
            sel[i - 1] = t;
        }
    float tot = 0;
    for (int j = 0; j < k; j++) tot += w[j] = p[sel[j]];
    if (norm)
        for (int j = 0; j < k; j++) w[j] /= tot;
}

/* ---- pool jobs ---- */

typedef struct moe_job {
    xi_model *m;
    const xi_layer *L;
    const xi_layer_spec *sp;
    int T;
    float *out;
} moe_job;

/* gate/up of every expert's rows and SiLU(gate) * up, the ffn columns split across threads. */
static void up_task(void *ctx, int ith, int nth) {
    const moe_job *j = ctx;
    const xi_moe_scratch *s = &j->m->moe;
    const xi_ops *ops = j->m->ops;
    const int64_t h = j->m->cfg.hidden_size, F = j->sp->ffn;
    long b, e;
    xi_split_range((long)F, ith, nth, 16, &b, &e);
    if (b >= e) return;
    for (int x = 0; x < j->sp->n_experts; x++) {
        const int64_t r0 = s->start[x], n = s->start[x + 1] - r0;
        if (!n) continue;
        float *g = s->gate + r0 * F, *u = s->up + r0 * F;
        const xi_linear gu[2] = {{g, &j->L->egate[x], NULL}, {u, &j->L->eup[x], NULL}};
        xi_matmul_part_n(ops, s->xg + r0 * h, h, n, gu, 2, F, b, e); /* rows quantized once */
        for (int64_t r = 0; r < n; r++) ops->silu_mul(g + r * F + b, g + r * F + b, u + r * F + b, e - b);
    }
}

/* down of every expert's rows, the hidden columns split across threads. */
static void down_task(void *ctx, int ith, int nth) {
    const moe_job *j = ctx;
    const xi_moe_scratch *s = &j->m->moe;
    const int64_t h = j->m->cfg.hidden_size, F = j->sp->ffn;
    long b, e;
    xi_split_range((long)h, ith, nth, 16, &b, &e);
    if (b >= e) return;
    for (int x = 0; x < j->sp->n_experts; x++) {
        const int64_t r0 = s->start[x], n = s->start[x + 1] - r0;
        if (n) xi_matmul_part(j->m->ops, s->yg + r0 * h, h, s->gate + r0 * F, F, n, &j->L->edown[x], b, e);
    }
}

/* Copy each token's normed input to the rows of its experts. */
static void gather_task(void *ctx, int ith, int nth) {
    const moe_job *j = ctx;
    const xi_moe_scratch *s = &j->m->moe;
    const int64_t h = j->m->cfg.hidden_size, k = j->sp->top_k;
    long b, e;
    xi_split_range(j->T, ith, nth, 1, &b, &e);
    for (long t = b; t < e; t++)
        for (int64_t c = 0; c < k; c++)
            memcpy(s->xg + (int64_t)s->slot[t * k + c] * h, j->m->xn + t * h, (size_t)h * sizeof(float));
}

/* x[t] += sum_c w[t, c] * yg[slot[t, c]], the choices in ascending expert id (into out[t]
 * instead when out is set: a tensor-parallel rank's part, summed over ranks by the caller). */
static void combine_task(void *ctx, int ith, int nth) {
    const moe_job *j = ctx;
    const xi_moe_scratch *s = &j->m->moe;
    const int64_t h = j->m->cfg.hidden_size, k = j->sp->top_k;
    long b, e;
    xi_split_range(j->T, ith, nth, 1, &b, &e);
    for (long t = b; t < e; t++) {
        float *x = (j->out ? j->out : j->m->x) + t * h;
        for (int64_t i = 0; i < h; i++) {
            float acc = 0;
            for (int64_t c = 0; c < k; c++)
                acc += s->w[t * k + c] * s->yg[(int64_t)s->slot[t * k + c] * h + i];
            if (j->out) x[i] = acc;
            else x[i] += acc;
        }
    }
}

/* ---- first use of an AWQ expert ---- */

typedef struct repack_job {
    const xi_model *m;
    const xi_layer *L;
    int n;
    const int *todo; /* [n] experts */
    void **owned;    /* [3 n] */
    size_t *bytes;   /* [3 n] */
    int *failed;     /* [n] */
} repack_job;

static void repack_task(void *ctx, int ith, int nth) {
    const repack_job *j = ctx;
    char err[160];
    for (int i = ith; i < j->n; i += nth) {
        const int x = j->todo[i];
        xi_weight *w[3] = {&j->L->egate[x], &j->L->eup[x], &j->L->edown[x]};
        for (int k = 0; k < 3 && !j->failed[i]; k++)
            if (!w[k]->data && xi_awq_repack(j->m, w[k], &j->L->esrc[3 * x + k], &j->owned[3 * i + k],
                                             &j->bytes[3 * i + k], err, sizeof err))
                j->failed[i] = 1;
    }
}

static int expert_ready(const xi_layer *L, int x) {
    return L->egate[x].data && L->eup[x].data && L->edown[x].data;
}

/* Repack the experts this step routes to that are still in the file. */
static int repack_routed(xi_model *m, int layer, char *err, size_t errlen) {
    const xi_layer *L = &m->layers[layer];
    const int E = m->cfg.layer[layer].n_experts;
    const xi_moe_scratch *s = &m->moe;
    int n = 0;
    for (int x = 0; x < E; x++) n += s->start[x + 1] > s->start[x] && !expert_ready(L, x);
    if (!n) return 0;
    int *todo = malloc((size_t)n * sizeof *todo), *failed = calloc((size_t)n, sizeof *failed);
    void **owned = calloc((size_t)(3 * n), sizeof *owned);
    size_t *bytes = calloc((size_t)(3 * n), sizeof *bytes);
    int rc = -1;
    if (!todo || !failed || !owned || !bytes) {
        xi_errf(err, errlen, "layer %d: out of memory repacking its experts", layer);
        goto done;
    }
    n = 0;
    for (int x = 0; x < E; x++)
        if (s->start[x + 1] > s->start[x] && !expert_ready(L, x)) todo[n++] = x;
    repack_job j = {m, L, n, todo, owned, bytes, failed};
    if (n < 2) repack_task(&j, 0, 1);
    else xi_pool_run(m->pool, repack_task, &j);
    rc = 0;
    for (int i = 0; i < 3 * n; i++) /* what was built is kept, whatever else failed */
        if (owned[i] && xi_model_own(m, owned[i], bytes[i], 1)) {
            xi_free_big(owned[i], bytes[i]);
            (i % 3 == 0 ? L->egate : i % 3 == 1 ? L->eup : L->edown)[todo[i / 3]].data = NULL;
            failed[i / 3] = 1;
        }
    for (int i = 0; i < n && !rc; i++)
        if (failed[i])
            rc = xi_errf(err, errlen, "layer %d expert %d: out of memory repacking its AWQ weights",
                         layer, todo[i]);
done:
    free(todo);
    free(failed);
    free(owned);
    free(bytes);
    return rc;
}

/* Token-split stages: one token runs on the calling thread without waking the pool. */
static void run_tokens(xi_model *m, xi_pool_fn fn, moe_job *j) {
    if (j->T < 2) fn(j, 0, 1);
    else xi_pool_run(m->pool, fn, j);
}

int xi_moe_forward(xi_model *m, int layer, int T, float *out, char *err, size_t errlen) {
    const xi_layer *L = &m->layers[layer];
    const xi_layer_spec *sp = &m->cfg.layer[layer];
    xi_moe_scratch *s = &m->moe;
    const int E = sp->n_experts, k = sp->top_k;
    xi_matmul(m->pool, m->ops, s->logits, m->xn, T, &L->router, NULL);
    /* route, then a counting sort of the (token, choice) pairs by expert, in token order */
    memset(s->start, 0, (size_t)(E + 1) * sizeof *s->start);
    for (int t = 0; t < T; t++) {
        route_token(s->logits + (int64_t)t * E, E, k, sp->norm_topk, s->sel + t * k, s->w + t * k);
        for (int c = 0; c < k; c++) s->start[s->sel[t * k + c] + 1]++;
    }
    for (int x = 0; x < E; x++) s->start[x + 1] += s->start[x];
    for (int t = 0; t < T; t++)
        for (int c = 0; c < k; c++) s->slot[t * k + c] = s->start[s->sel[t * k + c]]++;
    for (int x = E; x > 0; x--) s->start[x] = s->start[x - 1]; /* the fills moved each start on */
    s->start[0] = 0;
    if (m->route_hook) m->route_hook(m->route_user, layer, T, k, s->sel, s->w);
    if (L->esrc && repack_routed(m, layer, err, errlen)) return -1;
    moe_job j = {m, L, sp, T, out};
    run_tokens(m, gather_task, &j);
    xi_pool_run(m->pool, up_task, &j);
    xi_pool_run(m->pool, down_task, &j);
    run_tokens(m, combine_task, &j);
    return 0;
}
