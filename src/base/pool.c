/* pool: persistent workers, generation-counted jobs, spin-then-sleep waits. */
#include "base/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct xi_pool {
    int n;                    /* threads including the caller */
    pthread_t *threads;       /* [n-1] workers */
    pthread_mutex_t mu;
    pthread_cond_t wake;      /* workers wait here for a new generation */
    pthread_cond_t done_cv;   /* the caller waits here for pending == 0 */
    atomic_int generation;    /* bumped once per job */
    atomic_int pending;       /* workers still running the current job */
    atomic_int stop;
    xi_pool_fn fn;
    void *ctx;
};

typedef struct {
    xi_pool *p;
    int ith;
} worker_arg;

#define SPIN_ITERS 20000

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    xi_pool *p = wa.p;
    int seen = 0;
    for (;;) {
        int g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop) && spins < SPIN_ITERS)
            spins++;
        if (g == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->ctx, wa.ith, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

xi_pool *xi_pool_new(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    xi_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            break;
        }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa)) {
            free(wa);
            p->n = i;
            break;
        }
    }
    return p;
}

void xi_pool_free(xi_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p);
}

int xi_pool_size(const xi_pool *p) { return p ? p->n : 1; }

void xi_pool_run(xi_pool *p, xi_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && spins < SPIN_ITERS)
        spins++;
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void xi_split_range(long n, int ith, int nth, long align, long *b, long *e) {
    if (align < 1) align = 1;
    long units = (n + align - 1) / align;
    long per = units / nth, rem = units % nth;
    long ub = ith * per + (ith < rem ? ith : rem);
    long ue = ub + per + (ith < rem ? 1 : 0);
    *b = ub * align < n ? ub * align : n;
    *e = ue * align < n ? ue * align : n;
}
