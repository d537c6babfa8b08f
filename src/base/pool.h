/* pool: a persistent compute thread pool. Created once at start-up; xi_pool_run is called
 * only by the thread that owns the pool (the engine thread) and returns when every worker
 * has finished. Workers spin briefly for the next job, then sleep on a condition variable,
 * so more threads than cores (or an emulator) never crawl. */
#ifndef XI_POOL_H
#define XI_POOL_H

#include <sched.h>

typedef struct xi_pool xi_pool;

/* fn(ctx, ith, nth): thread ith of nth does its share. ith 0 is the calling thread. */
typedef void (*xi_pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0: one thread per physical core of the NUMA node of the first CPU this
 * process may run on (xi_pool_default_cpus over /sys), each worker pinned to one of them. */
xi_pool *xi_pool_new(int n_threads);
/* The CPUs a default pool uses: of `allowed`, those on the NUMA node of its first CPU (all of
 * `allowed` when sysfs names no node), keeping only the lowest SMT sibling of each core
 * (per cpuN/topology/thread_siblings_list). sysfs is the sysfs root ("/sys"; tests pass a
 * fixture). Returns the count, >= 1 when allowed is not empty. */
int xi_pool_default_cpus(const char *sysfs, const cpu_set_t *allowed, cpu_set_t *out);
void xi_pool_free(xi_pool *p);
int xi_pool_size(const xi_pool *p);
/* Run fn on every thread of the pool (including the caller) and wait. p may be NULL:
 * then fn(ctx, 0, 1) runs on the caller. */
void xi_pool_run(xi_pool *p, xi_pool_fn fn, void *ctx);

/* Split [0, n) into nth nearly equal parts aligned to `align`; part ith is [*b, *e). */
void xi_split_range(long n, int ith, int nth, long align, long *b, long *e);

#endif
