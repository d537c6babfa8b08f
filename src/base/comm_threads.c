/* base/comm_threads: a communicator whose ranks are threads of one process. Each collective
 * publishes every rank's pointer, meets at a barrier, reads what it needs, and meets again
 * before anyone may reuse a buffer. Sums run in rank order, as the MPI plugin's do, so a
 * model sharded over threads gives the bits it gives over MPI. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/comm.h"

typedef struct group {
    pthread_barrier_t bar;
    pthread_mutex_t lock;
    int n, refs;
    const void **ptr;   /* [n] each rank's buffer of the current collective */
} group;

typedef struct rank_impl {
    group *g;
    float *sum;         /* [cap] this rank's result before it overwrites its buffer */
    int64_t cap;
} rank_impl;

static void meet(group *g) { pthread_barrier_wait(&g->bar); }

static int t_allreduce(xi_comm *c, float *buf, int64_t n, char *err, size_t errlen) {
    rank_impl *ri = c->impl;
    group *g = ri->g;
    double t0 = xi_now();
    if (n > ri->cap) {
        float *s = realloc(ri->sum, (size_t)n * sizeof *s);
        if (!s) return xi_errf(err, errlen, "tensor parallel: out of memory for %lld floats", (long long)n);
        ri->sum = s, ri->cap = n;
    }
    g->ptr[c->rank] = buf;
    meet(g);
    const float *p0 = g->ptr[0];
    for (int64_t i = 0; i < n; i++) ri->sum[i] = p0[i];
    for (int r = 1; r < g->n; r++) {
        const float *p = g->ptr[r];
        for (int64_t i = 0; i < n; i++) ri->sum[i] += p[i];
    }
    meet(g);
    memcpy(buf, ri->sum, (size_t)n * sizeof *buf);
    c->bytes_sent += n * (int64_t)sizeof(float) * (g->n - 1);
    c->seconds += xi_now() - t0;
    return 0;
}

static int t_bcast(xi_comm *c, void *buf, int64_t n, char *err, size_t errlen) {
    (void)err, (void)errlen;
    rank_impl *ri = c->impl;
    group *g = ri->g;
    if (c->rank == 0) g->ptr[0] = buf;
    meet(g);
    if (c->rank != 0) memcpy(buf, g->ptr[0], (size_t)n);
    meet(g);
    if (c->rank == 0) c->bytes_sent += n * (g->n - 1);
    return 0;
}

static int t_gather(xi_comm *c, const float *src, float *dst, const int64_t *counts, char *err,
                    size_t errlen) {
    (void)err, (void)errlen;
    rank_impl *ri = c->impl;
    group *g = ri->g;
    double t0 = xi_now();
    g->ptr[c->rank] = src;
    meet(g);
    if (c->rank == 0) {
        int64_t off = 0;
        for (int r = 0; r < g->n; r++) {
            memcpy(dst + off, g->ptr[r], (size_t)counts[r] * sizeof *dst);
            off += counts[r];
        }
    } else {
        c->bytes_sent += counts[c->rank] * (int64_t)sizeof(float);
    }
    meet(g);
    c->seconds += xi_now() - t0;
    return 0;
}

static void t_free(xi_comm *c) {
    if (!c) return;
    rank_impl *ri = c->impl;
    group *g = ri->g;
    pthread_mutex_lock(&g->lock);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->lock);
    if (last) {
        pthread_barrier_destroy(&g->bar);
        pthread_mutex_destroy(&g->lock);
        free(g->ptr);
        free(g);
    }
    free(ri->sum);
    free(ri);
    free(c);
}

int xi_comm_threads_new(int n, xi_comm **comms) {
    if (n < 1) return -1;
    group *g = calloc(1, sizeof *g);
    if (!g || !(g->ptr = calloc((size_t)n, sizeof *g->ptr))) {
        free(g);
        return -1;
    }
    pthread_barrier_init(&g->bar, NULL, (unsigned)n);
    pthread_mutex_init(&g->lock, NULL);
    g->n = n;
    for (int r = 0; r < n; r++) {
        xi_comm *c = calloc(1, sizeof *c);
        rank_impl *ri = calloc(1, sizeof *ri);
        if (!c || !ri) {
            free(c);
            free(ri);
            for (int i = 0; i < r; i++) t_free(comms[i]);
            if (!r) {
                pthread_barrier_destroy(&g->bar);
                pthread_mutex_destroy(&g->lock);
                free(g->ptr);
                free(g);
            }
            return -1;
        }
        ri->g = g;
        g->refs++;
        *c = (xi_comm){.name = "threads", .rank = r, .size = n, .allreduce_sum = t_allreduce,
                       .bcast = t_bcast, .gather = t_gather, .free = t_free, .impl = ri};
        comms[r] = c;
    }
    return 0;
}
